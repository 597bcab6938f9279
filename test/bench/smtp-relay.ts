/**
 * Benchmark (issue 6): SMTP relay, end to end. 20 sessions AUTH and submit 5 KB messages to
 * Postilion's SMTP submission, which DKIM-signs them (RSA-2048) and delivers them to a sink; the
 * figure is messages per second counted at the sink. In the same run, Postfix relays the same
 * load through OpenDKIM (RSA-2048) to the same kind of sink, and the ratio is printed.
 *
 * - client: smtp-relay-client.ts for both (S sessions, lock-step commands like Postfix's
 *   smtp-source, one connection per session; AUTH PLAIN in clear from loopback for Postilion,
 *   no AUTH for Postfix, which offers none; the sessions connect one after another, see there). With BENCH_SMTP_SOURCE=1 (the default) Postfix is
 *   also driven by smtp-source itself, to show what this client costs it;
 * - sink: Postfix's smtp-sink on 127.0.0.1 (backlog 4096). Postilion's counts with -c for the
 *   whole benchmark (deliver-sink.ts); the peer script starts one per run that exits after -M N;
 * - Postilion: a child process (deliver-server.ts, BENCH_SUBMISSION=1): LevelDB in a temp dir,
 *   a verified domain with an RSA-2048 DKIM key, delivery to the sink as smarthost with 20
 *   sessions. Clock: from the client's start until the sink has counted every message;
 * - Postfix + OpenDKIM: test/bench/peers/peer-postfix-relay.sh (a copy of the shared peer script) with DKIM=1 RUNS=1, whose clock
 *   is the same (see smtp-relay-postfix.ts).
 *
 * Each round measures Postilion, then Postfix with this client, then Postfix with smtp-source,
 * each after waiting for the machine to be quiet (other processes under BENCH_QUIET_CORES over
 * 3 s), and taken again (BENCH_RETRIES times at most) when other processes used more than
 * BENCH_RETRY_CORES during it (for Postfix: during the whole call of the peer script). A
 * round's ratio compares figures taken a minute apart, on a machine whose speed drifts. One
 * SMTP-submitted message's DKIM signature is verified before the rounds (mailauth); after each
 * Postilion run no message may be left undelivered, and the peer script checks its own signing.
 *
 * Figures, not pass/fail (DESIGN.md §9); not part of `npm test`. Loopback only.
 *
 *   npm run bench:smtp-relay
 *
 * Knobs (environment): BENCH_RUNS (3), BENCH_MESSAGES (10000, Postilion, per run),
 * BENCH_POSTFIX_MESSAGES (5000, per run), BENCH_SESSIONS (20), BENCH_MSGLEN (5120 body bytes),
 * BENCH_POSTFIX (auto | off), BENCH_SMTP_SOURCE (1 | 0), BENCH_QUIET_CORES (0.15),
 * BENCH_QUIET_WAIT (600 s), BENCH_RETRY_CORES (0.1), BENCH_RETRIES (2), BENCH_CPU_PROF=<dir>
 * (Postilion under --cpu-prof; at the end, the CPU per relayed message of each phase of the path
 * over Postilion's measured runs is printed, see phases.ts; cpuprofile-top.ts for more).
 * UV_THREADPOOL_SIZE reaches Postilion.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { startSink as startCaptureSink } from '../helpers/smtp-sink.ts';
import { envNumber, PostilionChild, withCleanup, type Defer } from './deliver-child.ts';
import { cpuSeconds, threadCpu } from './deliver-cpu.ts';
import { freePort, smtpSinkPath, startPostfixSink, until, type Sink } from './deliver-sink.ts';
import { profileClockUs, profileTable, type MeasuredRun } from './phases.ts';
import { otherCpu, snapshot, waitQuiet, type OtherCpu } from './smtp-relay-cpu.ts';
import { clientStats, peerMissing, peerRun, peerVersions, PEER_SCRIPT, stopLeftovers, type ClientStats, type PeerRun } from './smtp-relay-postfix.ts';

const HERE = dirname(fileURLToPath(import.meta.url));

const RUNS = Math.round(envNumber('BENCH_RUNS', 3, 1));
const MESSAGES = Math.round(envNumber('BENCH_MESSAGES', 10_000, 100));
const PEER_MESSAGES = Math.round(envNumber('BENCH_POSTFIX_MESSAGES', 5000, 100));
const SESSIONS = Math.round(envNumber('BENCH_SESSIONS', 20, 1));
const MSGLEN = Math.round(envNumber('BENCH_MSGLEN', 5120, 1));
const WITH_PEER = (process.env.BENCH_POSTFIX ?? 'auto') !== 'off';
const WITH_SMTP_SOURCE = (process.env.BENCH_SMTP_SOURCE ?? '1') !== '0';
const QUIET_CORES = envNumber('BENCH_QUIET_CORES', 0.15, 0);
const QUIET_WAIT_MS = envNumber('BENCH_QUIET_WAIT', 600, 0) * 1000;
const RETRY_CORES = envNumber('BENCH_RETRY_CORES', 0.1, 0);
const RETRIES = Math.round(envNumber('BENCH_RETRIES', 2, 0));
const CPU_PROF = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : null;
const WARMUP_MESSAGES = 2000;
const RECIPIENT = 'rcpt@sink.test';

const middle = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const half = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[half]! : (sorted[half - 1]! + sorted[half]!) / 2;
};
const f0 = (n: number): string => n.toFixed(0);
const f2 = (n: number): string => n.toFixed(2);

// ---------------------------------------------------------------------------------------------
// The client

/**
 * smtp-relay-client.ts as plain JavaScript in `dir`, and `dir/bin/smtp-source` that starts it:
 * node alone starts in a fraction of the time node with tsx takes, and that start is inside the
 * clock on both sides.
 */
