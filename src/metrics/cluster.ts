import { Counter, Gauge, type Registry } from 'prom-client';

/** What the cluster gauges read (assemblies/cluster.ts): the pool's figures, the lease and the heartbeats. */
export interface ClusterView {
  pool: { readonly totalCount: number; readonly idleCount: number; readonly waitingCount: number };
  isLeader(): boolean;
  liveNodes(): number;
  /** The age in ms of this node's oldest event not yet published (cluster/publisher.ts). */
  publicationLagMs(): number;
}

/** The instruments the cluster assembly feeds. */
export interface ClusterCounters {
  leaderChanges: Counter;
  invalidations: Counter<'scope'>;
}

/**
 * The cluster mode's metrics (registered only in cluster mode): the connection pool to the
 * cluster's database, the leader lease, the live nodes, the publication lag, and the cache
 * invalidations heard from other nodes. Gauges are read at the scrape; nothing here asks the database.
 */
export function clusterMetrics(registry: Registry, view: ClusterView): ClusterCounters {
  new Gauge({
    name: 'postilion_cluster_pool_connections',
    help: "Connections of this node's pool to the cluster database, by state (total: open; idle: open and unused).",
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      this.set({ state: 'total' }, view.pool.totalCount);
      this.set({ state: 'idle' }, view.pool.idleCount);
    },
  });
  new Gauge({
    name: 'postilion_cluster_pool_waiting_queries',
    help: 'Queries waiting for a connection of the pool (all connections busy, cluster.pool_size reached).',
    registers: [registry],
    collect() {
      this.set(view.pool.waitingCount);
    },
  });
  new Gauge({
    name: 'postilion_cluster_leader',
    help: 'Whether this node holds the leader lease (1) and does the work done once per cluster: DKIM rotation, DNS checks, purges of shared records.',
    registers: [registry],
    collect() {
      this.set(view.isLeader() ? 1 : 0);
    },
  });
  new Gauge({
    name: 'postilion_cluster_publication_lag_seconds',
    help: "Age of this node's oldest event not yet published for reads on any node (0: none waits).",
    registers: [registry],
    collect() {
      this.set(view.publicationLagMs() / 1000);
    },
  });
  new Gauge({
    name: 'postilion_cluster_live_nodes',
    help: 'Nodes with a heartbeat younger than 10 s, this one included, as of its last heartbeat.',
    registers: [registry],
    collect() {
      this.set(view.liveNodes());
    },
  });
  return {
    leaderChanges: new Counter({
      name: 'postilion_cluster_leader_changes_total',
      help: 'Times this node took the leader lease or lost it.',
      registers: [registry],
    }),
    invalidations: new Counter({
      name: 'postilion_cluster_invalidations_total',
      help: 'Changes to shared records made by other nodes and heard here (LISTEN/NOTIFY), by scope (keys: the keys named; all: every cached shared record, after notifications were missed or a change too large to name).',
      labelNames: ['scope'] as const,
      registers: [registry],
    }),
  };
}
