/**
 * Benchmark: click redirects per second on the tracking listener, against a bare node:http server
 * answering 302 (test/bench/redirect-floor.ts), measured in the same run.
 *
 * Postilion (test/bench/tracking-server.ts, a child process) holds 1,000 messages accepted with
 * click tracking; autocannon cycles through their click links (each connection in turn, with the
 * Host of the tracking links), so every request is a real click: its token checked, its message
 * and link looked up, the 302 sent, and the click recorded (event, counts, statistics) right
 * after; at the end every click answered must have its `message.clicked` event in the store
 * (the benchmark fails otherwise). The floor answers the same requests with a fixed 302. Runs
 * alternate floor / Postilion; the figure is the median of the runs, and the ratio Postilion /
 * floor (target ≥ 0.5).
 * Every answer must be a 302 to the original link (Postilion) — checked by hand first, then by
 * status counts.
 *
 * Figures, not pass/fail (DESIGN.md §9); not part of `npm test`. Loopback only.
 *
 *   npm run bench:tracking
 *
 * Knobs (environment): BENCH_RUNS (5), BENCH_DURATION (seconds per run, 10), BENCH_CONNECTIONS (50),
 * BENCH_CLICK_MESSAGES (1000), BENCH_CPU_PROF=<dir> (the Postilion child under --cpu-prof).
 */
import autocannon, { type Result } from 'autocannon';
import { readFileSync } from 'node:fs';
import { get, type IncomingMessage } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { envNumber, withCleanup, type Defer } from './deliver-child.ts';
import { ServerProcess } from './server-process.ts';

const RUNS = Math.round(envNumber('BENCH_RUNS', 5));
const DURATION = envNumber('BENCH_DURATION', 10, 1);
const CONNECTIONS = Math.round(envNumber('BENCH_CONNECTIONS', 50));

interface PostilionInfo {
  url: string;
  host: string;
  paths: string[];
  target: string;
  pid: number;
}
interface FloorInfo {
  url: string;
  pid: number;
}
interface PostilionStats {
  clicked: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const f0 = (n: number) => Math.round(n).toLocaleString('en-US');

function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

interface Run {
  perSecond: number;
  p50: number;
  p99: number;
  redirects: number;
  other: number;
  errors: number;
  cores: number | null;
}

async function load(url: string, host: string, paths: string[], pid: number, duration: number): Promise<Run> {
  const cpu0 = cpuSeconds(pid);
  const r: Result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration,
    timeout: 30,
    requests: paths.map((path) => ({
      method: 'GET',
      path,
      headers: { host, 'user-agent': 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36' },
    })),
  });
  const cpu1 = cpuSeconds(pid);
  const redirects = r.statusCodeStats['302']?.count ?? 0;
  return {
    perSecond: redirects / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    redirects,
    other: r.requests.total - redirects,
    errors: r.errors + r.timeouts,
    cores: cpu0 === null || cpu1 === null ? null : (cpu1 - cpu0) / r.duration,
  };
}

async function main(defer: Defer): Promise<void> {
  const cpuProf = process.env.BENCH_CPU_PROF;
  const postilion = new ServerProcess<PostilionInfo, PostilionStats>(
    'postilion',
    'tracking-server.ts',
    cpuProf ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${cpuProf}`] } : {},
  );
  defer(() => postilion.stop());
  const floor = new ServerProcess<FloorInfo, unknown>('floor', 'redirect-floor.ts');
  defer(() => floor.stop());
  const [p, f] = await Promise.all([postilion.ready(120_000), floor.ready()]);

  // One click by hand: a 302 to the original link.
  const manual = await new Promise<{ status: number; location: string | undefined }>((resolve, reject) => {
    const u = new URL(p.url);
    get({ host: u.hostname, port: u.port, path: p.paths[0], headers: { host: p.host } }, (res: IncomingMessage) => {
      res.resume();
      resolve({ status: res.statusCode!, location: res.headers.location });
    }).on('error', reject);
  });
  if (manual.status !== 302 || manual.location !== p.target) throw new Error(`postilion answered ${manual.status} → ${manual.location}, not 302 → ${p.target}`);

  const cpu = cpus();
  console.log('click-redirect benchmark');
  console.log(
    `  machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? '?'}; node ${process.version}; load average ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `  postilion: tracking listener ${p.url} (Host ${p.host}), ${p.paths.length} tracked messages, each request a different message's click link in turn`,
  );
  console.log(`  floor: bare node:http answering every request with a fixed 302, ${f.url}`);
  console.log(`  load: autocannon, ${CONNECTIONS} connections, ${RUNS} × ${DURATION} s per server, alternating floor / postilion, after 3 s of warm-up each`);
  console.log('');
  await load(f.url, p.host, p.paths, f.pid, 3);
  // Every 302 Postilion sends is a click it must record: counted here, checked at the end.
  let answered = 1 + (await load(p.url, p.host, p.paths, p.pid, 3)).redirects;

  const floorRuns: Run[] = [];
  const postilionRuns: Run[] = [];
  const line = (name: string, r: Run) =>
    `  ${name.padEnd(10)} ${f0(r.perSecond).padStart(7)} redirects/s  p50 ${r.p50} ms  p99 ${r.p99} ms  other answers ${r.other}  errors ${r.errors}${r.cores === null ? '' : `  server CPU ${r.cores.toFixed(2)} cores`}`;
  for (let i = 1; i <= RUNS; i++) {
    const fr = await load(f.url, p.host, p.paths, f.pid, DURATION);
    floorRuns.push(fr);
    const pr = await load(p.url, p.host, p.paths, p.pid, DURATION);
    postilionRuns.push(pr);
    answered += pr.redirects;
    console.log(`run ${i}:`);
    console.log(line('floor', fr));
    console.log(line('postilion', pr));
    if (pr.other > 0 || pr.errors > 0) throw new Error(`postilion answered ${pr.other} requests with something else than 302, ${pr.errors} errors`);
  }
  // The clicks answered in the last moments may still be on their way to the store.
  let recorded = 0;
  for (let waited = 0; waited < 30_000; waited += 200) {
    recorded = (await postilion.stats()).clicked;
    if (recorded >= answered) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  // More is possible (a request answered as a run's time ran out is not counted by autocannon), fewer is not.
  if (recorded < answered) throw new Error(`postilion answered ${answered} clicks and recorded ${recorded} message.clicked events`);
  const pMed = median(postilionRuns.map((r) => r.perSecond));
  const fMed = median(floorRuns.map((r) => r.perSecond));
  console.log('');
  console.log('============================ click-redirect summary =============================');
  console.log(`median of ${RUNS} runs, ${CONNECTIONS} connections:`);
  console.log(`  postilion click redirects   ${f0(pMed).padStart(7)}/s   per run: ${postilionRuns.map((r) => f0(r.perSecond)).join(' ')}`);
  console.log(`  bare node:http 302 (floor)  ${f0(fMed).padStart(7)}/s   per run: ${floorRuns.map((r) => f0(r.perSecond)).join(' ')}`);
  console.log(`  clicks recorded (message.clicked events landed in the store): ${f0(recorded)} of ${f0(answered)} answered`);
  console.log(`  ratio postilion / floor: ${(pMed / fMed).toFixed(3)}   target ≥ 0.5: ${pMed / fMed >= 0.5 ? 'MET' : 'NOT MET'}`);
  console.log(
    `load average at end: ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
  );
  console.log('=================================================================================');
}

await withCleanup(main);
