/**
 * The peer of test/bench/smtp-relay.ts: Postfix relaying through OpenDKIM (RSA-2048) to smtp-sink,
 * measured by the shared script test/bench/peers/peer-postfix-relay.sh (a copy of the shared peer script) (DKIM=1), one run per
 * call. The script runs a private Postfix under its work dir (not /etc/postfix) on 127.0.0.1:2525,
 * OpenDKIM on 127.0.0.1:8891, checks that a relayed message is signed, warms up with 200
 * messages, then times MSGS messages from the client's start until smtp-sink has them all.
 *
 * Its client is `smtp-source`, found on PATH: with `shim` set, a directory whose `smtp-source`
 * starts smtp-relay-client instead, the same client that drives Postilion.
 */
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuSeconds } from './deliver-cpu.ts';
import { otherCpu, snapshot, type OtherCpu } from './smtp-relay-cpu.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const PEER_SCRIPT = process.env.BENCH_PEER_SCRIPT ?? resolve(ROOT, 'test/bench/peers/peer-postfix-relay.sh');

/** What the stats line of smtp-relay-client says about its own run. */
export interface ClientStats {
  messages: number;
  sessions: number;
  seconds: number;
  cpuSeconds: number;
  startupSeconds: number;
  ok: boolean;
}

/** The last stats line smtp-relay-client wrote to `stderr`, if any. */
export function clientStats(stderr: string): ClientStats | null {
  const lines = [...stderr.matchAll(/^smtp-relay-client (\{.*\})$/gm)];
  return lines.length === 0 ? null : (JSON.parse(lines[lines.length - 1]![1]!) as ClientStats);
}

export interface PeerRun {
  perSecond: number;
  /** The client done: every message queued by Postfix and fsynced. */
  injectPerSecond: number;
  leftInQueue: number;
  dkimCheck: string;
  /** smtp-relay-client's stats of the measured run (null with smtp-source). */
  client: ClientStats | null;
  /** Over the whole call (set-up, check, warm-up, run, stop). */
  seconds: number;
  cpu: OtherCpu;
  /** What an idle Postilion (still running, between its own runs) used meanwhile. */
  postilionCores: number | null;
}

/** Why the peer cannot run here, or null when it can. */
export function peerMissing(): string | null {
  if (process.getuid?.() !== 0) return 'not root (the script chowns its work dir to postfix and starts OpenDKIM as its user)';
  if (!existsSync(PEER_SCRIPT)) return `no ${PEER_SCRIPT}`;
  const missing = ['postfix', 'postsuper', 'smtp-source', 'smtp-sink', 'opendkim', 'opendkim-genkey'].filter((cmd) => {
    try {
      execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
      return false;
    } catch {
      return true;
    }
  });
  return missing.length === 0 ? null : `${missing.join(', ')} not installed (Debian packages postfix, opendkim, opendkim-tools)`;
}

/** Postfix's and OpenDKIM's versions, for the header. */
export function peerVersions(): string {
  const run = (cmd: string, args: string[]): string => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
        .trim()
        .split('\n')[0]!;
    } catch {
      return '?';
    }
  };
  return `Postfix ${run('postconf', ['-dh', 'mail_version'])}, ${run('opendkim', ['-V'])}`;
}

export interface PeerOptions {
  messages: number;
  sessions: number;
  msglen: number;
  sinkPort: number;
  work: string;
  /** Directory whose `smtp-source` is the benchmark's client; null: Postfix's smtp-source. */
  shim: string | null;
  postilionPid: number;
}

/** One call of the script with RUNS=1; bounded: it is killed after a generous time. */
export async function peerRun(o: PeerOptions): Promise<PeerRun> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DKIM: '1',
    RUNS: '1',
    MSGS: String(o.messages),
    SESS: String(o.sessions),
    MSGLEN: String(o.msglen),
    SINK_PORT: String(o.sinkPort),
    BENCH_WORK: o.work,
    RESULTS: resolve(o.work, 'results.tsv'),
    PATH: o.shim ? `${o.shim}:${process.env.PATH}` : process.env.PATH,
  };
  // Postfix offers no AUTH: the client must not try it there.
  delete env.BENCH_SMTP_USER;
  delete env.BENCH_SMTP_PASS;
  const limitMs = 120_000 + o.messages * 50;
  const postilion0 = cpuSeconds(o.postilionPid);
  const before = snapshot();
  const proc = spawn('bash', [PEER_SCRIPT], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => {
    stderr += `\n(killed after ${limitMs} ms)`;
    proc.kill('SIGTERM');
  }, limitMs);
  // 'close': the script has ended and its output has been read to the end.
  const code = await new Promise<number | null>((done) => proc.once('close', (c) => done(c)));
  clearTimeout(timer);
  // The master of Postfix leaves the process tree: its pid file marks it as ours until the stop.
  const after = snapshot();
  const postilion1 = cpuSeconds(o.postilionPid);
  stopLeftovers(o.work);
  const run = /run 1: e2e (\d+) msgs\/s, inject (\d+) msgs\/s, left in queue: (\d+)/.exec(stderr);
  if (code !== 0 || !run) throw new Error(`${PEER_SCRIPT} exited with ${code}:\n${stderr.slice(-2000)}\n${stdout.slice(-500)}`);
  const seconds = (after.at - before.at) / 1000;
  return {
    perSecond: Number(run[1]),
    injectPerSecond: Number(run[2]),
    leftInQueue: Number(run[3]),
    dkimCheck: /DKIM check: (.*)/.exec(stderr)?.[1]?.trim() ?? '?',
    client: o.shim ? clientStats(stderr) : null,
    seconds,
    cpu: otherCpu(before, after, masterPid(o.work)),
    postilionCores: postilion0 === null || postilion1 === null ? null : (postilion1 - postilion0) / seconds,
  };
}

function masterPid(work: string): Set<number> {
  try {
    return new Set([Number(readFileSync(resolve(work, 'postfix/spool/pid/master.pid'), 'utf8').trim())]);
  } catch {
    return new Set();
  }
}

/** After a script that was killed: its private Postfix stopped, its OpenDKIM ended (by pid file). */
export function stopLeftovers(work: string): void {
  const etc = resolve(work, 'postfix/etc');
  if (existsSync(resolve(work, 'postfix/spool/pid/master.pid'))) {
    try {
      execFileSync('postfix', ['-c', etc, 'status'], { stdio: 'ignore' });
      execFileSync('postfix', ['-c', etc, 'stop'], { stdio: 'ignore' });
    } catch {
      // Not running.
    }
  }
  try {
    const pid = Number(readFileSync(resolve(work, 'opendkim/opendkim.pid'), 'utf8').trim());
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (cmdline.includes(work)) process.kill(pid, 'SIGTERM');
  } catch {
    // Not running.
  }
}
