/**
 * Benchmark: delivered messages per second, DKIM-signed with RSA-2048, against a sink on
 * loopback at 20 SMTP sessions, compared with this machine's async RSA-2048 signing rate.
 *
 * Each run:
 * - signing, before each delivery run and once after the last: the async
 *   `crypto.sign('sha256', header, rsa2048KeyObject, callback)` (libuv's thread pool, default 4
 *   threads) kept saturated for BENCH_SIGN_SECONDS, in this process while Postilion is idle: the
 *   signatures per second this 2-core box can make at best. A run's ratio is against the mean
 *   of the measurements before and after it;
 * - delivery: BENCH_MESSAGES single-recipient messages (5 KB HTML) accepted through
 *   POST /v2/accounts/{id}/messages in requests of 100 recipients (4 in flight), and delivered
 *   by Postilion (a child process) to the sink over 20 sessions. The clock starts when the
 *   first request is sent and stops when the sink has counted every message: acceptance and
 *   delivery overlap, as in production; the figure is messages delivered per second end to end.
 *   The delivery-only rate after the last 202 is printed beside it.
 *
 * The sink is Postfix's `smtp-sink` when it is installed (Debian package `postfix`), counting
 * with -c; otherwise an smtp-server sink in this process that discards what it gets. Which one
 * ran is printed. After each run the queue must be empty, the API must list no message of the
 * account in another status than Delivered, and a sample of the run must read Delivered. Before
 * the runs, one message goes to a capturing sink and its DKIM signature is verified (mailauth).
 *
 * Beside the rates it prints where the CPU went: Postilion's process (and its event loop's
 * thread alone), the sink, and the machine's other processes, which compete for the two cores.
 *
 * Figures, not pass/fail (DESIGN.md §9); not part of `npm test`. Loopback only.
 *
 *   npm run bench:deliver
 *
 * With BENCH_COUNTERS=compare (`npm run bench:deliver-counters`) a second Postilion child runs
 * with `statistics.counters: false`, and every run is made on both, in alternating order: the
 * summary gives the rate with counters against the rate without them (target ≥ 0.95).
 *
 * Knobs (environment): BENCH_MESSAGES (10000 per run), BENCH_RUNS (5), BENCH_SESSIONS (20),
 * BENCH_SIGN_SECONDS (3), BENCH_SINK (auto | smtp-sink | node), BENCH_CPU_PROF=<dir> (run the
 * Postilion child under --cpu-prof; at the end, the CPU per delivered message of each phase of
 * the path over the measured runs is printed, see phases.ts; cpuprofile-top.ts for more).
 */
import { generateKeyPairSync } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { startSink as startCaptureSink } from '../helpers/smtp-sink.ts';
import { envNumber, PostilionChild, withCleanup, type Defer } from './deliver-child.ts';
import { cpuSeconds, machineBusy, threadCpu } from './deliver-cpu.ts';
import { profileClockUs, profileTable, type MeasuredRun } from './phases.ts';
import { SIGN_IN_FLIGHT, SIGNED_HEADERS, signRate, syncSignRate, type SignRun } from './deliver-signing.ts';
import { smtpSinkPath, startNodeSink, startPostfixSink, until, type Sink } from './deliver-sink.ts';

const MESSAGES = Math.round(envNumber('BENCH_MESSAGES', 10_000, 100));
const RUNS = Math.round(envNumber('BENCH_RUNS', 5));
const SESSIONS = Math.round(envNumber('BENCH_SESSIONS', 20));
const SIGN_SECONDS = envNumber('BENCH_SIGN_SECONDS', 3, 0.5);
const SINK_KIND = process.env.BENCH_SINK ?? 'auto';
const COMPARE_COUNTERS = process.env.BENCH_COUNTERS === 'compare';
const CPU_PROF = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : null;
const BATCH = 100;
const ACCEPT_IN_FLIGHT = 4;
const WARMUP_MESSAGES = 2000;

// ---------------------------------------------------------------------------------------------
// Helpers

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const f0 = (n: number): string => n.toFixed(0);
const f2 = (n: number): string => n.toFixed(2);

// ---------------------------------------------------------------------------------------------
// Messages

