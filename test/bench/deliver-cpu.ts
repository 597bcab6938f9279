/**
 * CPU accounting for test/bench/deliver.ts, from Linux's /proc: a process, its threads (the
 * event loop's apart from the others), and the whole machine. Each returns null where /proc is
 * not there, and the benchmark then leaves those figures out.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** User + system CPU seconds of a process (all its threads), from /proc; null where there is none. */
export function cpuSeconds(pid: number | undefined, path = `/proc/${pid}/stat`): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(path, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in USER_HZ ticks
  } catch {
    return null;
  }
}

/** Busy CPU seconds of the whole machine (all cores), from /proc/stat; null where there is none. */
export function machineBusy(): number | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
    return (user + nice + system + irq + softirq + steal) / 100;
  } catch {
    return null;
  }
}

/** CPU seconds of a process's main thread and of all its other threads together, from /proc. */
export function threadCpu(pid: number): { main: number; others: number } | null {
  try {
    let main = 0;
    let others = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const cpu = cpuSeconds(Number(tid), `/proc/${pid}/task/${tid}/stat`);
      if (cpu === null) continue;
      if (Number(tid) === pid) main += cpu;
      else others += cpu;
    }
    return { main, others };
  } catch {
    return null;
  }
}
