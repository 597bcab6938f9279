/**
 * CPU per message by phase of the main path, from a `node --cpu-prof` profile of Postilion's
 * main thread (issue 35, step 1). bench:deliver, bench:api-accept and bench:smtp-relay print this
 * table at the end when BENCH_CPU_PROF is set, over their measured runs only.
 *
 * Each busy sample goes to one phase, found on its stack from the innermost frame outwards:
 * - a frame of ours (src/…) names the phase by its module (OURS below); src/util, src/assemblies,
 *   src/config and the test bed are helpers of whoever calls them, and are passed over;
 * - a library that is a phase whoever calls it names it too (LIBRARIES: nodemailer's composer →
 *   MIME composition, its SMTPConnection → SMTP client, classic-level → store, pino → logging,
 *   prom-client → metrics, zod → validation, koa → HTTP, …); other libraries, node's own modules
 *   and native frames (socket writes, crypto) are passed over, so that they count for the
 *   nearest caller of ours: a socket write under the SMTP client is the SMTP client's;
 * - garbage collection and V8's "(program)" (native work outside JavaScript, e.g. libuv polling)
 *   are rows of their own;
 * - a stack with no phase so far: node's HTTP server anywhere on it → HTTP, a signature's
 *   completion → DKIM; a helper of ours on it → "other of ours"; else (a callback node runs from
 *   its own loop: stream piping, promise jobs) node's innermost module that says what it is:
 *   "node streams, events" (the composer's stream pipeline on accept, the SMTP client's data
 *   stream on delivery, mostly), "promises, ticks, timers", else "other".
 *
 * The samples give each phase's share of the main thread's busy time; the µs per message are that
 * share of the main thread's CPU as /proc counted it over the same runs (the profile counts wall
 * time, preempted time included). "Other threads" is the process's CPU less its main thread's:
 * signing in libuv's pool, LevelDB's compaction and writes, V8's GC helpers, worker threads.
 * Profiling itself costs some CPU: the table is for shares, not for absolute rates.
 *
 * Times: the benchmarks take their windows with `profileClockUs()` (process.hrtime, the monotonic
 * clock V8's profiler stamps its samples with), so parent and child agree on them.
 *
 *   node --import tsx test/bench/phases.ts <file.cpuprofile> [--from=S] [--to=S] [--messages=N] [--main-cpu-us=N]
 *
 * (--from/--to: seconds after the profile started, as in cpuprofile-top.ts; --main-cpu-us: the
 * main thread's CPU over that window, else the busy sample time stands for it.)
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** A measured stretch of a benchmark, in µs on the profiler's clock (profileClockUs). */
export interface Window {
  from: number;
  to: number;
}

/** Now, in µs on the clock V8's profiler stamps samples with (monotonic, shared by the processes of this machine). */
export function profileClockUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** One measured run of a benchmark, as the table needs it. */
export interface MeasuredRun {
  window: Window;
  /** Messages (or recipients) it handled: the per-message divisor. */
  messages: number;
  /** Postilion's CPU seconds during it, all threads and the main thread alone (from /proc; null where there is none). */
  cpuSeconds: number | null;
  mainThreadCpuSeconds: number | null;
}

/** CPU seconds of several runs together, in µs; null when one of them is not known (no /proc). */
function cpuUs(seconds: Array<number | null>): number | null {
  let sum = 0;
  for (const s of seconds) {
    if (s === null) return null;
    sum += s;
  }
  return sum * 1e6;
}

// ---------------------------------------------------------------------------------------------
// The phase map

/** The rows of the table, in the order of the path. */
export const PHASES = [
  'HTTP (koa, API middleware, routes)',
  'auth, accounts',
  'validation',
  'SMTP server (submission)',
  'templating, tracking links',
  'MIME composition',
  'accept (new message records)',
  'store (encoding, batches, LevelDB)',
  'queue, engine, attempt',
  'DKIM (canonicalisation, hash, sign dispatch)',
  'SMTP client (socket writes included)',
  'outcomes',
  'events, webhooks',
  'counters, statistics',
  'logging',
  'metrics',
  'other of ours',
  'GC',
  '(program): native, outside JS',
  'node streams, events (no caller of ours)',
  'promises, ticks, timers (no caller of ours)',
  'other (no caller of ours)',
] as const;
export type Phase = (typeof PHASES)[number];

