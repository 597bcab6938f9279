import { ClassicLevel } from 'classic-level';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const db: any = new ClassicLevel(mkdtempSync(join(tmpdir(), 'mb-')), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
await db.open();
const N = 20000;
async function chained(label: string, make: (i: number) => [string, any][]) {
  let js = 0n; let p: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const o = make(i);
    const t0 = process.hrtime.bigint();
    const b = db.batch();
    for (const [k, v] of o) b.put(k, v, { valueEncoding: Buffer.isBuffer(v) ? 'buffer' : 'utf8' });
    p.push(b.write({ sync: false }));
    js += process.hrtime.bigint() - t0;
    if (p.length > 50) { await Promise.all(p); p = []; }
  }
  await Promise.all(p);
  console.log(label.padEnd(36), (Number(js) / 1000 / N).toFixed(1), 'µs');
}
const longKey = (i: number, k: number) => `!messageIndex!a:019aa8a5-1d2e-7c3b-8a9e-0c3f5b3f3a22:someone%40example.org:019aa8a5-1d2e-7c3b-8a9e-${i}:${k}`;
const json = JSON.stringify({ x: 'y'.repeat(1300) });
const body = Buffer.alloc(6500, 65);
for (let r = 0; r < 2; r++) {
  await chained('14 short keys, tiny values', (i) => Array.from({ length: 14 }, (_, k) => [`${r}a:${i}:${k}`, 'v']));
  await chained('14 long keys, tiny values', (i) => Array.from({ length: 14 }, (_, k) => [longKey(i, k) + r, 'v']));
  await chained('2 x 1.3KB strings', (i) => [[`${r}s:${i}:1`, json], [`${r}s:${i}:2`, json]]);
  await chained('1 x 6.5KB buffer', (i) => [[`${r}b:${i}`, body]]);
  await chained('1 x 6.5KB string', (i) => [[`${r}c:${i}`, body.toString('latin1')]]);
}
