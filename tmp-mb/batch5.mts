import { ClassicLevel } from 'classic-level';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const db: any = new ClassicLevel(mkdtempSync(join(tmpdir(), 'mb-')), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
await db.open();
const N = 20000;
const small = Buffer.from('v');
async function chained(label: string, fn: (b: any, i: number) => void) {
  let js = 0n; let p: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = process.hrtime.bigint();
    const b = db.batch();
    fn(b, i);
    p.push(b.write({ sync: false }));
    js += process.hrtime.bigint() - t0;
    if (p.length > 50) { await Promise.all(p); p = []; }
  }
  await Promise.all(p);
  console.log(label.padEnd(36), (Number(js) / 1000 / N).toFixed(1), 'µs');
}
for (let r = 0; r < 2; r++) {
  await chained('string value no opts', (b, i) => { for (let k = 0; k < 14; k++) b.put(`${r}a:${i}:${k}`, 'v'); });
  await chained('buffer value opts', (b, i) => { for (let k = 0; k < 14; k++) b.put(`${r}b:${i}:${k}`, small, { valueEncoding: 'buffer' }); });
  await chained('string value opts', (b, i) => { for (let k = 0; k < 14; k++) b.put(`${r}c:${i}:${k}`, 'v', { valueEncoding: 'utf8' }); });
  await chained('zero ops', (b, i) => {});
  await chained('1 op', (b, i) => { b.put(`${r}d:${i}`, 'v'); });
}
