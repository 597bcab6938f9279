import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../../src/config/load.ts';
import { CLUSTER_SCHEMA_VERSION, MIGRATIONS } from '../../../src/cluster/migrations.ts';
import type { ClusterStatus } from '../../../src/cluster/status.ts';
import { checkCluster } from '../../../src/doctor/cluster.ts';
import { run } from '../../helpers/child.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

/** `postilion cluster init` and `cluster status` through the real CLI, and the doctor's cluster checks, on a real PostgreSQL. */
describe('postilion cluster', function () {
  this.timeout(120_000);
  let postgres: PostgresServer;
  let dir: string;
  let url: string;
  let node: TestServer | null = null;

  before(async () => {
    postgres = await startPostgres();
    url = await postgres.createDatabase();
    dir = mkdtempSync(join(tmpdir(), 'postilion-cluster-cli-'));
  });
  after(async () => {
    await node?.stop();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A configuration file for this database (none: one node on its own); its path. */
  function configFile(name: string, cluster: { database_url?: string; key_file?: string; node_id?: string } | null): string {
    const path = join(dir, `${name}.yaml`);
    const section = cluster
      ? `cluster:\n${Object.entries(cluster)
          .map(([k, v]) => `  ${k}: ${v}\n`)
          .join('')}`
      : '';
    writeFileSync(path, `data:\n  dir: ${join(dir, name, 'data')}\nkeys:\n  dir: ${join(dir, name, 'keys')}\n${section}`);
    return path;
  }
  const cli = (config: string, ...args: string[]) => run(['--config', config, ...args], dir);
  const keyFile = () => join(dir, 'cluster.key');

  it('refuses init and status for a configuration that is not a cluster’s, in one line', async () => {
    const single = configFile('single', null);
    for (const command of ['init', 'status']) {
      const res = await cli(single, 'cluster', command);
      expect(res.code, res.stderr).to.equal(2);
      expect(res.stderr).to.equal('postilion: this configuration is not for a cluster: set cluster.database_url (or cluster.database_url_file) first\n');
    }
  });

  it('start is refused in one line with exit 2, before any listener, without the key, and with a database that does not answer', async () => {
    const other = await postgres.createDatabase();
    // Every listener on a port of the kernel's choosing: the start binds them before it opens anything.
    const freePorts =
      'api:\n  port: 0\nsmtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\ntracking:\n  port: 0\nmetrics:\n  port: 0\n';
    const startable = (name: string, cluster: { database_url: string; key_file: string; node_id: string }) => {
      const path = configFile(name, cluster);
      writeFileSync(path, readFileSync(path, 'utf8') + freePorts);
      return path;
    };
    const noKey = startable('no-key', { database_url: other, key_file: join(dir, 'none.key'), node_id: 'n' });
    const refused = await cli(noKey, 'start');
    expect(refused.code, refused.stderr).to.equal(2);
    expect(refused.stderr).to.match(
      /^postilion: the cluster key \S+none\.key does not exist: run `postilion cluster init` on the first node, then copy the file to every node\n$/,
    );
    const away = startable('away', { database_url: 'postgres://nobody@127.0.0.1:1/none', key_file: keyFile(), node_id: 'n' });
    const unreachable = await cli(away, 'start');
    expect(unreachable.code, unreachable.stderr).to.equal(2);
    expect(unreachable.stderr).to.match(/^postilion: the cluster database cannot be used: .+\n$/);
    expect(unreachable.stderr.split('\n')).to.have.length(2);
  });

  it('init brings the schema up and makes the key, once; a node with another key file is refused', async () => {
    const config = configFile('first', { database_url: url, key_file: keyFile() });
    const before = await cli(config, 'cluster', 'status');
    expect(before.code).to.equal(2);
    expect(before.stderr).to.match(/no schema yet: run `postilion cluster init`/);

    const first = await cli(config, 'cluster', 'init');
    expect(first.code, first.stderr).to.equal(0);
    // Every step, named (the schema's steps as this release has them).
    expect(first.stdout).to.match(new RegExp(`^cluster database: schema brought to ${CLUSTER_SCHEMA_VERSION} \\(1: .+; 2: nodes: when a node stopped[;)]`));
    for (const step of MIGRATIONS) expect(first.stdout).to.include(`${step.version}: ${step.name}`);
    expect(first.stdout).to.include(`cluster key: made ${keyFile()}: copy this file to every node`);
    expect(statSync(keyFile()).mode & 0o777).to.equal(0o600);

    const again = await cli(config, 'cluster', 'init', '--json');
    expect(again.code, again.stderr).to.equal(0);
    expect(JSON.parse(again.stdout)).to.deep.equal({ schema: CLUSTER_SCHEMA_VERSION, applied: [], key_file: keyFile(), key_made: false });

    const other = join(dir, 'other.key');
    const refused = await cli(configFile('other', { database_url: url, key_file: other }), 'cluster', 'init');
    expect(refused.code).to.equal(2);
    expect(refused.stderr).to.equal(`postilion: this cluster already has a key: copy ${other} from one of its nodes instead of making a new one\n`);
    expect(existsSync(other)).to.equal(false);
  });

  it('status shows the nodes, their heartbeats and queues, the leader and the last publication', async () => {
    const config = configFile('status', { database_url: url, key_file: keyFile(), node_id: 'observer' });
    const empty = await cli(config, 'cluster', 'status');
    expect(empty.code, empty.stderr).to.equal(0);
    expect(empty.stdout).to.equal(
      `schema: ${CLUSTER_SCHEMA_VERSION}\nleader: none: no node holds the lease\nlive nodes: 0 of 0\n\nno node has started on this database yet\n`,
    );

    node = await startServer({ config: { cluster: { database_url: url, node_id: 'node-1', key_file: keyFile() } } });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query("INSERT INTO publication (node_id, cursor) VALUES ('node-1', 'cursor-1')");
    } finally {
      await admin.end();
    }
    // The leader is named once its heartbeat has told which connection holds the lease.
    let status: ClusterStatus | null = null;
    for (let i = 0; i < 20 && status?.leader !== 'node-1'; i++) {
      const res = await cli(config, 'cluster', 'status', '--json');
      expect(res.code, res.stderr).to.equal(0);
      status = JSON.parse(res.stdout) as ClusterStatus;
    }
    expect(status!.leader).to.equal('node-1');
    expect(status!.live_nodes).to.equal(1);
    const [one] = status!.nodes;
    expect(one).to.include({ id: 'node-1', state: 'live', leader: true, stopped_at: null });
    expect(one!.heartbeat_age_seconds).to.be.within(0, 10);
    expect(one!.info).to.include({ pid: process.pid, api_url: node.url });
    expect(one!.info.queue).to.deep.equal({ queued: 0, ready: 0, in_flight: 0 });
    expect(one!.publication).to.include({ cursor: 'cursor-1' });

    const text = await cli(config, 'cluster', 'status');
    expect(text.code, text.stderr).to.equal(0);
    expect(text.stdout).to.match(
      new RegExp(
        `^schema: ${CLUSTER_SCHEMA_VERSION}\nleader: node-1\nlive nodes: 1 of 1\n\nNODE +STATE +HEARTBEAT +LEADER +QUEUED +READY +IN FLIGHT +PUBLISHED +VERSION +HOST +PID +API\n`,
      ),
    );
    expect(text.stdout).to.match(new RegExp(`\\nnode-1 +live +\\d+s ago +yes +0 +0 +0 +\\d+s ago +\\S+ +\\S+ +${process.pid} +${node.url}\\n$`));

    await node.stop();
    node = null;
    const stopped = JSON.parse((await cli(config, 'cluster', 'status', '--json')).stdout) as ClusterStatus;
    expect(stopped.leader).to.equal(null);
    expect(stopped.nodes.map((n) => [n.id, n.state])).to.deep.equal([['node-1', 'stopped']]);
  });

  it('doctor checks the database, the schema and the key without changing anything', async () => {
    const good = loadConfig({ path: configFile('doctor', { database_url: url, key_file: keyFile(), node_id: 'doc' }) }).config;
    const checks = await checkCluster(good);
    expect(checks.map((c) => [c.check, c.status])).to.deep.equal([
      ['cluster database', 'OK'],
      ['cluster schema', 'OK'],
      ['cluster key', 'OK'],
    ]);
    expect(checks[2]!.reason).to.equal(`${keyFile()} is the cluster's key`);

    const wrongKey = join(dir, 'wrong.key');
    writeFileSync(wrongKey, `${'ab'.repeat(32)}\n`);
    const wrong = await checkCluster(loadConfig({ path: configFile('doctor-wrong', { database_url: url, key_file: wrongKey }) }).config);
    expect(wrong.find((c) => c.check === 'cluster key')).to.deep.include({ status: 'FAIL' });
    expect(wrong.find((c) => c.check === 'cluster key')!.reason).to.match(/is not this cluster's key/);

    const missing = await checkCluster(loadConfig({ path: configFile('doctor-missing', { database_url: url, key_file: join(dir, 'none.key') }) }).config);
    expect(missing.find((c) => c.check === 'cluster key')).to.deep.include({ status: 'FAIL' });
    expect(existsSync(join(dir, 'none.key'))).to.equal(false);

    const emptyDb = await postgres.createDatabase();
    const fresh = await checkCluster(loadConfig({ path: configFile('doctor-fresh', { database_url: emptyDb, key_file: keyFile() }) }).config);
    expect(fresh.map((c) => [c.check, c.status])).to.deep.equal([
      ['cluster database', 'OK'],
      ['cluster schema', 'WARN'],
      ['cluster key', 'OK'],
    ]);
    const client = new pg.Client({ connectionString: emptyDb });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'");
      expect(rows[0]!.n, 'tables made by the doctor').to.equal(0);
    } finally {
      await client.end();
    }

    const closed = `postgres://postgres@127.0.0.1:1/none`;
    const down = await checkCluster(loadConfig({ path: configFile('doctor-down', { database_url: closed, key_file: keyFile() }) }).config);
    expect(down).to.have.length(1);
    expect(down[0]).to.deep.include({ check: 'cluster database', status: 'FAIL' });
    expect(down[0]!.reason).to.match(/^cannot be reached: .*ECONNREFUSED.*: node \S+ does not start$/);

    expect(await checkCluster(loadConfig({ path: configFile('doctor-single', null) }).config)).to.deep.equal([]);
  });
});