/** A receipt-like HTML body of about `bytes` bytes. */
function receipt(bytes: number): string {
  const lines = ['<!doctype html><html><body><h1>Thanks for your order</h1><p>Here is your receipt.</p><ul>'];
  for (let i = 1; lines.join('').length < bytes - 200; i++) lines.push(`<li>Item ${i}: widget no. ${(i * 7907) % 1000}, $${(i * 2.39).toFixed(2)}</li>`);
  lines.push('</ul><p>Questions? <a href="https://example.com/help">Ask us</a>.</p></body></html>');
  return lines.join('\n');
}
const HTML = receipt(5 * 1024);

function batchBody(from: string, tag: string, first: number, count: number): unknown {
  return {
    from: { email: from, name: 'Shop' },
    recipients: Array.from({ length: count }, (_, i) => ({ email: `${tag}-${first + i}@sink.test`, name: `Customer ${first + i}` })),
    subject: `Your receipt (${tag})`,
    html_content: HTML,
  };
}

/** Accepts `total` messages in requests of BATCH recipients, ACCEPT_IN_FLIGHT at a time; returns their ids. */
async function acceptAll(child: PostilionChild, tag: string, total: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < total) {
      const first = next;
      const count = Math.min(BATCH, total - first);
      next += count;
      const res = await child.api('POST', child.info.path, batchBody(child.info.from, tag, first, count));
      if (res.status !== 202) throw new Error(`accept: HTTP ${res.status} ${JSON.stringify(res.body).slice(0, 500)}`);
      const data = res.body.data as Array<{ id?: string; error?: unknown }>;
      const failed = data.filter((d) => d.error || !d.id);
      if (data.length !== count || failed.length > 0)
        throw new Error(`accept: ${data.length} outcomes for ${count}, ${failed.length} refused: ${JSON.stringify(failed[0])}`);
      for (const d of data) ids.push(d.id!);
    }
  };
  await Promise.all(Array.from({ length: ACCEPT_IN_FLIGHT }, worker));
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Checks

