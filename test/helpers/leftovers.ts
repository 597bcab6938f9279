/**
 * Root hooks (`.mocharc.json` `require`): a spec file that leaves a listening socket or a child
 * process behind fails. Run one after another, such a leftover kept mocha from ending; in
 * parallel mode each worker process runs several files and is ended by the pool when the run is
 * over, which would hide it (and leave an orphaned daemon running): so it is checked after each
 * file there (after the whole run in serial mode).
 */
import { relative } from 'node:path';

/**
 * Handles that hold a port, a socket path or a process (PipeWrap: a Unix socket, or a child's
 * stdio until it is gone); timers and TCP client sockets are not counted.
 */
const HELD = ['TCPServerWrap', 'PipeWrap', 'UDPWrap', 'ProcessWrap'];

/** How long a handle closed by the file's last hook may take to be gone. */
const SETTLE_MS = 10_000;

function held(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) if (HELD.includes(type)) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

function beyond(now: Map<string, number>, baseline: Map<string, number>): string[] {
  return [...now].filter(([type, n]) => n > (baseline.get(type) ?? 0)).map(([type, n]) => `${n - (baseline.get(type) ?? 0)} ${type}`);
}

// stdout and stderr become PipeWraps when first used: made now, they are part of the baseline.
void process.stdout;
void process.stderr;
/** What this process held before its spec files were loaded (its own pipes). */
let baseline = held();

export const mochaHooks = {
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(SETTLE_MS + 5_000);
    const deadline = Date.now() + SETTLE_MS;
    let extra = beyond(held(), baseline);
    while (extra.length > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      extra = beyond(held(), baseline);
    }
    if (extra.length > 0) {
      // Reported once: the next file in this process is judged on what it leaves itself.
      baseline = held();
      const files = [...new Set(this.test?.parent?.suites.map((suite) => suite.file))];
      const by = files.length === 1 && files[0] ? `${relative(process.cwd(), files[0])} left` : 'left';
      throw new Error(`${by} behind after its tests and hooks ended: ${extra.join(', ')} (a listener, socket path or child process not closed)`);
    }
  },
};
