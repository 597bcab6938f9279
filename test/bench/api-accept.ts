/**
 * Benchmark: durable accepts per second of POST /v2/accounts/{id}/messages.
 *
 * - Single-recipient 5 KB HTML sends at 50 concurrent connections (autocannon), against
 *   Postilion and, in the same run, against a floor: a bare Koa + LevelDB endpoint that does
 *   only HTTP + JSON parse + a group-committed synced write (test/bench/floor-server.ts).
 *   Runs alternate floor / Postilion; the medians and their ratio are printed.
 * - 100-recipient requests (same HTML, 100 distinct recipients) against Postilion: recipients/s.
 *
 * Each server runs in its own child process, so that load generation does not share its event
 * loop. Figures, not pass/fail (DESIGN.md §9); not part of `npm test`.
 *
 *   npm run bench:api-accept
 *   node --import tsx test/bench/api-accept.ts
 *
 * Knobs (environment): BENCH_DURATION (s per run, 10), BENCH_WARMUP (s, 3), BENCH_RUNS (5),
 * BENCH_CONNECTIONS (50), BENCH_BULK_RUNS (3), BENCH_BULK_CONNECTIONS (50),
 * BENCH_CPU_PROF=<dir> (run the Postilion child under --cpu-prof, profile written to <dir>; at the
 * end, the CPU per 202 (per recipient for the 100-recipient runs) of each phase of the path over
 * the measured runs is printed, see phases.ts).
 * BENCH_RUNS=0 or BENCH_BULK_RUNS=0 skips that part (e.g. to profile the other alone).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon, { type Result } from 'autocannon';
import { threadCpu } from './deliver-cpu.ts';
import { profileClockUs, profileTable, type MeasuredRun } from './phases.ts';
import { ServerProcess } from './server-process.ts';
import { composeBody, composeWithNodemailer } from '../../src/message/compose.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');

const num = (name: string, fallback: number, min = Number.MIN_VALUE): number => {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number ≥ ${min}, not ${raw}`);
  return value;
};
const DURATION = num('BENCH_DURATION', 10);
const WARMUP = num('BENCH_WARMUP', 3);
const RUNS = Math.round(num('BENCH_RUNS', 5, 0));
const CONNECTIONS = Math.round(num('BENCH_CONNECTIONS', 50));
const BULK_RUNS = Math.round(num('BENCH_BULK_RUNS', 3, 0));
const BULK_CONNECTIONS = Math.round(num('BENCH_BULK_CONNECTIONS', 50));
const BULK_RECIPIENTS = 100;
const CPU_PROF = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : null;

// ---------------------------------------------------------------------------------------------
// Server children

interface CommitStats {
  batches: number;
  writes: number;
}

interface ServerInfo {
  url: string;
  path: string;
  key?: string;
  from?: string;
  rateLimit?: { per_second: number; burst: number };
  pid: number;
}

type ServerChild = ServerProcess<ServerInfo, CommitStats>;

// ---------------------------------------------------------------------------------------------
// Request bodies

/** A transactional-looking HTML body of exactly `bytes` bytes. */
function html(bytes: number): string {
  const head =
    '<!doctype html><html><head><meta charset="utf-8"><title>Your receipt</title>' +
    '<style>body{font-family:Arial,sans-serif;color:#222}table{border-collapse:collapse}td{padding:4px 8px}</style>' +
    '</head><body><h1>Thanks for your order</h1><p>Hello, here is your receipt.</p><table>';
  const tail = '</table><p>Questions? Reply to this email or visit <a href="https://example.com/help">our help centre</a>.</p></body></html>';
  let rows = '';
  for (let i = 1; head.length + rows.length + tail.length < bytes; i++) {
    rows += `<tr><td>Item ${i}</td><td>Widget model ${(i * 7919) % 1000}</td><td>$${(i * 3.17).toFixed(2)}</td></tr>`;
  }
  let out = head + rows + tail;
  if (out.length > bytes) out = head + rows.slice(0, rows.lastIndexOf('<tr>')) + tail;
  return out + ' '.repeat(bytes - out.length);
}

const HTML = html(5 * 1024);

