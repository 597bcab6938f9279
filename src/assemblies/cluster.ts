import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { LeaderLease } from '../cluster/leader.ts';
import { NodeRegistry, type NodeInfo } from '../cluster/nodes.ts';
import { clusterMetrics, type ClusterCounters } from '../metrics/cluster.ts';
import type { SharedLimits } from '../cluster/shared-limits.ts';
import type { JobsAssembly } from './jobs.ts';
import type { Assembly, Context, Readiness } from './lifecycle.ts';

/** The queue count in the heartbeat is a scan of the due-time index: at most this often. */
const QUEUE_COUNT_MS = 30_000;

/**
 * Cluster mode's node identity (DESIGN.md §10): this node's row in `nodes` with a heartbeat
 * every 2 s (a start is refused while another live process holds the node id), and the leader
 * lease, whose holder does the work done once per cluster (`isLeader`, which the core's
 * scheduled jobs ask). Its metrics: the pool, the lease, the live nodes, the publication lag, the
 * invalidations heard.
 * A single node has none of this, and is its own leader. Second in the daemon's list: the node
 * is registered before anything else starts, and marked stopped just before the store closes.
 * It runs the node's publication (cluster/publisher.ts) from its registration to its drain.
 */
export class ClusterAssembly implements Assembly {
  readonly name = 'cluster';
  /** The cluster section belongs to the core, which opens the cluster's database with the store. */
  readonly sections = [];
  private readonly nodes: NodeRegistry | null = null;
  private readonly lease: LeaderLease | null = null;
  private counters: ClusterCounters | null = null;
  private queued: { count: number | null; at: number } = { count: null, at: -Infinity };
  private stopping = false;

  constructor(
    private readonly ctx: Context,
    private readonly jobs: JobsAssembly,
    /** The limits the daemon made for this node (started here, closed after the job engine stopped); null: none, or the caller's. */
    private readonly limits: SharedLimits | null = null,
  ) {
    const { core, log, signals, metrics, bound } = ctx;
    const cluster = core.cluster;
    if (!cluster) return;
    const { address, port } = bound.api.address;
    const apiUrl = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
    const version = packageVersion();
    this.nodes = new NodeRegistry(
      cluster.pool,
      cluster.nodeId,
      async (): Promise<NodeInfo> => ({
        version,
        pid: process.pid,
        hostname: hostname(),
        api_url: apiUrl,
        queue: await this.queueFigures(),
        lease_pid: this.lease?.backendPid ?? null,
      }),
      { onError: (err) => log.warn({ err: err.message, node_id: cluster.nodeId }, 'cluster heartbeat failed') },
    );
    this.lease = new LeaderLease(cluster.connection, {
      onChange: (leader) => {
        this.counters?.leaderChanges.inc();
        log.info({ node_id: cluster.nodeId }, leader ? 'this node is the cluster leader' : 'this node is no longer the cluster leader');
      },
      onError: (err) => log.warn({ err: err.message, node_id: cluster.nodeId }, 'cluster leader lease connection failed'),
    });
    this.counters = clusterMetrics(metrics.registry, {
      pool: cluster.pool,
      isLeader: () => this.isLeader(),
      liveNodes: () => this.liveNodes(),
      publicationLagMs: () => core.publisher?.lagMs ?? 0,
    });
    signals.on('store.heard', (invalidation) =>
      this.counters?.invalidations.inc({ scope: invalidation === null || invalidation.changes.some((c) => 'all' in c) ? 'all' : 'keys' }),
    );
  }

  /** Whether this node does the work done once per cluster: the leader's, and every single node's. */
  readonly isLeader = (): boolean => this.lease?.isLeader ?? true;

  /** The nodes with a fresh heartbeat (this one included), for a node's share of a limit: 1 for a single node. */
  liveNodes(): number {
    return this.nodes?.liveNodes() ?? 1;
  }

  async start(): Promise<void> {
    if (!this.nodes || !this.lease) return;
    await this.nodes.register();
    this.nodes.start();
    this.lease.start();
    await this.limits?.start();
    // Its outbox is published under its node id: only once the id is this process's.
    await this.ctx.core.publisher?.start();
    this.ctx.log.info({ node_id: this.nodes.nodeId, instance: this.nodes.instance }, 'cluster node registered');
  }

  ready(): Readiness[] {
    if (!this.nodes) return [];
    const health = this.nodes.health;
    return [{ name: health.ok ? 'cluster database' : `cluster database (${health.reason})`, ok: health.ok && !this.stopping }];
  }

  async stopListening(): Promise<void> {
    this.stopping = true;
  }

  /** After the drains of the assemblies after it (their events are recorded): what is left is published. */
  async drain(graceMs: number): Promise<void> {
    await this.ctx.core.publisher?.stop(graceMs);
  }

  /** The lease is let go and the node marked stopped; the store (and the pool) close after, with the core. */
  async close(): Promise<void> {
    // After the job engine (closed before this one): the slot leases it held are given back.
    await this.limits?.close();
    await this.lease?.stop();
    await this.nodes?.stop();
  }

  /** The queue as the heartbeat tells it: the engine's memory at each beat, the due-time index counted at most every 30 s. */
  private async queueFigures(): Promise<NodeInfo['queue']> {
    const now = Date.now();
    if (now - this.queued.at >= QUEUE_COUNT_MS) {
      this.queued.at = now;
      // Index entries of jobs already done are dropped when they come due: the count is close, not exact.
      let count = 0;
      try {
        for await (const _entry of this.ctx.core.jobIndex.entries('message')) count++;
        this.queued.count = count;
      } catch {
        // The store reopening after a failed write: the last count stands until the next.
      }
    }
    const snapshot = this.jobs.engine.snapshot();
    return { queued: this.queued.count, ready: snapshot.ready, in_flight: snapshot.running };
  }
}

/** The version in package.json, two levels up from src/assemblies/ and from dist/assemblies/ alike. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
