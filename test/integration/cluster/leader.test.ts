import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { validateConfig } from '../../../src/config/load.ts';
import { LEASE_TRY_MS, LeaderLease } from '../../../src/cluster/leader.ts';
import { openClusterDb } from '../../../src/cluster/database.ts';
import { Child } from '../../helpers/child.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

/** Within this time of the leader dying, another node leads (issue 33). */
const TAKEOVER_MS = 10_000;

async function until(what: string, test: () => boolean, ms: number): Promise<number> {
  const start = Date.now();
  while (!test()) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Date.now() - start;
}

async function untilAsync(what: string, test: () => Promise<boolean>, ms: number): Promise<void> {
  const start = Date.now();
  while (!(await test())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function query<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** The leader lease: one leader among the nodes, and another soon after it dies. */
describe('cluster: the leader lease', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let leases: LeaderLease[] = [];

  before(async () => (postgres = await startPostgres()));
  afterEach(async () => {
    for (const lease of leases) await lease.stop();
    leases = [];
  });
  after(() => postgres?.stop());

  function electors(url: string, count: number): LeaderLease[] {
    const made = Array.from({ length: count }, () => new LeaderLease({ connectionString: url, application_name: 'lease test' }));
    leases.push(...made);
    return made;
  }
  const leaders = (of: LeaderLease[]) => of.filter((l) => l.isLeader);

  async function terminate(url: string, pid: number): Promise<void> {
    const [row] = await query<{ done: boolean }>(url, 'SELECT pg_terminate_backend($1) AS done', [pid]);
    expect(row!.done).to.equal(true);
  }

  /** The backend of the node's lease connection, once its heartbeat has told it. */
  async function holderOf(url: string, nodeId: string): Promise<number> {
    let pid: number | null = null;
    await untilAsync(
      `the lease backend of ${nodeId}`,
      async () => {
        pid = (await query<{ pid: number | null }>(url, "SELECT (info->>'lease_pid')::int AS pid FROM nodes WHERE id = $1", [nodeId]))[0]?.pid ?? null;
        return pid !== null;
      },
      5000,
    );
    return pid!;
  }

  async function backendAlive(url: string, pid: number): Promise<boolean> {
    return (await query(url, 'SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).length > 0;
  }

  it('of three nodes exactly one leads, and keeps leading', async () => {
    const url = await postgres.createDatabase();
    const three = electors(url, 3);
    for (const lease of three) lease.start();
    await until('a leader', () => leaders(three).length > 0, 5000);
    const first = leaders(three)[0];
    // Over two rounds of tries, never two leaders and never another one.
    const end = Date.now() + 2 * LEASE_TRY_MS + 500;
    while (Date.now() < end) {
      expect(leaders(three)).to.deep.equal([first]);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(three.map((l) => l.changes).sort()).to.deep.equal([0, 0, 1]);
  });

  it('a leader whose connection the server ends stops leading at once, and a leader is back within 10 s', async () => {
    const url = await postgres.createDatabase();
    const three = electors(url, 3);
    for (const lease of three) lease.start();
    await until('a leader', () => leaders(three).length === 1, 5000);
    const old = leaders(three)[0]!;
    const pid = old.backendPid!;
    expect(pid).to.be.a('number');
    await terminate(url, pid);
    const stepDown = await until('the old leader stops leading', () => !old.isLeader, 1000);
    expect(stepDown).to.be.below(1000);
    // Any of the three may take it, the old one too (its node is alive: it connects again).
    const took = await until('a leader again', () => leaders(three).length === 1, TAKEOVER_MS);
    expect(took).to.be.below(TAKEOVER_MS);
    expect(leaders(three)).to.have.length(1);
  });

  it('a leader process killed with SIGKILL is replaced within 10 s', async () => {
    const url = await postgres.createDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'postilion-leader-'));
    const keyFile = join(dir, 'cluster.key');
    const cluster = { database_url: url, node_id: 'killed', key_file: keyFile };
    const db = await openClusterDb(validateConfig({ cluster, keys: { dir: join(dir, 'keys') } }, 'test'), { createKey: true });
    await db.close();
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\nsmtp:\n  submission:\n    enabled: false\n  inbound:\n    enabled: false\n` +
        `cluster:\n  database_url: ${url}\n  node_id: killed\n  key_file: ${keyFile}\n`,
    );
    const child = new Child(['--config', config, 'start'], dir);
    try {
      await child.waitFor(/this node is the cluster leader/, 30_000);
      const two = electors(url, 2);
      for (const lease of two) lease.start();
      // They try, and the lease is held.
      await new Promise((r) => setTimeout(r, LEASE_TRY_MS + 500));
      expect(leaders(two)).to.deep.equal([]);
      const leasePid = await holderOf(url, 'killed');
      child.signal('SIGKILL');
      await child.exited;
      const killedAt = Date.now();
      // Its kernel closed the socket: the server ends the session, and frees the lock, at once.
      await untilAsync("the killed leader's session ended", async () => !(await backendAlive(url, leasePid)), 1000);
      const took = await until('another leader', () => leaders(two).length === 1, TAKEOVER_MS);
      expect(took).to.be.below(TAKEOVER_MS);
      expect(Date.now() - killedAt).to.be.at.most(LEASE_TRY_MS + 1000);
    } finally {
      await child.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