/** One message to the capturing sink: its DKIM signature must verify, with an RSA-2048 key. */
async function verifyOne(child: PostilionChild, capture: Awaited<ReturnType<typeof startCaptureSink>>): Promise<string> {
  const res = await child.api('POST', child.info.path, {
    ...(batchBody(child.info.from, 'verify', 0, 1) as object),
    recipients: [{ email: 'check@verify.test' }],
  });
  if (res.status !== 202) throw new Error(`verify: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  const [got] = await capture.waitFor(1, 20_000);
  return child.verifyDkim(got!.raw);
}

/**
 * After a run: nothing running or waiting in memory, no message of the account left undelivered
 * (the status list, once the last outcomes are on disk), and a sample of the run reads Delivered.
 */
async function checkRun(child: PostilionChild, ids: string[]): Promise<string> {
  await child.drained();
  const sample = [0, ids.length - 1, ...Array.from({ length: 8 }, () => Math.floor(Math.random() * ids.length))];
  const statuses = new Set<string>();
  for (const i of sample) {
    const res = await child.api('GET', `${child.info.path}/${encodeURIComponent(ids[i]!)}`);
    if (res.status !== 200) throw new Error(`read ${ids[i]}: HTTP ${res.status}`);
    statuses.add(res.body.status as string);
  }
  if (statuses.size !== 1 || !statuses.has('Delivered')) throw new Error(`sampled messages are ${[...statuses].join(', ')}, not all Delivered`);
  return `none left undelivered; ${sample.length} sampled Delivered`;
}

/** What went wrong when the sink does not get everything: queue state and some deferred messages. */
async function diagnose(child: PostilionChild, sunk: number): Promise<string> {
  try {
    const stats = await child.stats();
    const deferred = await child.api('GET', `${child.info.path}?status=Deferred,Failed,Bounced&limit=3`);
    const attempts = (deferred.body?.data ?? []).map(
      (m: { status: string; delivery_attempts?: Array<{ log: string }> }) => `${m.status}: ${m.delivery_attempts?.at(-1)?.log}`,
    );
    return `the sink counted ${sunk}; postilion ${JSON.stringify(stats)}; not delivered, e.g.: ${attempts.join(' | ') || 'none listed'}`;
  } catch (err) {
    return `the sink counted ${sunk}; no diagnosis: ${(err as Error).message}`;
  }
}

// ---------------------------------------------------------------------------------------------
// A delivery run

interface DeliveryRun {
  perSecond: number;
  acceptPerSecond: number;
  /** Delivery rate after the last 202, over what was still undelivered then (null when little was). */
  drainPerSecond: number | null;
  seconds: number;
  serverCores: number | null;
  serverCpuPerMessage: number | null;
  /** The event loop's thread alone (the rest: libuv's pool signing, LevelDB, V8's helpers). */
  mainThreadCores: number | null;
  /** CPU the machine's other processes used during the run (not postilion, the sink or this one). */
  otherCores: number | null;
  /** This process: the API client, the polling, and the sink when it is the smtp-server one. */
  benchCores: number | null;
  sinkCores: number | null;
  fsyncs: number;
  check: string;
  /** For the per-phase table (phases.ts). */
  measured: MeasuredRun;
}

async function deliveryRun(child: PostilionChild, sink: Sink, tag: string, total: number): Promise<DeliveryRun> {
  const before = await child.stats();
  const base = sink.count();
  const cpu0 = cpuSeconds(child.info.pid);
  const threads0 = threadCpu(child.info.pid);
  const machine0 = machineBusy();
  const own0 = cpuSeconds(process.pid);
  const sinkCpu0 = sink.cpu();
  const t0 = performance.now();
  const from = profileClockUs();
  let tAccepted = 0;
  let sunkAtAccepted = 0;
  const accepting = acceptAll(child, tag, total).then((ids) => {
    tAccepted = performance.now();
    sunkAtAccepted = sink.count() - base;
    return ids;
  });
  // Fail fast if acceptance fails; otherwise wait for the sink to count everything.
  let acceptError: Error | null = null;
  accepting.catch((err: Error) => (acceptError = err));
  try {
    await until(
      `the sink to count ${total} messages`,
      () => {
        if (acceptError) throw acceptError;
        return sink.count() - base >= total;
      },
      Math.max(120_000, total * 20),
      2,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; ${await diagnose(child, sink.count() - base)}`, { cause: err });
  }
  const t1 = performance.now();
  const to = profileClockUs();
  const cpu1 = cpuSeconds(child.info.pid);
  const threads1 = threadCpu(child.info.pid);
  const machine1 = machineBusy();
  const own1 = cpuSeconds(process.pid);
  const sinkCpu1 = sink.cpu();
  const ids = await accepting;
  const check = await checkRun(child, ids);
  const after = await child.stats();
  const seconds = (t1 - t0) / 1000;
  const left = total - sunkAtAccepted;
  const drainSeconds = (t1 - tAccepted) / 1000;
  return {
    perSecond: total / seconds,
    acceptPerSecond: total / ((tAccepted - t0) / 1000),
    drainPerSecond: left >= total / 5 && drainSeconds > 0 ? left / drainSeconds : null,
    seconds,
    serverCores: cpu0 === null || cpu1 === null ? null : (cpu1 - cpu0) / seconds,
    serverCpuPerMessage: cpu0 === null || cpu1 === null ? null : ((cpu1 - cpu0) * 1e6) / total,
    mainThreadCores: threads0 === null || threads1 === null ? null : (threads1.main - threads0.main) / seconds,
    // What the rest of the machine used meanwhile: other work competing for the two cores.
    benchCores: own0 === null || own1 === null ? null : (own1 - own0) / seconds,
    otherCores: [cpu0, cpu1, machine0, machine1, own0, own1, sinkCpu0, sinkCpu1].some((x) => x === null)
      ? null
      : (machine1! - machine0! - (cpu1! - cpu0!) - (own1! - own0!) - (sinkCpu1! - sinkCpu0!)) / seconds,
    sinkCores: sinkCpu0 === null || sinkCpu1 === null ? null : (sinkCpu1 - sinkCpu0) / seconds,
    fsyncs: after.batches - before.batches,
    check,
    measured: {
      window: { from, to },
      messages: total,
      cpuSeconds: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0,
      mainThreadCpuSeconds: threads0 === null || threads1 === null ? null : threads1.main - threads0.main,
    },
  };
}

