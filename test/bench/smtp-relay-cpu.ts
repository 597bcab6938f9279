/**
 * Whose CPU it was, for test/bench/smtp-relay.ts: the processes of the benchmark (this one and
 * everything it started, Postfix's daemons and OpenDKIM included) against the rest of the
 * machine, from /proc process tables taken before and after a window. Also the wait for a quiet
 * machine before each measurement: other engineers' test suites share these two cores.
 */
import { readFileSync } from 'node:fs';
import { machineBusy, processes, type ProcessCpu } from './deliver-cpu.ts';

export interface Snapshot {
  at: number;
  table: Map<number, ProcessCpu>;
  busy: number | null;
}

export interface OtherCpu {
  /** Cores the machine was busy on average (all processes, the kernel's work for them included). */
  machineCores: number | null;
  /** Cores used by processes that are not the benchmark's (seen at the end of the window). */
  otherCores: number;
  /** The busiest of those, as "name(pid) cores". */
  top: string[];
}

export function snapshot(): Snapshot {
  return { at: performance.now(), table: processes(), busy: machineBusy() };
}

/** Users whose processes are the peers' (Postfix's daemons, smtp-sink run with -u postfix, OpenDKIM). */
function peerUids(): Set<number> {
  const uids = new Set<number>();
  try {
    for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const [name, , uid] = line.split(':');
      if (name === 'postfix' || name === 'opendkim') uids.add(Number(uid));
    }
  } catch {
    // No passwd file: only the process tree counts as ours.
  }
  return uids;
}
const PEER_UIDS = peerUids();

/**
 * Whether a process is the benchmark's: this process or a descendant of it, a descendant of one
 * of `roots` (a daemon that left the tree, like Postfix's master), or run as a peer's user.
 */
function ours(p: ProcessCpu, table: Map<number, ProcessCpu>, roots: Set<number>): boolean {
  for (let at: ProcessCpu | undefined = p, hops = 0; at && hops < 64; at = table.get(at.ppid), hops++) {
    if (at.pid === process.pid || roots.has(at.pid) || PEER_UIDS.has(at.uid)) return true;
  }
  return false;
}

/**
 * The CPU of the machine's other processes between two snapshots. A process that started and
 * ended between them is not seen; the quiet check before each run is there for those.
 */
export function otherCpu(before: Snapshot, after: Snapshot, roots: Set<number> = new Set()): OtherCpu {
  const seconds = (after.at - before.at) / 1000;
  const used: Array<{ name: string; cpu: number }> = [];
  for (const p of after.table.values()) {
    if (ours(p, after.table, roots)) continue;
    const then = before.table.get(p.pid);
    const cpu = then && then.start === p.start ? p.cpu - then.cpu : p.cpu;
    if (cpu > 0) used.push({ name: `${p.comm}(${p.pid})`, cpu });
  }
  used.sort((a, b) => b.cpu - a.cpu);
  const total = used.reduce((sum, u) => sum + u.cpu, 0);
  return {
    machineCores: before.busy === null || after.busy === null ? null : (after.busy - before.busy) / seconds,
    otherCores: total / seconds,
    top: used.slice(0, 3).map((u) => `${u.name} ${(u.cpu / seconds).toFixed(2)}`),
  };
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/**
 * Waits until the other processes use less than `maxCores` over a `sampleMs` sample, checking
 * again every 15 s for at most `waitMs`. Returns the last sample and whether it was quiet.
 */
export async function waitQuiet(
  maxCores: number,
  waitMs: number,
  sampleMs = 3000,
  say: (text: string) => void = () => undefined,
): Promise<{ quiet: boolean; sample: OtherCpu }> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const before = snapshot();
    await sleep(sampleMs);
    const sample = otherCpu(before, snapshot());
    if (sample.otherCores < maxCores) return { quiet: true, sample };
    if (Date.now() + 15_000 > deadline) return { quiet: false, sample };
    say(`  machine busy: other processes use ${sample.otherCores.toFixed(2)} cores (${sample.top.join(', ')}); waiting 15 s…`);
    await sleep(15_000);
  }
}
