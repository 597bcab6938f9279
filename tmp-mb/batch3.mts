import { ClassicLevel } from 'classic-level';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const db: any = new ClassicLevel(mkdtempSync(join(tmpdir(), 'mb-')), { keyEncoding: 'utf8', valueEncoding: 'buffer' });
await db.open();
const body = Buffer.alloc(6500, 65);
const small = Buffer.from('x'.repeat(40));
const N = 20000;
async function run(label: string, make: (i: number) => any[]) {
  let js = 0n; let p: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const o = make(i);
    const t0 = process.hrtime.bigint();
    p.push(db.batch(o, { sync: false }));
    js += process.hrtime.bigint() - t0;
    if (p.length > 50) { await Promise.all(p); p = []; }
  }
  await Promise.all(p);
  console.log(label.padEnd(30), (Number(js) / 1000 / N).toFixed(1), 'µs sync JS per batch');
}
for (let r = 0; r < 2; r++) {
await run('1 small op', (i) => [{ type: 'put', key: `k${r}:${i}`, value: small }]);
await run('14 small ops', (i) => Array.from({ length: 14 }, (_, k) => ({ type: 'put', key: `k${r}:${i}:${k}`, value: small })));
await run('1 body op', (i) => [{ type: 'put', key: `b${r}:${i}`, value: body }]);
await run('1 body op + 13 small', (i) => [{ type: 'put', key: `c${r}:${i}`, value: body }, ...Array.from({ length: 13 }, (_, k) => ({ type: 'put', key: `k${r}:${i}:${k}x`, value: small }))]);
}
async function runRaw(label: string, make: (i: number) => any[]) {
  let js = 0n; let p: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const o = make(i);
    const t0 = process.hrtime.bigint();
    p.push(db._batch(o, { sync: false }));
    js += process.hrtime.bigint() - t0;
    if (p.length > 50) { await Promise.all(p); p = []; }
  }
  await Promise.all(p);
  console.log(label.padEnd(30), (Number(js) / 1000 / N).toFixed(1), 'µs sync JS per raw batch');
}
await runRaw('raw 14 small ops', (i) => Array.from({ length: 14 }, (_, k) => ({ type: 'put', key: `r:${i}:${k}`, value: small, keyEncoding: 'utf8', valueEncoding: 'buffer' })));
await runRaw('raw 14 small ops', (i) => Array.from({ length: 14 }, (_, k) => ({ type: 'put', key: `r2:${i}:${k}`, value: small, keyEncoding: 'utf8', valueEncoding: 'buffer' })));
await runRaw('raw 14 small buf keys', (i) => Array.from({ length: 14 }, (_, k) => ({ type: 'put', key: Buffer.from(`r3:${i}:${k}`), value: small, keyEncoding: 'buffer', valueEncoding: 'buffer' })));
await run('14 small ops', (i) => Array.from({ length: 14 }, (_, k) => ({ type: 'put', key: `k9:${i}:${k}`, value: small })));
{
  let js = 0n; let p: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = process.hrtime.bigint();
    const b = db.batch();
    for (let k = 0; k < 14; k++) b.put(`ch:${i}:${k}`, small);
    p.push(b.write({ sync: false }));
    js += process.hrtime.bigint() - t0;
    if (p.length > 50) { await Promise.all(p); p = []; }
  }
  await Promise.all(p);
  console.log('chained 14'.padEnd(30), (Number(js) / 1000 / N).toFixed(1), 'µs sync JS per batch');
}
