import type pg from 'pg';
import { LIVE_MS } from './nodes.ts';

/** The other nodes of the cluster, as their rows in `nodes` show them. */
export interface NodeStates {
  /** A fresh heartbeat, and not stopped: it can be asked. */
  live: string[];
  /** Known to the cluster, but stopped or silent (no heartbeat for LIVE_MS): what it holds cannot be reached. */
  down: string[];
}

/** Which nodes can be asked (remote-messages.ts, drain.ts). */
export interface LiveNodes {
  others(): Promise<NodeStates>;
}

/** The other nodes' states, read from `nodes` when asked (times on the database's clock), as NodeRegistry counts them. */
export class LiveNodesOf implements LiveNodes {
  constructor(
    private readonly pool: pg.Pool,
    private readonly nodeId: string,
  ) {}

  async others(): Promise<NodeStates> {
    const { rows } = await this.pool.query<{ id: string; live: boolean }>(
      'SELECT id, (stopped_at IS NULL AND heartbeat_at > now() - make_interval(secs => $2)) AS live FROM nodes WHERE id <> $1 ORDER BY id',
      [this.nodeId, LIVE_MS / 1000],
    );
    return { live: rows.filter((r) => r.live).map((r) => r.id), down: rows.filter((r) => !r.live).map((r) => r.id) };
  }
}