function runLine(label: string, r: DeliveryRun, before: SignRun, after: SignRun): string {
  const sign = (before.perSecond + after.perSecond) / 2;
  return (
    `  ${label.padEnd(8)} delivered ${f0(r.perSecond).padStart(5)} msgs/s (${MESSAGES} in ${r.seconds.toFixed(2)} s)` +
    `  accepted ${f0(r.acceptPerSecond).padStart(5)}/s` +
    `  after last 202 ${r.drainPerSecond === null ? '  n/a' : f0(r.drainPerSecond).padStart(5)}/s` +
    (r.serverCores === null ? '' : `  postilion CPU ${f2(r.serverCores)} cores = ${f0(r.serverCpuPerMessage!)} µs/msg`) +
    (r.mainThreadCores === null ? '' : ` (main thread ${f2(r.mainThreadCores)})`) +
    (r.sinkCores === null ? '' : `  sink CPU ${f2(r.sinkCores)} cores`) +
    (r.benchCores === null ? '' : `  this process ${f2(r.benchCores)} cores`) +
    (r.otherCores === null ? '' : `  other processes ${f2(Math.max(0, r.otherCores))} cores`) +
    `  fsyncs ${r.fsyncs}` +
    `  | signing before/after ${f0(before.perSecond)}/${f0(after.perSecond)} signs/s (${f2(before.cores)}/${f2(after.cores)} cores` +
    `${before.otherCores === null || after.otherCores === null ? '' : `, other processes ${f2(before.otherCores)}/${f2(after.otherCores)}`})` +
    `  ratio ${(r.perSecond / sign).toFixed(3)}` +
    `  | ${r.check}`
  );
}

// ---------------------------------------------------------------------------------------------