function installClient(dir: string): { shim: string; command: string } {
  const source = readFileSync(join(HERE, 'smtp-relay-client.ts'), 'utf8');
  const js = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  const script = join(dir, 'smtp-relay-client.mjs');
  writeFileSync(script, js);
  const shim = join(dir, 'bin');
  mkdirSync(shim);
  const command = join(shim, 'smtp-source');
  writeFileSync(command, `#!/bin/sh\nexec '${process.execPath}' '${script}' "$@"\n`);
  chmodSync(command, 0o755);
  return { shim, command };
}

interface ClientProcess {
  /** Resolves at the client's exit, with when that was; rejects if it failed. */
  done: Promise<{ at: number; stats: ClientStats }>;
}

/** Starts the client the way the peer script does (`timeout 600 smtp-source …`), with AUTH. */
function startClient(command: string, port: number, messages: number, from: string, to: string, auth: { username: string; password: string }): ClientProcess {
  const args = ['-d', '-s', String(SESSIONS), '-m', String(messages), '-l', String(MSGLEN), '-f', from, '-t', to, `127.0.0.1:${port}`];
  const proc = spawn('timeout', ['600', command, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, BENCH_SMTP_USER: auth.username, BENCH_SMTP_PASS: auth.password },
  });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<{ at: number; stats: ClientStats }>((resolveDone, reject) => {
    // 'close', not 'exit': by then its stderr, with the stats line, has been read to the end.
    proc.once('close', (code) => {
      const at = performance.now();
      const stats = clientStats(stderr);
      if (code !== 0 || !stats) reject(new Error(`client exited with ${code}: ${stderr.trim().slice(-1000)}`));
      else resolveDone({ at, stats });
    });
  });
  done.catch(() => undefined);
  return { done };
}

// ---------------------------------------------------------------------------------------------
// A Postilion run

interface PostilionRun {
  perSecond: number;
  /** The client done: every message answered 250, so durably stored. */
  acceptPerSecond: number;
  seconds: number;
  serverCores: number | null;
  serverCpuPerMessage: number | null;
  mainThreadCores: number | null;
  sinkCores: number | null;
  client: ClientStats;
  benchCores: number | null;
  cpu: OtherCpu;
  fsyncs: number;
  /** For the per-phase table (phases.ts). */
  measured: MeasuredRun;
}

