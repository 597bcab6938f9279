/**
 * Benchmark: latency of the three statistics endpoints over a large store of counters.
 *
 * test/bench/stats-server.ts (a child process) fills the counters of 1,000,000 messages over 90
 * days, 50 sender domains, 500 recipient domains and 20 tags, then serves its API. This process
 * asks each endpoint for 30-day windows grouped by day (the window's end moves over the last 60
 * days of the data), one request at a time over a kept-alive connection, in each filter shape a
 * client uses: none, one sender domain, one or ten recipient domains, one tag, a sender domain
 * with a tag, two tags (a message counted once), a sender domain with a recipient domain, a
 * recipient domain with a tag, all three, and a recipient domain with two tags (the last two:
 * the finest rows). One more shape, ten recipient domains with two tags, reads the finest rows of
 * 500 (sender, recipient) domain pairs: it is measured and printed apart. Every answer is checked
 * (200, 30 buckets, and the unfiltered reception total against what was generated).
 *
 * Prints p50 / p99 per endpoint and shape, and per endpoint over all shapes (target: p99 ≤ 50 ms).
 * Figures, not pass/fail (DESIGN.md §9); not part of `npm test`. Loopback only.
 *
 *   npm run bench:stats
 *
 * Knobs (environment): BENCH_STATS_MESSAGES (1000000), BENCH_STATS_REQUESTS (per endpoint and
 * shape, 100), BENCH_RUNS (3: the whole round of requests, repeated; the medians of the runs' p99 are the figures).
 */
import { Agent, request } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { envNumber, withCleanup, type Defer } from './deliver-child.ts';
import { ServerProcess } from './server-process.ts';
import { END, RECIPIENTS, SENDERS, TAGS } from './stats-data.ts';

const REQUESTS = Math.round(envNumber('BENCH_STATS_REQUESTS', 100, 10));
const RUNS = Math.round(envNumber('BENCH_RUNS', 3));
const ENDPOINTS = ['deliverability', 'bounce', 'delivery-time'] as const;
const DAY_MS = 86_400_000;

interface Info {
  url: string;
  key: string;
  accountId: string;
  pid: number;
  messages: number;
  rows: number;
  seconds: number;
}

let seed = 5;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/** The filter shapes: each gives a query string part (fresh values per request). */
const SHAPES: Array<[string, () => string]> = [
  ['no filter', () => ''],
  ['sender_domain', () => `&sender_domain=${pick(SENDERS)}`],
  ['recipient_domains (1)', () => `&recipient_domains=${pick(RECIPIENTS.slice(0, 50))}`],
  ['recipient_domains (10)', () => `&recipient_domains=${Array.from({ length: 10 }, () => pick(RECIPIENTS)).join(',')}`],
  ['tags (1)', () => `&tags=${pick(TAGS)}`],
  ['sender_domain + tags (1)', () => `&sender_domain=${pick(SENDERS)}&tags=${pick(TAGS)}`],
  ['tags (2)', () => `&tags=${pick(TAGS)},${pick(TAGS)}`],
  ['sender_domain + recipient_domains (1)', () => `&sender_domain=${pick(SENDERS)}&recipient_domains=${pick(RECIPIENTS.slice(0, 50))}`],
  ['recipient_domains (1) + tags (1)', () => `&recipient_domains=${pick(RECIPIENTS.slice(0, 50))}&tags=${pick(TAGS)}`],
  ['sender + recipient_domains + tags', () => `&sender_domain=${pick(SENDERS)}&recipient_domains=${pick(RECIPIENTS.slice(0, 50))}&tags=${pick(TAGS)}`],
  ['recipient_domains (1) + tags (2)', () => `&recipient_domains=${pick(RECIPIENTS.slice(0, 50))}&tags=${pick(TAGS)},${pick(TAGS)}`],
];
/**
 * The worst case of the finest rows: ten recipient domains with several tags and no sender
 * domain, one range per (sender domain, recipient domain) pair of the account (500 here).
 * Measured apart, and not in the per-endpoint figure.
 */
const SLOW_SHAPES: Array<[string, () => string]> = [
  [
    'recipient_domains (10) + tags (2)',
    () => `&recipient_domains=${Array.from({ length: 10 }, () => pick(RECIPIENTS)).join(',')}&tags=${pick(TAGS)},${pick(TAGS)}`,
  ],
];

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const median = (xs: number[]) => percentile(xs, 50);