async function main(defer: Defer): Promise<void> {
  const sinkPath = SINK_KIND === 'node' ? null : smtpSinkPath();
  if (SINK_KIND === 'smtp-sink' && !sinkPath) throw new Error('BENCH_SINK=smtp-sink but smtp-sink is not installed (Debian package postfix)');
  const sink = sinkPath ? await startPostfixSink(sinkPath) : await startNodeSink();
  defer(() => sink.close());
  const capture = await startCaptureSink();
  defer(() => capture.close());
  const child = new PostilionChild(
    { BENCH_SINK_PORT: String(sink.port), BENCH_CAPTURE_PORT: String(capture.port), BENCH_SESSIONS: String(SESSIONS) },
    CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`] : [],
  );
  defer(() => child.stop());
  await child.ready();
  // The baseline without statistics counters, when comparing.
  let plain: PostilionChild | null = null;
  if (COMPARE_COUNTERS) {
    plain = new PostilionChild(
      { BENCH_SINK_PORT: String(sink.port), BENCH_CAPTURE_PORT: String(capture.port), BENCH_SESSIONS: String(SESSIONS), BENCH_COUNTERS: 'off' },
      [],
    );
    defer(() => plain!.stop());
    await plain.ready();
  }

  const cpu = cpus();
  console.log('deliver benchmark');
  console.log(
    `  machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? '?'}; node ${process.version}; UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? '4 (default)'}`,
  );
  console.log(
    `  load average at start: ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')} (other work on this machine skews the figures)`,
  );
  console.log(`  sink: ${sink.name} on 127.0.0.1:${sink.port}`);
  console.log(
    `  postilion: child pid ${child.info.pid}, delivery.concurrency = per_destination = ${SESSIONS} (all mail to one destination: ${SESSIONS} sessions),` +
      ' smarthost 127.0.0.1 (tls off), default messages_per_connection (sessions reused), DKIM RSA-2048 only, log silent, rate limit raised',
  );
  console.log(
    `  load: ${MESSAGES} messages per run, 5 KB HTML (${HTML.length} bytes), one recipient each, accepted in requests of ${BATCH} recipients (${ACCEPT_IN_FLIGHT} in flight)`,
  );
  console.log(`  measured: from the first request sent until the sink has counted all ${MESSAGES} (acceptance and delivery overlap)`);
  console.log(
    `  signing: async crypto.sign('sha256', ${SIGNED_HEADERS.length}-byte header block, RSA-2048 KeyObject), ${SIGN_IN_FLIGHT} in flight, ${SIGN_SECONDS} s, in the benchmark process with postilion idle`,
  );
  if (CPU_PROF) console.log(`  postilion child runs under --cpu-prof; profile goes to ${CPU_PROF}`);
  console.log('');

  console.log(`DKIM check: ${await verifyOne(child, capture)}`);
  const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  console.log(`one core, synchronous crypto.sign: ${f0(syncSignRate(key, 1))} signs/s (context)`);
  await signRate(key, 0.5);
  console.log(`warm-up: ${WARMUP_MESSAGES} messages…`);
  await deliveryRun(child, sink, 'warm', WARMUP_MESSAGES);
  if (plain) await deliveryRun(plain, sink, 'warm-plain', WARMUP_MESSAGES);
  console.log('');

  // Signing is measured before each delivery run and once after the last; a run is compared
  // with the mean of the measurements on either side of it (this machine's speed drifts).
  const deliveries: DeliveryRun[] = [];
  const signs: SignRun[] = [await signRate(key, SIGN_SECONDS)];
  const around: number[] = [];
  console.log(`runs (signing, delivery, signing, …):`);
  const withoutCounters: DeliveryRun[] = [];
  for (let i = 1; i <= RUNS; i++) {
    // Comparing: the child without counters runs first on even runs, second on odd ones.
    if (plain && i % 2 === 0) withoutCounters.push(await deliveryRun(plain, sink, `plain${i}`, MESSAGES));
    const d = await deliveryRun(child, sink, `run${i}`, MESSAGES);
    deliveries.push(d);
    if (plain && i % 2 === 1) withoutCounters.push(await deliveryRun(plain, sink, `plain${i}`, MESSAGES));
    if (plain) console.log(`  #${i} without counters: delivered ${f0(withoutCounters.at(-1)!.perSecond)} msgs/s | ${withoutCounters.at(-1)!.check}`);
    const s = await signRate(key, SIGN_SECONDS);
    signs.push(s);
    around.push((signs[i - 1]!.perSecond + s.perSecond) / 2);
    console.log(runLine(`#${i}`, d, signs[i - 1]!, s));
  }
  console.log('');

  const dMed = median(deliveries.map((r) => r.perSecond));
  const sMed = median(signs.map((r) => r.perSecond));
  const drains = deliveries.map((r) => r.drainPerSecond).filter((x): x is number => x !== null);
  const ratio = dMed / sMed;
  console.log('================================ deliver summary ================================');
  console.log(`sink: ${sink.name}`);
  console.log(`median of ${RUNS} runs, ${MESSAGES} messages each, ${SESSIONS} sessions, RSA-2048 DKIM:`);
  console.log(`  postilion delivered (accept → sink has all)   ${f0(dMed).padStart(6)} msgs/s   per run: ${deliveries.map((r) => f0(r.perSecond)).join(' ')}`);
  console.log(`  postilion accepted (API, 100 per request)     ${f0(median(deliveries.map((r) => r.acceptPerSecond))).padStart(6)} msgs/s`);
  if (drains.length > 0)
    console.log(`  postilion delivery after the last 202         ${f0(median(drains)).padStart(6)} msgs/s   (${drains.length} runs with a backlog then)`);
  console.log(`  async RSA-2048 signing, 2 cores                ${f0(sMed).padStart(6)} signs/s  measurements: ${signs.map((r) => f0(r.perSecond)).join(' ')}`);
  if (deliveries[0]?.serverCores != null) {
    console.log(
      `  postilion CPU: ${f2(median(deliveries.map((r) => r.serverCores!)))} cores, ${f0(median(deliveries.map((r) => r.serverCpuPerMessage!)))} µs per message (user+sys, all threads)` +
        (deliveries[0]?.sinkCores != null ? `; sink ${f2(median(deliveries.map((r) => r.sinkCores!)))} cores` : ''),
    );
  }
  console.log(
    `  ratio delivered / signing: ${ratio.toFixed(3)} (per run, against the signing around it: ${deliveries.map((r, i) => (r.perSecond / around[i]!).toFixed(3)).join(' ')})` +
      `   target ≥ 0.5 (issue 35): ${ratio >= 0.5 ? 'MET' : 'NOT MET'}`,
  );
  if (plain) {
    const pMed = median(withoutCounters.map((r) => r.perSecond));
    const counterRatio = dMed / pMed;
    console.log(`  statistics counters on  (the runs above)       ${f0(dMed).padStart(6)} msgs/s`);
    console.log(
      `  statistics counters off (statistics.counters: false) ${f0(pMed).padStart(6)} msgs/s   per run: ${withoutCounters.map((r) => f0(r.perSecond)).join(' ')}`,
    );
    console.log(`  ratio with / without counters: ${counterRatio.toFixed(3)}   target ≥ 0.95: ${counterRatio >= 0.95 ? 'MET' : 'NOT MET'}`);
  }
  console.log(
    `load average at end: ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
  );
  console.log('=================================================================================');
  if (CPU_PROF) {
    // The profile is written when the child exits.
    await child.stop();
    console.log('');
    const runs = deliveries.map((r) => r.measured);
    const table = profileTable(CPU_PROF, child.info.pid, 'delivered message', runs);
    console.log(table.join('\n'));
  }
}

await withCleanup(main);