async function postilionRun(child: PostilionChild, sink: Sink, client: string, total: number): Promise<PostilionRun> {
  const { submission } = child.info;
  const before = await child.stats();
  const base = sink.count();
  const cpu0 = cpuSeconds(child.info.pid);
  const threads0 = threadCpu(child.info.pid);
  const sink0 = sink.cpu();
  const own0 = cpuSeconds(process.pid);
  const snap0 = snapshot();
  const t0 = performance.now();
  const from = profileClockUs();
  const proc = startClient(client, submission!.port, total, child.info.from, RECIPIENT, submission!);
  let failed: Error | null = null;
  proc.done.catch((err: Error) => (failed = err));
  await until(
    `the sink to count ${total} messages`,
    () => {
      if (failed) throw failed;
      return sink.count() - base >= total;
    },
    Math.max(120_000, total * 20),
    5,
  );
  const t1 = performance.now();
  const to = profileClockUs();
  const snap1 = snapshot();
  const cpu1 = cpuSeconds(child.info.pid);
  const threads1 = threadCpu(child.info.pid);
  const sink1 = sink.cpu();
  const own1 = cpuSeconds(process.pid);
  const { at: clientDone, stats } = await proc.done;
  await child.drained();
  const after = await child.stats();
  const seconds = (t1 - t0) / 1000;
  const per = (a: number | null, b: number | null): number | null => (a === null || b === null ? null : (b - a) / seconds);
  return {
    perSecond: total / seconds,
    acceptPerSecond: total / ((clientDone - t0) / 1000),
    seconds,
    serverCores: per(cpu0, cpu1),
    serverCpuPerMessage: cpu0 === null || cpu1 === null ? null : ((cpu1 - cpu0) * 1e6) / total,
    mainThreadCores: per(threads0?.main ?? null, threads1?.main ?? null),
    sinkCores: per(sink0, sink1),
    client: stats,
    benchCores: per(own0, own1),
    cpu: otherCpu(snap0, snap1),
    fsyncs: after.batches - before.batches,
    measured: {
      window: { from, to },
      messages: total,
      cpuSeconds: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0,
      mainThreadCpuSeconds: threads0 === null || threads1 === null ? null : threads1.main - threads0.main,
    },
  };
}

function postilionLine(r: PostilionRun): string {
  return (
    `postilion                  ${f0(r.perSecond).padStart(5)} msgs/s at the sink (${MESSAGES} in ${r.seconds.toFixed(2)} s)` +
    `  all 250s ${f0(r.acceptPerSecond).padStart(5)}/s` +
    (r.serverCores === null
      ? ''
      : `  postilion CPU ${f2(r.serverCores)} cores = ${f0(r.serverCpuPerMessage!)} µs/msg (main thread ${f2(r.mainThreadCores ?? 0)})`) +
    `  client ${f2(r.client.cpuSeconds / r.seconds)} cores (start ${f2(r.client.startupSeconds)} s)` +
    (r.sinkCores === null ? '' : `  sink ${f2(r.sinkCores)} cores`) +
    (r.benchCores === null ? '' : `  this process ${f2(r.benchCores)} cores`) +
    `  machine ${r.cpu.machineCores === null ? '?' : f2(r.cpu.machineCores)} cores, other processes ${f2(r.cpu.otherCores)}` +
    `  fsyncs ${r.fsyncs}`
  );
}

function peerLine(label: string, r: PeerRun): string {
  return (
    `${label.padEnd(26)} ${f0(r.perSecond).padStart(5)} msgs/s at the sink (${PEER_MESSAGES})` +
    `  all 250s ${f0(r.injectPerSecond).padStart(5)}/s  left in queue ${r.leftInQueue}` +
    (r.client ? `  client ${f2(r.client.cpuSeconds / (PEER_MESSAGES / r.perSecond))} cores (start ${f2(r.client.startupSeconds)} s)` : '') +
    `  | whole call ${r.seconds.toFixed(1)} s (set-up, DKIM check, 200 warm-up, run):` +
    ` machine ${r.cpu.machineCores === null ? '?' : f2(r.cpu.machineCores)} cores, other processes ${f2(r.cpu.otherCores)}` +
    (r.postilionCores === null ? '' : `, idle postilion ${f2(r.postilionCores)}`)
  );
}

// ---------------------------------------------------------------------------------------------

interface Round {
  postilion: PostilionRun;
  postfix: PeerRun | null;
  smtpSource: PeerRun | null;
  busy: string[];
}

