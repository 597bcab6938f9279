import pg from 'pg';

/** The advisory lock that is the leader lease (the migrations' is 7_302_145_001). */
export const LEASE_LOCK = 7_302_145_002;
/** How often a node that is not the leader tries to take the lease, and the leader checks its connection. */
export const LEASE_TRY_MS = 2000;
/** A leader whose connection does not answer its check within this time lets the lease go. */
const CHECK_MS = 2000;
/**
 * The server's TCP keepalives on the lease connection, in seconds: a node that vanishes without
 * closing its socket (its host lost, a cable cut) has its session, and so the lease, ended by
 * the server after about idle + interval × count = 5 s; a killed process's socket is closed by
 * its kernel, which ends the session at once. (On a Unix socket they do not apply, nor matter.)
 */
const KEEPALIVE = { idle: 2, interval: 1, count: 3 };

/**
 * The leader lease: a PostgreSQL session advisory lock held on a connection of its own. A node
 * tries to take it every 2 s; the node holding it is the leader until that connection ends, which
 * it learns at once from the connection's error or end (and within 2 s from an unanswered check,
 * when the network goes silent). The server releases the lock when the session ends: a leader
 * that dies is replaced within a few seconds. A lease is not a fence: for the short time a
 * leader cut off from the database takes to notice, two nodes may both believe they lead, so
 * the work done by the leader must bear being done twice (purges, DNS checks, DKIM rotation under
 * the domain's lock).
 *
 * The lock needs a real session: a connection pooler in transaction mode in front of the
 * database would give it to whichever client runs next on that server connection.
 */
export class LeaderLease {
  private client: pg.Client | null = null;
  private leader = false;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = false;
  /** Whether the last try failed: a database that stays down is reported once, not at every try. */
  private failing = false;
  /** Times this node became or stopped being the leader. */
  changes = 0;
  /** The database backend of the lease connection (null while there is none). */
  backendPid: number | null = null;

  constructor(
    private readonly connection: pg.ClientConfig,
    private readonly options: { tryMs?: number; onChange?: (leader: boolean) => void; onError?: (err: Error) => void } = {},
  ) {}

  get isLeader(): boolean {
    return this.leader;
  }

  /** Tries to take the lease now, then every 2 s. */
  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Lets the lease go (the session ends) and stops trying. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.ticking;
    const client = this.client;
    this.client = null;
    this.backendPid = null;
    this.set(false);
    await client?.end().catch(() => undefined);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.ticking = this.tick().finally(() => {
        this.ticking = null;
        this.schedule(this.options.tryMs ?? LEASE_TRY_MS);
      });
    }, ms);
  }

  /** Takes the lease if it is free, or (as the leader) checks that the connection holding it still answers. */
  private async tick(): Promise<void> {
    let client: pg.Client | null = this.client;
    try {
      client ??= await this.connect();
      if (this.leader) {
        await answered(client.query('SELECT 1'));
      } else {
        const { rows } = await answered(client.query<{ taken: boolean }>('SELECT pg_try_advisory_lock($1) AS taken', [LEASE_LOCK]));
        if (rows[0]?.taken === true && this.client === client) this.set(true);
      }
      this.failing = false;
    } catch (err) {
      if (!this.stopped && !this.failing) this.options.onError?.(err as Error);
      this.failing = true;
      // Whatever state the session is in (a lock taken whose answer was lost), it ends with the connection.
      if (client) this.lost(client);
    }
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({ ...this.connection, keepAlive: true, keepAliveInitialDelayMillis: KEEPALIVE.idle * 1000 });
    client.on('error', (err) => {
      this.options.onError?.(err);
      this.lost(client);
    });
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await answered(
        client.query(
          `SET tcp_keepalives_idle = ${KEEPALIVE.idle}; SET tcp_keepalives_interval = ${KEEPALIVE.interval}; SET tcp_keepalives_count = ${KEEPALIVE.count}`,
        ),
      );
      const { rows } = await answered(client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'));
      if (this.stopped) throw new Error('the lease was stopped');
      this.client = client;
      this.backendPid = rows[0]!.pid;
      return client;
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
  }

  /** The lease connection is gone or unusable: this node is not the leader from now on. */
  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = null;
    this.backendPid = null;
    this.set(false);
    void client.end().catch(() => undefined);
  }

  private set(leader: boolean): void {
    if (this.leader === leader) return;
    this.leader = leader;
    this.changes += 1;
    this.options.onChange?.(leader);
  }
}

/** The query's result, or an error when the server has not answered within CHECK_MS. */
async function answered<T>(query: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`the cluster database did not answer within ${CHECK_MS / 1000} s`)), CHECK_MS);
  });
  try {
    return await Promise.race([query, late]);
  } finally {
    clearTimeout(timer);
  }
}