function sendBody(from: string, recipients: number): string {
  return JSON.stringify({
    from: { email: from, name: 'Shop' },
    recipients: Array.from({ length: recipients }, (_, i) => ({
      email: recipients === 1 ? 'customer@example.org' : `customer-${String(i).padStart(3, '0')}@example.org`,
      name: `Customer ${i}`,
    })),
    subject: 'Your receipt',
    html_content: HTML,
  });
}

// ---------------------------------------------------------------------------------------------
// Measurement

interface Run {
  target: string;
  requests: number;
  accepted: number;
  perSecond: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  p50: number;
  p99: number;
  committedWriters: number;
  fsyncBatches: number;
  /** CPU time (user + system, all threads) the server process used per second of the run. */
  serverCpu: number | null;
  /** Server CPU time per accepted request, in microseconds. */
  cpuPerAccept: number | null;
  /** For the per-phase table (phases.ts): a message is a 202. */
  measured: MeasuredRun;
}

/** User + system CPU seconds of a process (all its threads), from /proc; null where there is none. */
function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return null;
  }
}

async function load(url: string, headers: Record<string, string>, body: string, connections: number, duration: number): Promise<Result> {
  return autocannon({ url, method: 'POST', headers, body, connections, duration, timeout: 60 });
}

async function measure(child: ServerChild, label: string, headers: Record<string, string>, body: string, connections: number): Promise<Run> {
  const before = await child.stats();
  const cpuBefore = cpuSeconds(child.info.pid);
  const threadsBefore = threadCpu(child.info.pid);
  const from = profileClockUs();
  const r = await load(child.info.url + child.info.path, headers, body, connections, DURATION);
  const to = profileClockUs();
  const cpuAfter = cpuSeconds(child.info.pid);
  const threadsAfter = threadCpu(child.info.pid);
  // Let requests autocannon abandoned at the end of the run finish before counting commits.
  await new Promise((done) => setTimeout(done, 500));
  const after = await child.stats();
  const statusCodes = Object.fromEntries(Object.entries(r.statusCodeStats).map(([code, s]) => [code, s.count]));
  const accepted = statusCodes['202'] ?? 0;
  return {
    target: label,
    requests: r.requests.total,
    accepted,
    perSecond: accepted / r.duration,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes,
    p50: r.latency.p50,
    p99: r.latency.p99,
    committedWriters: after.writes - before.writes,
    fsyncBatches: after.batches - before.batches,
    serverCpu: cpuBefore === null || cpuAfter === null ? null : (cpuAfter - cpuBefore) / r.duration,
    cpuPerAccept: cpuBefore === null || cpuAfter === null || accepted === 0 ? null : ((cpuAfter - cpuBefore) * 1e6) / accepted,
    measured: {
      window: { from, to },
      messages: accepted,
      cpuSeconds: cpuBefore === null || cpuAfter === null ? null : cpuAfter - cpuBefore,
      mainThreadCpuSeconds: threadsBefore === null || threadsAfter === null ? null : threadsAfter.main - threadsBefore.main,
    },
  };
}

async function warmUp(child: ServerChild, headers: Record<string, string>, body: string, connections: number): Promise<void> {
  const r = await load(child.info.url + child.info.path, headers, body, connections, WARMUP);
  if (r.non2xx > 0 || r.errors > 0) {
    throw new Error(`${child.name} warm-up: ${r.non2xx} non-2xx, ${r.errors} errors, status codes ${JSON.stringify(r.statusCodeStats)}`);
  }
}

