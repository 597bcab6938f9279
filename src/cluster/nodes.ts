import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ClusterError } from './database.ts';

/** How often a node writes its heartbeat. */
export const HEARTBEAT_MS = 2000;
/** A node whose last heartbeat is older than this is gone: its id may be taken, it no longer counts among the live nodes. */
export const LIVE_MS = 10_000;

/** The first key of the node ids' session locks (pg_advisory_lock(int, int): apart from the one-key locks of the migrations and the lease). */
const NODE_LOCK_CLASS = 7302;

/** What a node tells the others about itself with each heartbeat (nodes.info; `postilion cluster status` shows it). */
export interface NodeInfo {
  version: string;
  pid: number;
  hostname: string;
  /** Its API's plain listener. */
  api_url: string | null;
  /** Messages on its due-time index (counted at most every 30 s; null before the first count), jobs ready and in flight in its memory. */
  queue: { queued: number | null; ready: number; in_flight: number };
  /** The database backend of its leader-lease connection: the leader is the node whose backend holds the lease (pg_locks). */
  lease_pid: number | null;
}

/** Whether the heartbeats go through, and why not. */
export type NodeHealth = { ok: true } | { ok: false; reason: string };

/**
 * This node's row in `nodes`: registered at start, refreshed by a heartbeat every 2 s, marked
 * stopped at a clean stop. The node id is held by a session lock on a connection of its own, which
 * PostgreSQL lets go the moment the process dies: a start is refused while another process holds
 * it, and a node killed and started again takes its id back at once (without waiting for its old
 * heartbeat to age). Without the lock (its connection lost) the row's heartbeat decides: another
 * process may take the id when it is 10 s old. Times are the database's, so the nodes'
 * clocks do not have to agree. The heartbeat also counts the live nodes, for the per-node share
 * of limits that are not cluster-wide.
 */
export class NodeRegistry {
  /** This process: a restart is another instance of the same node. */
  readonly instance = randomUUID();
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private registered = false;
  private stopped = false;
  private live = 1;
  private state: NodeHealth = { ok: true };
  /** The connection holding the node id's session lock (null: not held). */
  private lock: pg.Client | null = null;

  constructor(
    private readonly pool: pg.Pool,
    readonly nodeId: string,
    /** What each heartbeat writes into nodes.info. */
    private readonly info: () => Promise<NodeInfo>,
    /** `onError`: a heartbeat failed after one that went through. */
    private readonly options: { heartbeatMs?: number; liveMs?: number; onError?: (err: Error) => void } = {},
  ) {}

  private get liveSeconds(): number {
    return (this.options.liveMs ?? LIVE_MS) / 1000;
  }

  /** Takes the node id for this process; a ClusterError when a live node of another process holds it. */
  async register(): Promise<void> {
    const locked = await this.takeLock();
    if (await this.claim(await this.info(), locked)) {
      this.registered = true;
      return;
    }
    await this.dropLock();
    const { rows } = await this.pool.query<{ info: Partial<NodeInfo>; age: number }>(
      'SELECT info, extract(epoch FROM now() - heartbeat_at)::float8 AS age FROM nodes WHERE id = $1',
      [this.nodeId],
    );
    const holder = rows[0];
    const who = holder ? ` (${holder.info.hostname ?? 'unknown host'}, pid ${holder.info.pid ?? '?'}, last heartbeat ${holder.age.toFixed(1)} s ago)` : '';
    throw new ClusterError(
      `the cluster node id "${this.nodeId}" is held by a live node${who}: give this node another cluster.node_id, or stop that one ` +
        `(a node that stops cleanly frees its id at once; one that died frees it ${this.liveSeconds} s after its last heartbeat)`,
    );
  }

  /** Writes a heartbeat every 2 s until stopped. */
  start(): void {
    this.schedule();
  }

  /** The nodes with a fresh heartbeat, this one included (as of the last heartbeat): at least 1. */
  liveNodes(): number {
    return this.live;
  }

  get health(): NodeHealth {
    return this.state;
  }