function get(info: Info, agent: Agent, path: string): Promise<{ status: number; body: string; ms: number }> {
  const url = new URL(info.url);
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = request({ host: url.hostname, port: url.port, path, agent, headers: { authorization: `Bearer ${info.key}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body, ms: performance.now() - t0 }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function main(defer: Defer): Promise<void> {
  const cpu = cpus();
  console.log('statistics benchmark');
  console.log(
    `  machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? '?'}; node ${process.version}; load average ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
  );
  const child = new ServerProcess<Info, unknown>('postilion', 'stats-server.ts', {
    env: { BENCH_STATS_MESSAGES: process.env.BENCH_STATS_MESSAGES ?? '1000000' },
  });
  defer(() => child.stop());
  const info = await child.ready(900_000);
  console.log(
    `  counters: ${info.messages} messages over 90 days, 50 sender domains, 500 recipient domains, 20 tags → ${info.rows} rows, made in ${info.seconds.toFixed(1)} s`,
  );
  console.log(`  requests: 30-day windows grouped by day, ${REQUESTS} per endpoint and filter shape per run, one at a time, ${RUNS} runs`);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  defer(() => agent.destroy());
  const base = `/v2/accounts/${info.accountId}/statistics/transactional`;

  // The whole data set, unfiltered: the reception total must be every generated message.
  const all = await get(info, agent, `${base}/deliverability?from_time=${iso(END - 90 * DAY_MS)}&to_time=${iso(END)}&group_by=month`);
  const total = (JSON.parse(all.body).data as Array<{ reception_count: number }>).reduce((n, b) => n + b.reception_count, 0);
  if (total !== info.messages) throw new Error(`reception total ${total}, generated ${info.messages}`);
  console.log(`  check: the 90-day reception total is ${total} (every generated message)`);

  const query = async (endpoint: string, shape: () => string) => {
    const to = END - Math.floor(random() * 60) * DAY_MS;
    const res = await get(info, agent, `${base}/${endpoint}?from_time=${iso(to - 30 * DAY_MS)}&to_time=${iso(to)}&group_by=day${shape()}`);
    if (res.status !== 200) throw new Error(`${endpoint}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
    const buckets = (JSON.parse(res.body) as { data: unknown[] }).data.length;
    if (buckets !== 30) throw new Error(`${endpoint}: ${buckets} buckets, not 30`);
    return res.ms;
  };
  // Warm-up: every endpoint and shape a few times.
  for (const endpoint of ENDPOINTS) for (const [, shape] of SHAPES) for (let i = 0; i < 5; i++) await query(endpoint, shape);

  const p99s = new Map<string, number[]>();
  const p50s = new Map<string, number[]>();
  const note = (label: string, ms: number[]) => {
    (p99s.get(label) ?? p99s.set(label, []).get(label)!).push(percentile(ms, 99));
    (p50s.get(label) ?? p50s.set(label, []).get(label)!).push(percentile(ms, 50));
  };
  for (let run = 1; run <= RUNS; run++) {
    const line: string[] = [];
    for (const endpoint of ENDPOINTS) {
      const overall: number[] = [];
      for (const [name, shape] of SHAPES) {
        const ms: number[] = [];
        for (let i = 0; i < REQUESTS; i++) ms.push(await query(endpoint, shape));
        note(`${endpoint}|${name}`, ms);
        overall.push(...ms);
      }
      note(endpoint, overall);
      line.push(`${endpoint} p99 ${percentile(overall, 99).toFixed(1)} ms`);
    }
    console.log(`  run ${run}: ${line.join(', ')}`);
  }

  const slow = new Map<string, number[]>();
  for (const endpoint of ENDPOINTS) {
    for (const [name, shape] of SLOW_SHAPES) {
      const ms: number[] = [];
      for (let i = 0; i < Math.max(10, Math.round(REQUESTS / 5)); i++) ms.push(await query(endpoint, shape));
      slow.set(`${endpoint}|${name}`, ms);
    }
  }

  console.log('');
  console.log('=============================== statistics summary ===============================');
  console.log(`median over ${RUNS} runs of each run's p50 / p99, ms (30-day window, group_by=day):`);
  console.log(`  ${'shape'.padEnd(50)}${ENDPOINTS.map((e) => e.padStart(20)).join('')}`);
  for (const [name] of SHAPES) {
    console.log(
      `  ${name.padEnd(50)}${ENDPOINTS.map((e) => `${median(p50s.get(`${e}|${name}`)!).toFixed(1)} / ${median(p99s.get(`${e}|${name}`)!).toFixed(1)}`.padStart(20)).join('')}`,
    );
  }
  for (const [name] of SLOW_SHAPES) {
    console.log(
      `  ${`${name} (apart)`.padEnd(50)}${ENDPOINTS.map((e) => `${percentile(slow.get(`${e}|${name}`)!, 50).toFixed(1)} / ${percentile(slow.get(`${e}|${name}`)!, 99).toFixed(1)}`.padStart(20)).join('')}`,
    );
  }
  for (const endpoint of ENDPOINTS) {
    const p99 = median(p99s.get(endpoint)!);
    console.log(
      `  ${endpoint.padEnd(16)} shapes above: p50 ${median(p50s.get(endpoint)!).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms   target p99 ≤ 50 ms: ${p99 <= 50 ? 'MET' : 'NOT MET'}`,
    );
  }
  console.log(
    `load average at end: ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
  );
  console.log('==================================================================================');
}

await withCleanup(main);
