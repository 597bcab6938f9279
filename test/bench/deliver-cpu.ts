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

/** A process as /proc shows it: its parent, owner and CPU seconds so far. */
export interface ProcessCpu {
  pid: number;
  ppid: number;
  uid: number;
  comm: string;
  cpu: number;
  /** Start time in clock ticks since boot: with the pid, tells a process from a later one that reuses its pid. */
  start: number;
}

/** Every process of the machine with its CPU so far, from /proc (empty where there is none). */
export function processes(): Map<number, ProcessCpu> {
  const table = new Map<number, ProcessCpu>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return table;
  }
  for (const name of pids) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${name}/status`, 'utf8'))?.[1] ?? -1);
      table.set(Number(name), {
        pid: Number(name),
        ppid: Number(fields[1]),
        uid,
        comm,
        cpu: (Number(fields[11]) + Number(fields[12])) / 100,
        start: Number(fields[19]),
      });
    } catch {
      // The process ended while the table was read.
    }
  }
  return table;
}
