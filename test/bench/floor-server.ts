/**
 * The floor of the accept benchmark: a bare Koa app with one POST endpoint that reads the JSON
 * body, parses it, and writes it into a fresh LevelDB through the project's own group commit
 * (Store.commit: one classic-level batch with { sync: true }, concurrent writers sharing one fsync), then
 * answers 202. HTTP + JSON + durable synced write, nothing else.
 *
 *   node --import tsx test/bench/floor-server.ts
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Koa from 'koa';
import { Store } from '../../src/store/store.ts';
import { serveUntilDone } from './serve.ts';

const dir = mkdtempSync(join(tmpdir(), 'postilion-bench-floor-'));
const store = await Store.open(join(dir, 'data'));

const app = new Koa();
app.silent = true;
app.use(async (ctx) => {
  if (ctx.method !== 'POST' || ctx.path !== '/messages') {
    ctx.status = 404;
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    ctx.status = 400;
    ctx.body = { error: 'invalid JSON' };
    return;
  }
  const id = randomUUID();
  await store.commit([{ type: 'put', family: 'messages', key: id, value }]);
  ctx.status = 202;
  ctx.body = { id };
});

const server = app.listen(0, '127.0.0.1');
await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
const { port } = server.address() as AddressInfo;

serveUntilDone(
  { url: `http://127.0.0.1:${port}`, path: '/messages', pid: process.pid },
  () => ({ ...store.commitStats }),
  async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  },
);
