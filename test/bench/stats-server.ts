/**
 * The Postilion side of test/bench/stats.ts, in its own process: a daemon (the in-process test
 * harness: real LevelDB in a temp dir, API on 127.0.0.1, logging off, rate limits raised) whose
 * statistics counters are filled, before READY, with those of BENCH_STATS_MESSAGES messages
 * (1,000,000) over the 90 days before 2026-11-01T00:00Z: 50 sender domains, 500 recipient
 * domains (a few large ones, a long tail), 0–3 of 20 tags per message. Each message is received,
 * first deferred (5 %), then delivered (seconds to an hour later), bounced (3 %, six
 * classifications), failed (0.5 %) or suppressed (1 %); a quarter of the delivered are opened and
 * a fifth of those clicked. The rows are exactly those the daemon writes for such events
 * (store/counter-keys.ts `counterAdds`), summed per row here and written as puts: the statistics
 * endpoints cannot tell them from counted traffic.
 *
 *   BENCH_STATS_MESSAGES=1000000 node --import tsx test/bench/stats-server.ts
 */
import { addCounts } from '../../src/store/counter-cache.ts';
import type { Counts, WriteOp } from '../../src/store/group-commit.ts';
import type { CounterDelta } from '../../src/stats/counters.ts';
import { counterAdds } from '../../src/store/counter-keys.ts';
import { startServer } from '../helpers/harness.ts';
import { serveUntilDone } from './serve.ts';
import { DAYS, END, RECIPIENTS, SENDERS, TAGS } from './stats-data.ts';

const CLASSES = ['InvalidRecipient', 'BadDomain', 'InactiveMailbox', 'QuotaIssues', 'SpamBlocked', 'Uncategorized'];
const MESSAGES = Number(process.env.BENCH_STATS_MESSAGES ?? 1_000_000);
const RAISED_RATE = { per_second: 1_000_000, burst: 1_000_000 };

/** A small deterministic PRNG (mulberry32): the same data set on every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const server = await startServer({ config: { log: { level: 'silent' }, api: { rate_limits: { general: RAISED_RATE, statistics: RAISED_RATE } } } });
const { store } = server.daemon.core;
const accountId = server.accountId;
const t0 = performance.now();

const random = prng(17);
const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
const DAY_MS = 86_400_000;
const start = END - DAYS * DAY_MS;
/** Rows by the day (index from `start`) of the events they count; a day is written once no later message can add to it. */
const pending = new Map<number, Map<string, Counts>>();
const indexRows = new Map<string, Counts>();
let rows = 0;
let puts: WriteOp[] = [];

const flushPuts = async (force = false) => {
  if (puts.length >= 20_000 || (force && puts.length > 0)) {
    await store.commit(puts);
    puts = [];
  }
};
const count = (at: number, key: { senderDomain: string; recipientDomain: string; tags: string[] }, delta: CounterDelta) => {
  const day = Math.floor((at - start) / DAY_MS);
  let rowsOfDay = pending.get(day);
  if (!rowsOfDay) pending.set(day, (rowsOfDay = new Map()));
  for (const op of counterAdds({ accountId, at, ...key }, delta)) {
    if (op.type !== 'add') continue;
    const into = /^[ij]\|/.test(op.key) ? indexRows : rowsOfDay;
    const current = into.get(op.key);
    if (current) addCounts(current, op.value);
    else into.set(op.key, structuredClone(op.value));
  }
};
const writeDay = async (day: number) => {
  for (const [key, value] of pending.get(day) ?? []) {
    puts.push({ type: 'put', family: 'counters', key, value });
    rows += 1;
    await flushPuts();
  }
  pending.delete(day);
};

const perDay = MESSAGES / DAYS;
for (let day = 0; day < DAYS; day++) {
  const n = Math.round(perDay * (day + 1)) - Math.round(perDay * day);
  const times = Array.from({ length: n }, () => start + day * DAY_MS + Math.floor(random() * DAY_MS)).sort((a, b) => a - b);
  for (const at of times) {
    const key = {
      senderDomain: pick(SENDERS),
      // A few large mailbox providers and a long tail.
      recipientDomain: RECIPIENTS[Math.floor(RECIPIENTS.length * random() ** 3)]!,
      tags: [...new Set(Array.from({ length: Math.floor(random() * 4) }, () => pick(TAGS)))],
    };
    count(at, key, { r: 1 });
    let t = at + 500 + Math.floor(random() * 30_000);
    if (random() < 0.05) {
      count(t, key, { df: 1 });
      t += 300_000 + Math.floor(random() * 3_300_000);
    }
    const outcome = random();
    if (outcome < 0.03) count(t, key, { b: 1, bc: { [pick(CLASSES)]: 1 } });
    else if (outcome < 0.035) count(t, key, { f: 1 });
    else if (outcome < 0.045) count(at, key, { s: 1 });
    else {
      count(t, key, { d: 1, dt: { [key.recipientDomain]: { ms: t - at, n: 1 } } });
      if (random() < 0.25) {
        const opened = t + 60_000 + Math.floor(random() * 6 * 3_600_000);
        count(opened, key, { o: 1 });
        if (random() < 0.2) count(opened + 20_000, key, { c: 1 });
      }
    }
  }
  // Events fall at most ~7 h after acceptance: every day before this one is complete.
  if (day >= 1) await writeDay(day - 1);
}
for (const day of [...pending.keys()].sort((a, b) => a - b)) await writeDay(day);
for (const [key, value] of indexRows) {
  puts.push({ type: 'put', family: 'counters', key, value });
  rows += 1;
}
await flushPuts(true);

serveUntilDone(
  { url: server.url, key: server.adminKey, accountId, pid: process.pid, messages: MESSAGES, rows, seconds: (performance.now() - t0) / 1000 },
  () => ({}),
  () => server.stop(),
);
