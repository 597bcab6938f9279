import type { JobKindName } from '../store/job-index.ts';
import type { DestinationStates } from './destination-states.ts';
import type { DispatcherName } from './job-kind.ts';
import type { ReadyQueues } from './ready-queues.ts';
import type { LaneLimits, ShapingView } from './shaping/lane-shaping.ts';

/** A destination of the engine as the operator sees it (`postilion queue status`). */
export interface EngineDestination {
  destination: string;
  dispatcher: DispatcherName;
  kinds: JobKindName[];
  ready: number;
  running: number;
  concurrency: number;
  rate: number | null;
  suspended: boolean;
  /** Found down, or suspended by a throttling reply: no job starts before this time. */
  pausedUntil: number | null;
  /** The shaping provider whose rules apply, and a throttle in force (null: no provider's rules apply). */
  shaping: ShapingView | null;
}

/** Every destination with jobs in memory, suspended, paused or throttled, with its limits, by name. */
export function describeDestinations(
  pools: Record<DispatcherName, ReadyQueues>,
  states: DestinationStates,
  shaping: LaneLimits | null = null,
): EngineDestination[] {
  const out: EngineDestination[] = [];
  for (const [dispatcher, pool] of Object.entries(pools) as Array<[DispatcherName, ReadyQueues]>) {
    for (const destination of pool.names()) out.push(describe(pools, states, shaping, { dispatcher, pool, destination }));
  }
  for (const destination of [...states.heldNames(), ...(shaping?.throttledLanes() ?? [])]) {
    if (!out.some((d) => d.destination === destination)) out.push(describe(pools, states, shaping, { dispatcher: null, pool: null, destination }));
  }
  return out.sort((a, b) => a.destination.localeCompare(b.destination));
}

/** Where a destination is: the dispatcher and ready queues it has jobs in, or neither (only held). */
interface Where {
  dispatcher: DispatcherName | null;
  pool: ReadyQueues | null;
  destination: string;
}

function describe(pools: Record<DispatcherName, ReadyQueues>, states: DestinationStates, shaping: LaneLimits | null, at: Where): EngineDestination {
  const { pool, destination } = at;
  const limits = states.limitsOf(destination);
  const d = at.dispatcher ?? (destination.includes('://') ? 'http' : 'smtp');
  const concurrency = limits?.concurrency ?? pools[d].limits.perDestination;
  // Jobs handed to the dispatcher beyond the concurrency wait in its queue: shown as ready.
  const handed = pool?.runningPer.get(destination) ?? 0;
  const running = Math.min(handed, concurrency);
  return {
    destination,
    dispatcher: d,
    kinds: [...(pool?.kindsPer.get(destination) ?? [])],
    ready: (pool?.ready.get(destination)?.length ?? 0) + handed - running,
    running,
    concurrency,
    rate: limits?.rate ?? null,
    suspended: states.isSuspended(destination),
    pausedUntil: states.pausedUntil(destination),
    shaping: shaping?.view(destination) ?? null,
  };
}
