/**
 * The floor of test/bench/inbound.ts: a bare smtp-server on 127.0.0.1 that writes each message to
 * LevelDB with a synced batch before its 250, and nothing else. Prints `READY {"port":…}`; stops
 * on SIGTERM or when stdin closes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Level } from 'level';
import { SMTPServer } from 'smtp-server';

const dir = mkdtempSync(join(tmpdir(), 'postilion-inbound-floor-'));
const db = new Level<string, Buffer>(join(dir, 'db'), { valueEncoding: 'buffer' });
await db.open();
let n = 0;
const server = new SMTPServer({
  authOptional: true,
  disabledCommands: ['AUTH', 'STARTTLS'],
  logger: false,
  maxClients: 1000,
  onData(stream, _session, callback) {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      const key = String(n++).padStart(12, '0');
      db.batch([{ type: 'put', key, value: Buffer.concat(chunks) }], { sync: true }).then(
        () => callback(),
        (err: Error) => callback(err),
      );
    });
  },
});
await new Promise<void>((done) => server.listen(0, '127.0.0.1', () => done()));
const stop = async () => {
  await new Promise<void>((done) => server.close(() => done()));
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit();
};
process.on('SIGTERM', () => void stop());
createInterface({ input: process.stdin }).on('close', () => void stop());
process.stdout.write(`READY ${JSON.stringify({ port: (server.server.address() as { port: number }).port, pid: process.pid })}\n`);