/** One request by hand: the endpoint answers 202 and (Postilion) accepted every recipient. */
async function preflight(child: ServerChild, headers: Record<string, string>, body: string, recipients: number | null): Promise<void> {
  const res = await fetch(child.info.url + child.info.path, { method: 'POST', headers, body });
  const text = await res.text();
  if (res.status !== 202) throw new Error(`${child.name} preflight: HTTP ${res.status} ${text}`);
  if (recipients !== null) {
    const data = (JSON.parse(text) as { data: Array<{ error?: unknown }> }).data;
    const failed = data.filter((d) => d.error);
    if (data.length !== recipients || failed.length > 0)
      throw new Error(`${child.name} preflight: ${data.length} outcomes, ${failed.length} errors: ${text.slice(0, 500)}`);
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const f0 = (n: number): string => n.toFixed(0);
const f1 = (n: number): string => n.toFixed(1);
const pad = (s: string, n: number): string => s.padEnd(n);
const lpad = (s: string, n: number): string => s.padStart(n);

function line(run: Run, extra = ''): string {
  const codes = Object.entries(run.statusCodes)
    .map(([c, n]) => `${c}:${n}`)
    .join(' ');
  return (
    `  ${pad(run.target, 22)} ${lpad(f1(run.perSecond), 9)}/s  202s ${lpad(String(run.accepted), 6)}  non-2xx ${run.non2xx}  errors ${run.errors}` +
    `  timeouts ${run.timeouts}  p50 ${lpad(f1(run.p50), 6)} ms  p99 ${lpad(f1(run.p99), 6)} ms` +
    `  synced writers ${run.committedWriters} in ${run.fsyncBatches} fsyncs (${f1(run.committedWriters / Math.max(1, run.fsyncBatches))}/fsync)` +
    (run.serverCpu === null ? '' : `  server CPU ${f0(run.serverCpu * 100)}% = ${f0(run.cpuPerAccept ?? 0)} µs/202`) +
    `  [${codes}]${extra}`
  );
}

function filesystemOf(path: string): string {
  try {
    return execFileSync('df', ['-T', path], { encoding: 'utf8' }).trim().split('\n').pop()!.split(/\s+/).slice(0, 2).join(' ');
  } catch {
    return 'unknown';
  }
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const children: ServerChild[] = [];
  let interrupted = false;
  const onSignal = (): void => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write('\ninterrupted: stopping servers…\n');
    void Promise.allSettled(children.map((c) => c.stop())).then(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const floor: ServerChild = new ServerProcess('floor', 'floor-server.ts');
    children.push(floor);
    const postilion: ServerChild = new ServerProcess('postilion', 'postilion-server.ts', {
      nodeArgs: CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`] : [],
    });
    children.push(postilion);
    await Promise.all([floor.ready(), postilion.ready()]);

    const cpu = cpus();
    console.log('api-accept benchmark');
    console.log(`  machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? '?'}; node ${process.version}; temp dir ${tmpdir()} on ${filesystemOf(tmpdir())}`);
    console.log(
      `  load average at start: ${loadavg()
        .map((n) => n.toFixed(2))
        .join(' ')} (other work on this machine skews the figures)`,
    );
    console.log(
      `  load: autocannon, ${CONNECTIONS} connections, ${WARMUP} s warm-up per server, ${RUNS} × ${DURATION} s runs alternating floor / postilion; loopback 127.0.0.1`,
    );
    console.log(`  body: single recipient, ${HTML.length}-byte html_content (request ${sendBody('app@example.com', 1).length} bytes)`);
    console.log(
      `  postilion: ${postilion.info.url}${postilion.info.path} (pid ${postilion.info.pid}); per-account general rate limit RAISED to` +
        ` ${postilion.info.rateLimit?.per_second}/s, burst ${postilion.info.rateLimit?.burst} (default 100/s, burst 200) so it does not cap the load; log level silent`,
    );
    console.log(
      `  floor:     ${floor.info.url}${floor.info.path} (pid ${floor.info.pid}); bare Koa, JSON.parse, Store.commit (group commit, one synced classic-level batch), 202`,
    );
    if (CPU_PROF) console.log(`  postilion child runs under --cpu-prof; profile goes to ${CPU_PROF}`);
    console.log('');

    const pHeaders = { 'content-type': 'application/json', authorization: `Bearer ${postilion.info.key}` };
    const fHeaders = { 'content-type': 'application/json' };
    const single = sendBody(postilion.info.from!, 1);
    const bulk = sendBody(postilion.info.from!, BULK_RECIPIENTS);

    await preflight(floor, fHeaders, single, null);
    await preflight(postilion, pHeaders, single, 1);
    await preflight(postilion, pHeaders, bulk, BULK_RECIPIENTS);

    const floorRuns: Run[] = [];
    const postilionRuns: Run[] = [];
    if (RUNS > 0) {
      console.log('warm-up…');
      await warmUp(floor, fHeaders, single, CONNECTIONS);
      await warmUp(postilion, pHeaders, single, CONNECTIONS);
      console.log(`single-recipient sends, ${CONNECTIONS} connections, ${DURATION} s each:`);
      for (let i = 1; i <= RUNS; i++) {
        const f = await measure(floor, `floor #${i}`, fHeaders, single, CONNECTIONS);
        floorRuns.push(f);
        console.log(line(f));
        const p = await measure(postilion, `postilion #${i}`, pHeaders, single, CONNECTIONS);
        postilionRuns.push(p);
        console.log(line(p, `  ratio ${(p.perSecond / f.perSecond).toFixed(3)}`));
      }
      console.log('');
    }

    const bulkRuns: Run[] = [];
    if (BULK_RUNS > 0) {
      console.log(`${BULK_RECIPIENTS}-recipient sends (postilion), ${BULK_CONNECTIONS} connections, ${DURATION} s each:`);
      await warmUp(postilion, pHeaders, bulk, BULK_CONNECTIONS);
      for (let i = 1; i <= BULK_RUNS; i++) {
        const b = await measure(postilion, `postilion ×${BULK_RECIPIENTS} #${i}`, pHeaders, bulk, BULK_CONNECTIONS);
        bulkRuns.push(b);
        console.log(line(b, `  = ${f0(b.perSecond * BULK_RECIPIENTS)} recipients/s`));
      }
      console.log('');
    }

    // What the MIME composer alone costs for this body, measured in a fresh process with the
    // servers idle: the floor's whole request has to be compared with it. nodemailer's
    // MailComposer (the fallback, for attachments) beside ours (what the server uses for this body).
    const nodemailerCompose = composeCostInChild('nodemailer');
    const compose = composeCostInChild('ours');
    console.log(`nodemailer MailComposer alone, this body: ${f0(nodemailerCompose)} µs CPU per message (median of 5 × 1000, fresh process, servers idle)`);
    console.log(
      `Postilion's composer (composeBody) alone, this body: ${f0(compose)} µs CPU per message (median of 5 × 1000, fresh process, servers idle) = ${(nodemailerCompose / compose).toFixed(1)}× less`,
    );
    console.log('');

    const all = [...floorRuns, ...postilionRuns, ...bulkRuns];
    const bad = all.reduce((n, r) => n + r.non2xx + r.errors + r.timeouts, 0);
    const unsynced = all.filter((r) => r.committedWriters < r.accepted);
    const med = (runs: Run[], pick: (r: Run) => number): number => median(runs.map(pick));
    const non2xx = (runs: Run[]): number => runs.reduce((n, r) => n + r.non2xx, 0);
    const latency = (runs: Run[]): string => `p50 ${f1(med(runs, (r) => r.p50))} ms  p99 ${f1(med(runs, (r) => r.p99))} ms`;

    console.log('================================ api-accept summary ================================');
    if (RUNS > 0) {
      const fMed = med(floorRuns, (r) => r.perSecond);
      const pMed = med(postilionRuns, (r) => r.perSecond);
      const ratio = pMed / fMed;
      console.log(`single recipient, 5 KB HTML, ${CONNECTIONS} connections, median of ${RUNS} × ${DURATION} s:`);
      console.log(`  floor (Koa + JSON + LevelDB group commit, sync)  ${lpad(f1(fMed), 8)} accepts/s   ${latency(floorRuns)}   non-2xx ${non2xx(floorRuns)}`);
      console.log(
        `  postilion POST /v2/accounts/{id}/messages        ${lpad(f1(pMed), 8)} accepts/s   ${latency(postilionRuns)}   non-2xx ${non2xx(postilionRuns)}`,
      );
      if (floorRuns[0]?.cpuPerAccept != null && postilionRuns[0]?.cpuPerAccept != null) {
        console.log(
          `  server CPU per 202 (user+sys, all threads): floor ${f0(med(floorRuns, (r) => r.cpuPerAccept!))} µs, postilion ${f0(med(postilionRuns, (r) => r.cpuPerAccept!))} µs` +
            ` (server CPU use: floor ${f0(med(floorRuns, (r) => r.serverCpu!) * 100)}%, postilion ${f0(med(postilionRuns, (r) => r.serverCpu!) * 100)}% of one core)`,
        );
      }
      console.log(`  ratio postilion / floor: ${ratio.toFixed(3)}   (target ≥ 0.5: ${ratio >= 0.5 ? 'MET' : 'NOT MET'})`);
      const floorCpu = floorRuns[0]?.cpuPerAccept != null ? med(floorRuns, (r) => r.cpuPerAccept!) : null;
      if (floorCpu !== null) {
        console.log(
          `  MIME composition alone: ${f0(compose)} µs CPU per message (nodemailer's MailComposer: ${f0(nodemailerCompose)} µs) = ${(compose / floorCpu).toFixed(2)} × the floor's CPU per request;` +
            ` a server doing the floor's work plus composition, CPU-bound like the floor, reaches at most ${(floorCpu / (floorCpu + compose)).toFixed(2)} of it`,
        );
      }
    }
    if (BULK_RUNS > 0) {
      const bMed = med(bulkRuns, (r) => r.perSecond);
      console.log(`${BULK_RECIPIENTS}-recipient requests, ${BULK_CONNECTIONS} connections, median of ${BULK_RUNS} × ${DURATION} s:`);
      console.log(`  postilion  ${f1(bMed)} requests/s = ${f0(bMed * BULK_RECIPIENTS)} recipients/s   ${latency(bulkRuns)}   non-2xx ${non2xx(bulkRuns)}`);
    }
    console.log(`non-2xx + errors + timeouts over all measured runs: ${bad}`);
    console.log(
      `every 202 after a synced write: ${unsynced.length === 0 ? 'yes' : 'NO'} (synced group-commit writers ≥ 202s in ${all.length - unsynced.length}/${all.length} runs;` +
        ' Store.commit = one classic-level batch with { sync: true })',
    );
    console.log(
      `load average at end: ${loadavg()
        .map((n) => n.toFixed(2))
        .join(' ')}`,
    );
    console.log(
      `postilion per-account rate limit was raised to ${postilion.info.rateLimit?.per_second}/s (burst ${postilion.info.rateLimit?.burst}) for this benchmark`,
    );
    console.log('====================================================================================');
    if (CPU_PROF) {
      // The profile is written when the child exits.
      await postilion.stop();
      const singleRuns = postilionRuns.map((r) => r.measured);
      const recipientRuns = bulkRuns.map((r) => ({ ...r.measured, messages: r.measured.messages * BULK_RECIPIENTS }));
      if (singleRuns.length > 0) console.log(`\n${profileTable(CPU_PROF, postilion.info.pid, 'single-recipient 202', singleRuns).join('\n')}`);
      if (recipientRuns.length > 0)
        console.log(`\n${profileTable(CPU_PROF, postilion.info.pid, `recipient of ${BULK_RECIPIENTS}-recipient requests`, recipientRuns).join('\n')}`);
    }
  } finally {
    await Promise.allSettled(children.map((c) => c.stop()));
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

type Composer = 'ours' | 'nodemailer';

/** Median CPU µs of composing the benchmark's message: with composeBody, as the server does, or with nodemailer's composer. */
async function composeCost(composer: Composer): Promise<number> {
  const content = { from: { email: 'app@example.com', name: 'Shop' }, subject: 'Your receipt', html: HTML, attachments: [], headers: [], date: new Date() };
  const compose = composer === 'ours' ? composeBody : composeWithNodemailer;
  const rounds: number[] = [];
  for (let round = 0; round < 6; round++) {
    const started = process.cpuUsage();
    for (let i = 0; i < 1000; i++) await compose(content, '0123456789abcdef');
    const used = process.cpuUsage(started);
    if (round > 0) rounds.push((used.user + used.system) / 1000);
  }
  return median(rounds);
}

function composeCostInChild(composer: Composer): number {
  const out = execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    cwd: ROOT,
    env: { ...process.env, BENCH_COMPOSE_ONLY: composer },
    encoding: 'utf8',
  });
  return Number(/compose-cost (\S+)/.exec(out)![1]);
}

const composeOnly = process.env.BENCH_COMPOSE_ONLY;
if (composeOnly === 'ours' || composeOnly === 'nodemailer') console.log(`compose-cost ${await composeCost(composeOnly)}`);
else if (composeOnly) throw new Error(`BENCH_COMPOSE_ONLY must be ours or nodemailer, not ${composeOnly}`);
else await main();