async function main(defer: Defer): Promise<void> {
  const sinkPath = smtpSinkPath();
  if (!sinkPath) throw new Error('smtp-sink is not installed (Debian package postfix): it is the sink of this benchmark');
  const peerWhy = WITH_PEER ? peerMissing() : 'BENCH_POSTFIX=off';
  const dir = mkdtempSync(join(tmpdir(), 'postilion-smtp-relay-'));
  // Postfix's and OpenDKIM's users work below it.
  chmodSync(dir, 0o755);
  defer(() => rmSync(dir, { recursive: true, force: true }));
  const peerWork = join(dir, 'peer');
  defer(() => stopLeftovers(peerWork));
  const client = installClient(dir);

  const sink = await startPostfixSink(sinkPath);
  defer(() => sink.close());
  const capture = await startCaptureSink();
  defer(() => capture.close());
  const child = new PostilionChild(
    { BENCH_SINK_PORT: String(sink.port), BENCH_CAPTURE_PORT: String(capture.port), BENCH_SESSIONS: String(SESSIONS), BENCH_SUBMISSION: '1' },
    CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`] : [],
  );
  defer(() => child.stop());
  const info = await child.ready();
  const submission = info.submission!;

  const cpu = cpus();
  console.log('smtp-relay benchmark');
  console.log(
    `  machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? '?'}; node ${process.version}; UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? '4 (default)'} (postilion's too);` +
      ` load average at start ${loadavg().map(f2).join(' ')}`,
  );
  console.log(
    `  client: smtp-relay-client.ts (node, transpiled; started as \`timeout 600 smtp-source …\` on both sides), ${SESSIONS} sessions, one connection each,` +
      ` lock-step commands (no pipelining), messages of From/To/Date/Message-Id + ${MSGLEN} body bytes; AUTH PLAIN in clear for Postilion (loopback), none for Postfix;` +
      ' sessions connect and authenticate one after another',
  );
  console.log(`  sink: ${sink.name} for Postilion; the peer script's smtp-sink (-M N, backlog 4096) for Postfix`);
  console.log(
    `  postilion: child pid ${info.pid}, SMTP submission 127.0.0.1:${submission.port} (STARTTLS listener, no TLS used), DKIM RSA-2048,` +
      ` delivery to the sink as smarthost, ${SESSIONS} sessions, log silent; ${MESSAGES} messages per run`,
  );
  console.log(
    peerWhy
      ? `  postfix + opendkim: not measured: ${peerWhy}`
      : `  postfix + opendkim: ${peerVersions()}; ${PEER_SCRIPT} DKIM=1 RUNS=1 MSGS=${PEER_MESSAGES}, private instance under ${peerWork}` +
          `; driven by the same client${WITH_SMTP_SOURCE ? ", then by Postfix's smtp-source" : ''}`,
  );
  console.log(
    `  measured: from the client's start until the sink has counted every message; before each run other processes must use < ${QUIET_CORES} cores,` +
      ` and a run during which they used > ${RETRY_CORES} is taken again (${RETRIES} times at most)`,
  );
  if (CPU_PROF) console.log(`  postilion runs under --cpu-prof; the profile goes to ${CPU_PROF}`);
  console.log('');

  const verifying = startClient(client.command, submission.port, 1, info.from, 'check@verify.test', submission);
  const [got] = await capture.waitFor(1, 20_000);
  await verifying.done;
  console.log(`DKIM check (a message submitted over SMTP, as delivered): ${await child.verifyDkim(got!.raw)}`);
  console.log(`warm-up: ${WARMUP_MESSAGES} messages…`);
  await postilionRun(child, sink, client.command, WARMUP_MESSAGES);
  console.log('');

  const rounds: Round[] = [];
  /** Every measured Postilion run (those taken again too: the profile saw them), for the per-phase table. */
  const measured: MeasuredRun[] = [];
  for (let i = 1; i <= RUNS; i++) {
    console.log(`round ${i}:`);
    const busy: string[] = [];
    /** A measurement taken on a quiet machine, and taken again (RETRIES times at most) when other processes got busy during it. */
    const clean = async <T extends { cpu: OtherCpu }>(what: string, measure: () => Promise<T>, show: (r: T) => string): Promise<T> => {
      for (let attempt = 1; ; attempt++) {
        const q = await waitQuiet(QUIET_CORES, QUIET_WAIT_MS, 3000, (text) => console.log(text));
        if (!q.quiet) console.log(`  still busy after ${QUIET_WAIT_MS / 1000} s (${q.sample.top.join(', ')}): measuring anyway`);
        const r = await measure();
        const noisy = !q.quiet || r.cpu.otherCores > RETRY_CORES;
        console.log(`  ${show(r)}  [others before ${f2(q.sample.otherCores)}]${noisy ? ' BUSY' : ''}`);
        if (!noisy) return r;
        if (attempt > RETRIES) {
          busy.push(what);
          return r;
        }
        console.log(`    other processes used ${f2(r.cpu.otherCores)} cores (${r.cpu.top.join(', ')}): measuring again`);
      }
    };
    const postilion = await clean(
      'postilion',
      async () => {
        const r = await postilionRun(child, sink, client.command, MESSAGES);
        measured.push(r.measured);
        return r;
      },
      postilionLine,
    );
    let postfix: PeerRun | null = null;
    let smtpSource: PeerRun | null = null;
    if (!peerWhy) {
      const peer = async (shim: string | null): Promise<PeerRun> =>
        peerRun({ messages: PEER_MESSAGES, sessions: SESSIONS, msglen: MSGLEN, sinkPort: await freePort(), work: peerWork, shim, postilionPid: info.pid });
      postfix = await clean(
        'postfix',
        () => peer(client.shim),
        (r) => peerLine('postfix + opendkim', r),
      );
      if (i === 1) console.log(`    (its DKIM check: ${postfix.dkimCheck})`);
      if (WITH_SMTP_SOURCE)
        smtpSource = await clean(
          'postfix/smtp-source',
          () => peer(null),
          (r) => peerLine('postfix + opendkim (smtp-source)', r),
        );
      console.log(
        `  ratio postilion / postfix + opendkim: ${(postilion.perSecond / postfix.perSecond).toFixed(2)}` +
          (smtpSource ? `  (against smtp-source-driven postfix: ${(postilion.perSecond / smtpSource.perSecond).toFixed(2)})` : ''),
      );
    }
    rounds.push({ postilion, postfix, smtpSource, busy });
  }
  console.log('');

  const pMed = middle(rounds.map((r) => r.postilion.perSecond));
  const runs = (pick: (r: Round) => number): string => rounds.map((r) => f0(pick(r))).join(' ');
  console.log('============================== smtp-relay summary ==============================');
  console.log(`client: smtp-relay-client.ts, ${SESSIONS} sessions, AUTH PLAIN for Postilion; sink: Postfix smtp-sink on 127.0.0.1; body ${MSGLEN} bytes`);
  console.log(`median of ${RUNS} rounds, end to end (client start → sink has all), DKIM RSA-2048:`);
  console.log(`  postilion                         ${f0(pMed).padStart(6)} msgs/s   per run: ${runs((r) => r.postilion.perSecond)}`);
  console.log(
    `  postilion CPU: ${f0(middle(rounds.map((r) => r.postilion.serverCpuPerMessage ?? 0)))} µs per message, ${f2(middle(rounds.map((r) => r.postilion.serverCores ?? 0)))} cores`,
  );
  if (rounds[0]!.postfix) {
    const fMed = middle(rounds.map((r) => r.postfix!.perSecond));
    console.log(`  postfix + opendkim (same client)  ${f0(fMed).padStart(6)} msgs/s   per run: ${runs((r) => r.postfix!.perSecond)}`);
    if (rounds[0]!.smtpSource) {
      console.log(
        `  postfix + opendkim (smtp-source)  ${f0(middle(rounds.map((r) => r.smtpSource!.perSecond))).padStart(6)} msgs/s   per run: ${runs((r) => r.smtpSource!.perSecond)}`,
      );
    }
    const ratio = pMed / fMed;
    console.log(
      `  ratio (medians): ${ratio.toFixed(2)}   per round: ${rounds.map((r) => (r.postilion.perSecond / r.postfix!.perSecond).toFixed(2)).join(' ')}` +
        `   target ≥ 5× Postfix + OpenDKIM (issue 35): ${ratio >= 5 ? 'MET' : 'NOT MET'}`,
    );
  } else {
    console.log(`  postfix + opendkim: not measured (${peerWhy})`);
  }
  const busy = rounds.flatMap((r, i) => r.busy.map((b) => `round ${i + 1} ${b}`));
  console.log(
    busy.length === 0
      ? `every run kept: other processes under ${RETRY_CORES} cores during it`
      : `measured on a busy machine (kept after ${RETRIES} retries): ${busy.join(', ')}`,
  );
  console.log(`load average at end: ${loadavg().map(f2).join(' ')}`);
  console.log('================================================================================');
  if (CPU_PROF) {
    // The profile is written when the child exits.
    await child.stop();
    console.log(`\n${profileTable(CPU_PROF, info.pid, 'relayed message', measured).join('\n')}`);
  }
}

await withCleanup(main);