  /** Ends the heartbeats and marks the node stopped, which frees its id at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.beating;
    if (!this.registered) return;
    this.registered = false;
    try {
      await this.pool.query('UPDATE nodes SET stopped_at = now() WHERE id = $1 AND instance = $2', [this.nodeId, this.instance]);
    } finally {
      await this.dropLock();
    }
  }

  /** Takes the node id's session lock on a connection of its own; whether it got it (false: another live process holds it). */
  private async takeLock(): Promise<boolean> {
    const client = new pg.Client({ ...(this.pool.options as pg.ClientConfig), keepAlive: true });
    // A lost connection lets the lock go: the heartbeat takes it again when it can.
    client.on('error', () => void this.lockLost(client));
    client.on('end', () => void this.lockLost(client));
    try {
      await client.connect();
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [NODE_LOCK_CLASS, this.nodeId]);
      if (rows[0]?.ok === true) {
        this.lock = client;
        return true;
      }
    } catch {
      // No lock connection: the heartbeat's age decides, as without locks.
    }
    await client.end().catch(() => undefined);
    return false;
  }

  private lockLost(client: pg.Client): void {
    if (this.lock !== client) return;
    this.lock = null;
    void client.end().catch(() => undefined);
  }

  private async dropLock(): Promise<void> {
    const client = this.lock;
    this.lock = null;
    await client?.end().catch(() => undefined);
  }

  /** One heartbeat now (the timer's; tests call it to not wait). */
  async beat(): Promise<void> {
    try {
      const info = await this.info();
      const { rows } = await this.pool.query<{ mine: number; others: number }>(
        `WITH beat AS (UPDATE nodes SET heartbeat_at = now(), info = $3 WHERE id = $1 AND instance = $2 AND stopped_at IS NULL RETURNING 1)
         SELECT (SELECT count(*) FROM beat)::int AS mine,
                (SELECT count(*) FROM nodes WHERE id <> $1 AND stopped_at IS NULL AND heartbeat_at > now() - make_interval(secs => $4::float8))::int AS others`,
        [this.nodeId, this.instance, JSON.stringify(info), this.liveSeconds],
      );
      const { mine, others } = rows[0]!;
      this.live = others + 1;
      // The row is gone (an operator deleted it) or another process took the id while this one
      // missed its heartbeats (a pause of over 10 s): take it back if no one live holds it.
      if (this.lock === null && !this.stopped) await this.takeLock();
      // Not over a live holder even with the lock: a process that took the id meanwhile keeps it.
      if (mine === 0 && !(await this.claim(info, false))) {
        this.state = { ok: false, reason: `another process took the node id "${this.nodeId}" while this one missed its heartbeats` };
        return;
      }
      this.state = { ok: true };
    } catch (err) {
      // A database that stays down is reported once, not at every heartbeat; readiness says it meanwhile.
      if (this.state.ok) this.options.onError?.(err as Error);
      this.state = { ok: false, reason: `no heartbeat: ${(err as Error).message}` };
    }
  }

  /**
   * Inserts or takes over the node's row, unless a live node of another process holds it; whether
   * it did. `locked`: this process holds the node id's lock, so no other live process has the id.
   */
  private async claim(info: NodeInfo, locked: boolean): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `INSERT INTO nodes AS n (id, instance, started_at, heartbeat_at, info, stopped_at) VALUES ($1, $2, now(), now(), $3, NULL)
       ON CONFLICT (id) DO UPDATE
         SET instance = EXCLUDED.instance, started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at, info = EXCLUDED.info, stopped_at = NULL
         WHERE $5::boolean OR n.instance = EXCLUDED.instance OR n.stopped_at IS NOT NULL OR n.heartbeat_at <= now() - make_interval(secs => $4::float8)`,
      [this.nodeId, this.instance, JSON.stringify(info), this.liveSeconds, locked],
    );
    return rowCount === 1;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.beating = this.beat().finally(() => {
        this.beating = null;
        this.schedule();
      });
    }, this.options.heartbeatMs ?? HEARTBEAT_MS);
  }
}