/** Our modules (path from the repository root) → phase; the first rule that matches wins. */
const OURS: Array<[RegExp, Phase]> = [
  [/^src\/api\/validate\.ts$/, 'validation'],
  [/^src\/api\/middleware\/metrics\.ts$/, 'metrics'],
  [/^src\/api\//, 'HTTP (koa, API middleware, routes)'],
  [/^src\/accounts\//, 'auth, accounts'],
  [/^src\/smtp\//, 'SMTP server (submission)'],
  [/^src\/message\/(template-engine|templating|tracking)\.ts$/, 'templating, tracking links'],
  [/^src\/message\/(compose|headers|header-values|mime-html|mime-builder|mime-writer|quoted-printable)\.ts$/, 'MIME composition'],
  [/^src\/message\/messages\.ts$/, 'outcomes'],
  [/^src\/message\//, 'accept (new message records)'],
  [/^src\/store\/(counter-[\w-]+|counters-repo)\.ts$/, 'counters, statistics'],
  [/^src\/store\/events-repo\.ts$/, 'events, webhooks'],
  [/^src\/store\//, 'store (encoding, batches, LevelDB)'],
  [/^src\/stats\//, 'counters, statistics'],
  [/^src\/queue\/target-counters\.ts$/, 'counters, statistics'],
  [/^src\/queue\/(outcomes|outcome-writer|dsn-sender)\.ts$/, 'outcomes'],
  [/^src\/queue\//, 'queue, engine, attempt'],
  [/^src\/domains\/(dkim-canonical|signer|dkim-keys)\.ts$/, 'DKIM (canonicalisation, hash, sign dispatch)'],
  [/^src\/delivery\/(body-digests|recent-bodies)\.ts$/, 'DKIM (canonicalisation, hash, sign dispatch)'],
  [/^src\/delivery\/(smtp-pool|smtp-client|data-encoder|tls-outcome)\.ts$/, 'SMTP client (socket writes included)'],
  [/^src\/delivery\/tls-policy\//, 'SMTP client (socket writes included)'],
  [/^src\/delivery\//, 'queue, engine, attempt'],
  [/^src\/util\/verp\.ts$/, 'queue, engine, attempt'],
  [/^src\/bounce\//, 'outcomes'],
  [/^src\/(events|webhooks)\//, 'events, webhooks'],
  [/^src\/logging\//, 'logging'],
  [/^src\/metrics\//, 'metrics'],
];

/** Our helpers, counted for whoever calls them (and the benchmark's test bed). */
const PASSED_OVER = /^(src\/(util|assemblies|config)\/|src\/[\w-]+\.ts$|test\/)/;

/** Libraries (path under node_modules) that are a phase whoever calls them. */
const LIBRARIES: Array<[RegExp, Phase]> = [
  [/^nodemailer\/(?:dist\/(?:esm|cjs)|lib)\/smtp-connection\//, 'SMTP client (socket writes included)'],
  [/^nodemailer\/(?:dist\/(?:esm|cjs)|lib)\/dkim\//, 'DKIM (canonicalisation, hash, sign dispatch)'],
  [/^nodemailer\/(?:dist\/(?:esm|cjs)|lib)\/(mail-composer|mime-node|mime-funcs|qp|base64)\//, 'MIME composition'],
  [/^mailauth\//, 'DKIM (canonicalisation, hash, sign dispatch)'],
  [/^smtp-server\//, 'SMTP server (submission)'],
  [/^(classic-level|abstract-level|level|level-transcoder|level-supports|module-error)\//, 'store (encoding, batches, LevelDB)'],
  [/^(pino|pino-[\w-]+|@pinojs\/[\w-]+|sonic-boom|fast-redact|thread-stream|on-exit-leak-free)\//, 'logging'],
  [/^(prom-client|tdigest|bintrees)\//, 'metrics'],
  [/^zod\//, 'validation'],
  [/^minijinja-js\//, 'templating, tracking links'],
  [/^(koa|koa-[\w-]+|@koa\/[\w-]+|co-body|raw-body|http-errors|on-finished)\//, 'HTTP (koa, API middleware, routes)'],
];

/**
 * With no frame of ours nor of a phase library on the stack: node's HTTP server anywhere on it is
 * still HTTP, and a signature's completion is DKIM's (the only asymmetric signing on these paths).
 */
const NODE_ALONE: Array<[RegExp, Phase]> = [
  [/^node:_http_/, 'HTTP (koa, API middleware, routes)'],
  [/^node:internal\/crypto\/sig$/, 'DKIM (canonicalisation, hash, sign dispatch)'],
];
/** Else the innermost of node's own modules that says what the machinery was (streams piped by a library, promise jobs). */
const NODE_MACHINERY: Array<[RegExp, Phase]> = [
  [/^node:(events|net|stream|internal\/streams\/|internal\/stream_base_commons)/, 'node streams, events (no caller of ours)'],
  [/^(node:internal\/process\/(task_queues|promises)|node:internal\/timers|native:runMicrotasks)$/, 'promises, ticks, timers (no caller of ours)'],
];

/** A frame's script as the rules read it: `src/…` or `test/…` for ours, `pkg/…` under node_modules, `node:…`, or '' (native). */
function scriptOf(url: string): string {
  if (!url) return '';
  if (url.startsWith('node:')) return url;
  const path = url.replace(/^file:\/\//, '').replace(/[?#].*$/, '');
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) return `lib:${path.slice(nm + '/node_modules/'.length)}`;
  const ours = /\/((?:src|test)\/.*)$/.exec(path);
  return ours ? ours[1]! : path;
}

const firstMatch = (rules: Array<[RegExp, Phase]>, path: string): Phase | null => rules.find(([re]) => re.test(path))?.[1] ?? null;

/** The phase of one frame, or null when the frame is passed over for its caller. */
function phaseOfFrame(script: string): Phase | null {
  if (script.startsWith('lib:')) return firstMatch(LIBRARIES, script.slice(4));
  if (script.startsWith('src/')) return PASSED_OVER.test(script) ? null : (firstMatch(OURS, script) ?? 'other of ours');
  return null;
}

/** V8's pseudo-frames, alone on their stacks: idle time is no phase; GC and native work outside JS are rows of their own. */
const PSEUDO_FRAMES = new Map<string, Phase | null>([
  ['native:(idle)', null],
  ['native:(garbage collector)', 'GC'],
  ['native:(program)', '(program): native, outside JS'],
]);

/** The phase of a sample from its stack (innermost frame first); null for an idle sample. */
function phaseOfStack(stack: string[]): Phase | null {
  const pseudo = PSEUDO_FRAMES.get(stack[0]!);
  if (pseudo !== undefined) return pseudo;
  const first = (rules: (script: string) => Phase | null): Phase | null => {
    for (const script of stack) {
      const phase = rules(script);
      if (phase !== null) return phase;
    }
    return null;
  };
  return (
    first(phaseOfFrame) ??
    first((script) => firstMatch(NODE_ALONE, script)) ??
    // A helper of ours with no phase above it (a stream of ours that node pipes) is still ours.
    (stack.some((script) => script.startsWith('src/')) ? 'other of ours' : null) ??
    first((script) => firstMatch(NODE_MACHINERY, script)) ??
    'other (no caller of ours)'
  );
}

// ---------------------------------------------------------------------------------------------
// Attribution

export interface PhaseBreakdown {
  /** Busy sample time per phase in the windows, µs (wall time on the main thread). */
  busyUs: Map<Phase, number>;
  /** The functions of each phase by self time, heaviest first, for the reader who wants to look closer. */
  topFunctions: Map<Phase, Array<[string, number]>>;
  busyTotalUs: number;
  windowUs: number;
  samples: number;
}

/** Attributes the busy samples of `profile` that fall in one of `windows` (all of them when null) to phases. */
export function breakdown(profile: Profile, windows: Window[] | null): PhaseBreakdown {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const scripts = new Map(profile.nodes.map((n) => [n.id, scriptOf(n.callFrame.url)]));

  /** A sample's stack, innermost first, as scripts (native frames as `native:<name>`). */
  const stackOf = (leaf: number): string[] => {
    const stack: string[] = [];
    for (let at: number | undefined = leaf; at !== undefined; at = parent.get(at))
      stack.push(scripts.get(at) || `native:${byId.get(at)!.callFrame.functionName}`);
    return stack;
  };
  const phaseCache = new Map<number, Phase | null>();
  const phaseOfNode = (leaf: number): Phase | null => {
    let phase = phaseCache.get(leaf);
    if (phase === undefined) {
      phase = phaseOfStack(stackOf(leaf));
      phaseCache.set(leaf, phase);
    }
    return phase;
  };

  const inWindow = windows === null ? () => true : (t: number) => windows.some((w) => t >= w.from && t <= w.to);
  const busyUs = new Map<Phase, number>();
  const selfUs = new Map<number, number>();
  let t = profile.startTime;
  let windowUs = 0;
  let busyTotalUs = 0;
  let samples = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt;
    if (!inWindow(t)) continue;
    windowUs += dt;
    const id = profile.samples[i]!;
    const phase = phaseOfNode(id);
    if (phase === null) continue;
    samples++;
    busyTotalUs += dt;
    busyUs.set(phase, (busyUs.get(phase) ?? 0) + dt);
    selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
  }

  const perFunction = new Map<Phase, Map<string, number>>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    const script = scripts.get(id)!.replace(/^lib:/, '');
    const key = `${node.callFrame.functionName || '(anonymous)'}${script ? ` ${script}` : ''}`;
    const phase = phaseOfNode(id)!;
    const functions = perFunction.get(phase) ?? new Map<string, number>();
    perFunction.set(phase, functions);
    functions.set(key, (functions.get(key) ?? 0) + us);
  }
  const topFunctions = new Map([...perFunction].map(([phase, fns]) => [phase, [...fns].sort((a, b) => b[1] - a[1])]));
  return { busyUs, topFunctions, busyTotalUs, windowUs, samples };
}

// ---------------------------------------------------------------------------------------------
// The table

export interface PhaseTableInput {
  /** Messages (or recipients) handled in the windows: the per-message divisor. */
  messages: number;
  /** What a message is in this benchmark, for the heading ("delivered message", "202", …). */
  unit: string;
  /** CPU of the main thread over the windows (from /proc), µs; null: the busy sample time stands for it. */
  mainThreadCpuUs: number | null;
  /** CPU of the whole process over the windows (from /proc), µs; null: not known. */
  processCpuUs: number | null;
}

const pad = (s: string, n: number): string => s.padEnd(n);
const lpad = (s: string, n: number): string => s.padStart(n);

/** The table's lines: per phase, its share of the main thread's busy samples and its µs CPU per message. */
export function phaseTable(b: PhaseBreakdown, input: PhaseTableInput): string[] {
  const { messages, unit, mainThreadCpuUs, processCpuUs } = input;
  if (b.busyTotalUs === 0 || messages <= 0) return [`per-phase CPU: no busy samples of the main thread in the measured windows (${b.samples} samples)`];
  const mainUs = mainThreadCpuUs ?? b.busyTotalUs;
  const perMessage = (share: number): number => (share * mainUs) / messages;
  const lines = [
    `per-phase CPU per ${unit} (${messages} in the measured runs), postilion's main thread: --cpu-prof, ${b.samples} busy samples,` +
      ` ${(b.busyTotalUs / 1e6).toFixed(1)} s busy of ${(b.windowUs / 1e6).toFixed(1)} s; µs = share × ${mainThreadCpuUs === null ? 'the busy sample time' : "the main thread's CPU from /proc"}`,
    `  ${pad('phase', 46)} ${lpad('share', 6)} ${lpad('µs/msg', 8)}   heaviest functions (self time, share of the phase)`,
  ];
  for (const phase of PHASES) {
    const us = b.busyUs.get(phase) ?? 0;
    if (us === 0) continue;
    const share = us / b.busyTotalUs;
    const top = (b.topFunctions.get(phase) ?? [])
      .slice(0, 2)
      .map(([fn, self]) => `${fn} ${((100 * self) / us).toFixed(0)}%`)
      .join(', ');
    lines.push(`  ${pad(phase, 46)} ${lpad((100 * share).toFixed(1), 5)}% ${lpad(perMessage(share).toFixed(0), 8)}   ${top}`);
  }
  lines.push(`  ${pad('main thread', 46)} ${lpad('100.0', 5)}% ${lpad((mainUs / messages).toFixed(0), 8)}`);
  if (processCpuUs !== null && mainThreadCpuUs !== null) {
    lines.push(`  ${pad('other threads (libuv pool, LevelDB, GC)', 46)} ${lpad('', 6)} ${lpad(((processCpuUs - mainThreadCpuUs) / messages).toFixed(0), 8)}`);
    lines.push(`  ${pad('process (all threads)', 46)} ${lpad('', 6)} ${lpad((processCpuUs / messages).toFixed(0), 8)}`);
  }
  return lines;
}

/** The main thread's profile of process `pid` in `dir` (node names it CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile; thread 0 is the main one). */
export function findProfile(dir: string, pid: number): string | null {
  const names = readdirSync(dir).filter((name) => name.endsWith('.cpuprofile') && name.split('.')[3] === String(pid) && name.split('.')[4] === '0');
  const paths = names.map((name) => join(dir, name)).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  return paths[0] ?? null;
}

/**
 * The table of a benchmark's measured `runs`, from the profile of its Postilion child `pid` in
 * `dir` (the child must have exited: the profile is written then). `unit`: what a message is.
 */
export function profileTable(dir: string, pid: number, unit: string, runs: MeasuredRun[]): string[] {
  const file = findProfile(dir, pid);
  if (!file) return [`per-phase CPU: no profile of pid ${pid} in ${dir}`];
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const windows = runs.map((r) => r.window);
  const b = breakdown(profile, windows);
  return [
    `${file}:`,
    ...phaseTable(b, {
      messages: runs.reduce((n, r) => n + r.messages, 0),
      unit,
      mainThreadCpuUs: cpuUs(runs.map((r) => r.mainThreadCpuSeconds)),
      processCpuUs: cpuUs(runs.map((r) => r.cpuSeconds)),
    }),
  ];
}

// ---------------------------------------------------------------------------------------------

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const flags = new Map(
    process.argv
      .slice(2)
      .filter((a) => a.startsWith('--'))
      .map((a) => a.slice(2).split('=') as [string, string]),
  );
  const [file] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  if (!file) {
    console.error('usage: phases.ts <file.cpuprofile> [--from=S] [--to=S] [--messages=N] [--main-cpu-us=N]');
    process.exit(2);
  }
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const from = profile.startTime + Number(flags.get('from') ?? 0) * 1e6;
  const to = flags.has('to') ? profile.startTime + Number(flags.get('to')) * 1e6 : Infinity;
  const mainCpu = flags.get('main-cpu-us');
  const table = phaseTable(breakdown(profile, [{ from, to }]), {
    messages: Number(flags.get('messages') ?? 1),
    unit: flags.has('messages') ? 'message' : 'profile (no --messages)',
    mainThreadCpuUs: mainCpu === undefined ? null : Number(mainCpu),
    processCpuUs: null,
  });
  for (const line of table) console.log(line);
}
