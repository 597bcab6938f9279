import { Store } from '../src/store/store.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const store = await Store.open(mkdtempSync(join(tmpdir(), 'mb-')));
const db: any = (store as any).db;
const fams: any = store.families;
const rec = {"v":1,"id":"019aa8a5-1d2e-7c3b-8a9e-0c3f5b3f3a21","accountId":"019aa8a5-1d2e-7c3b-8a9e-0c3f5b3f3a22","domainId":"019aa8a5-1d2e-7c3b-8a9e-0c3f5b3f3a23","domain":"example.com","messageId":"<019aa8a5-1d2e-7c3b-8a9e-0c3f5b3f3a21@example.com>","direction":"outbound","source":"api","sender":"app@example.com","recipient":"someone@example.org","subject":"Hello there, this is a subject","tags":[],"status":"Received","sandbox":null,"tracking":{"open":true,"click":true},"retention":{"metadataDays":30,"dataDays":3},"schedule":null,"dueAt":"2026-11-21T08:00:00.000Z","bodyId":"019aa8a5-1d2e-7c3b-8a9e-0c3f5b3f3a29","head":"To: someone@example.org\\r\\nMessage-ID: <019aa8a5-1d2e-7c3b-8a9e-0c3f5b3f3a21@example.com>\\r\\n","contentPurged":false,"createdAt":"2026-11-21T08:00:00.000Z","updatedAt":"2026-11-21T08:00:00.000Z","sentAt":null,"deliveredAt":null,"retainUntil":"2026-12-21T08:00:00.000Z","dataRetainUntil":"2026-11-24T08:00:00.000Z","attempts":[],"openCount":0,"clickCount":0,"bounceClassification":"","isBounceNotification":false,"referenceMessageId":null};
const body = Buffer.alloc(6500, 65);
function ops(i: number) {
  const out: any[] = [{ type: 'put', family: 'bodies', key: `b${i}:000000`, value: body }, { type: 'put', family: 'messages', key: `m${i}`, value: rec }];
  for (let k = 0; k < 10; k++) out.push({ type: 'put', family: 'messageIndex', key: `a:019aa8a5-1d2e-7c3b-8a9e-0c3f5b3f3a22:someone%40example.org:${i}:${k}`, value: `m${i}` });
  out.push({ type: 'put', family: 'events', key: `e${i}`, value: { ...rec, id: 'x' } });
  out.push({ type: 'put', family: 'eventsByAccount', key: `a:e${i}`, value: `e${i}` });
  return out;
}
const N = 20000;
for (const mode of ['sub', 'root', 'sub', 'root', 'merged']) {
  let js = 0n;
  const t = process.hrtime.bigint();
  let p: Promise<unknown>[] = [];
  let group: any[] = [];
  for (let i = 0; i < N; i++) {
    const o = ops(i);
    const t0 = process.hrtime.bigint();
    if (mode === 'sub') p.push(db.batch(o.map((op) => ({ type: 'put', sublevel: fams[op.family], key: op.key, value: op.value })), { sync: false }));
    else if (mode === 'root') p.push(db.batch(o.map((op) => ({ type: 'put', key: `!${op.family}!${op.key}`, value: Buffer.isBuffer(op.value) ? op.value : JSON.stringify(op.value) })), { sync: false, valueEncoding: 'utf8', keyEncoding: 'utf8' }));
    else { group.push(...o.map((op) => ({ type: 'put', sublevel: fams[op.family], key: op.key, value: op.value }))); if (group.length > 20*14) { p.push(db.batch(group, { sync: false })); group = []; } }
    js += process.hrtime.bigint() - t0;
    if (p.length > 100) { await Promise.all(p); p = []; }
  }
  await Promise.all(p);
  console.log(mode, (Number(process.hrtime.bigint() - t) / 1000 / N).toFixed(1), 'µs wall per accept;', (Number(js) / 1000 / N).toFixed(1), 'µs sync JS');
}
await store.close();
const store2 = await Store.open(mkdtempSync(join(tmpdir(), 'mb-')));
const db2: any = (store2 as any).db; const f2: any = store2.families;
for (let r = 0; r < 2; r++) {
  let js = 0n; let p: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const o = ops(i);
    const t0 = process.hrtime.bigint();
    const b = db2.batch();
    for (const op of o) b.put(op.key, op.value, { sublevel: f2[op.family] });
    p.push(b.write({ sync: false }));
    js += process.hrtime.bigint() - t0;
    if (p.length > 100) { await Promise.all(p); p = []; }
  }
  await Promise.all(p);
  console.log('chained sub', (Number(js) / 1000 / N).toFixed(1), 'µs sync JS');
}
for (let r = 0; r < 2; r++) {
  let js = 0n; let p: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const o = ops(i);
    const t0 = process.hrtime.bigint();
    const b = db2.batch();
    for (const op of o) b.put(f2[op.family].prefix + op.key, Buffer.isBuffer(op.value) ? op.value : JSON.stringify(op.value), { keyEncoding: 'utf8', valueEncoding: Buffer.isBuffer(op.value) ? 'buffer' : 'utf8' });
    p.push(b.write({ sync: false }));
    js += process.hrtime.bigint() - t0;
    if (p.length > 100) { await Promise.all(p); p = []; }
  }
  await Promise.all(p);
  console.log('chained root', (Number(js) / 1000 / N).toFixed(1), 'µs sync JS', f2.messages.prefix);
}
