import type pg from 'pg';
import { ClusterError } from './database.ts';
import { LEASE_LOCK } from './leader.ts';
import { CLUSTER_SCHEMA_VERSION } from './migrations.ts';
import { LIVE_MS, type NodeInfo } from './nodes.ts';

/** One node as `postilion cluster status` shows it. */
export interface NodeStatus {
  id: string;
  /** live: a heartbeat younger than 10 s; lost: none since (it died, or cannot reach the database); stopped: it stopped cleanly. */
  state: 'live' | 'lost' | 'stopped';
  leader: boolean;
  started_at: string;
  heartbeat_at: string;
  heartbeat_age_seconds: number;
  stopped_at: string | null;
  /** What its last heartbeat said (version, pid, host name, API URL, queue). */
  info: Partial<NodeInfo>;
  /** Its publication cursor: the last of its outbox published, and when (null: it published nothing yet). */
  publication: { cursor: string; published_at: string; age_seconds: number } | null;
}

export interface ClusterStatus {
  /** The database's schema version, and the newest this release knows. */
  schema: number;
  release_schema: number;
  /** The leader's node id; null when no node holds the lease. */
  leader: string | null;
  /** The backend holding the lease when no node's heartbeat names it yet (it just took the lease). */
  leader_backend_pid: number | null;
  live_nodes: number;
  nodes: NodeStatus[];
}

interface NodeRow {
  id: string;
  started_at: Date;
  heartbeat_at: Date;
  age: number;
  stopped_at: Date | null;
  info: Partial<NodeInfo>;
  cursor: string | null;
  published_at: Date | null;
  published_age: number | null;
}

/**
 * The cluster as its database tells it: the nodes with their last heartbeat, the leader (the
 * node whose lease connection holds the advisory lock, found in pg_locks), each node's
 * publication cursor. Reads only; ages are the database's clock, not this host's.
 */
export async function readClusterStatus(db: pg.ClientBase | pg.Pool): Promise<ClusterStatus> {
  const { rows: found } = await db.query<{ exists: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists");
  if (!found[0]?.exists) throw new ClusterError('the cluster database has no schema yet: run `postilion cluster init`, or start the first node');
  const { rows: versions } = await db.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations');
  const schema = versions[0]?.v ?? 0;
  // Schema 1 had no stopped_at: a node of that release never says it stopped.
  const stoppedAt = schema >= 2 ? 'n.stopped_at' : 'NULL::timestamptz';
  const { rows } = await db.query<NodeRow>(
    `SELECT n.id, n.started_at, n.heartbeat_at, extract(epoch FROM now() - n.heartbeat_at)::float8 AS age, ${stoppedAt} AS stopped_at, n.info,
            p.cursor, p.published_at, extract(epoch FROM now() - p.published_at)::float8 AS published_age
       FROM nodes n LEFT JOIN publication p ON p.node_id = n.id
      ORDER BY n.id`,
  );
  const { rows: holders } = await db.query<{ pid: number }>(
    `SELECT pid FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND classid::bigint * 4294967296 + objid::bigint = $1`,
    [LEASE_LOCK],
  );
  const holder = holders[0]?.pid ?? null;
  const nodes = rows.map((r): NodeStatus => {
    const state = r.stopped_at !== null ? 'stopped' : r.age * 1000 < LIVE_MS ? 'live' : 'lost';
    return {
      id: r.id,
      state,
      leader: holder !== null && state === 'live' && r.info.lease_pid === holder,
      started_at: r.started_at.toISOString(),
      heartbeat_at: r.heartbeat_at.toISOString(),
      heartbeat_age_seconds: round(r.age),
      stopped_at: r.stopped_at?.toISOString() ?? null,
      info: r.info,
      publication:
        r.cursor === null || r.published_at === null
          ? null
          : { cursor: r.cursor, published_at: r.published_at.toISOString(), age_seconds: round(r.published_age ?? 0) },
    };
  });
  const leader = nodes.find((n) => n.leader)?.id ?? null;
  return {
    schema,
    release_schema: CLUSTER_SCHEMA_VERSION,
    leader,
    leader_backend_pid: leader === null ? holder : null,
    live_nodes: nodes.filter((n) => n.state === 'live').length,
    nodes,
  };
}

const round = (seconds: number) => Math.round(seconds * 10) / 10;
