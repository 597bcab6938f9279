import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import pg from 'pg';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

async function query<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

function userTables(url: string): Promise<{ table_name: string }[]> {
  return query(url, `SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

describe('PostgreSQL test harness (real server on loopback)', () => {
  let server: PostgresServer | undefined;
  after(() => server?.stop());

  it('starts a PostgreSQL 15 or newer on 127.0.0.1 that answers on the URL it gives', async () => {
    server = await startPostgres();
    expect(server.url).to.match(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postilion_test_[0-9a-f]+$/);
    const [{ version }] = (await query<{ version: string }>(server.url, 'SELECT version()')) as [{ version: string }];
    const major = Number(/^PostgreSQL (\d+)/.exec(version)?.[1]);
    expect(major, version).to.be.at.least(15);
    const [{ addr }] = (await query<{ addr: string }>(server.url, 'SELECT host(inet_server_addr()) AS addr')) as [{ addr: string }];
    expect(addr).to.equal('127.0.0.1');
  });

  it('runs the server as an unprivileged user, never as root', () => {
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${server!.pid}/status`, 'utf8'))?.[1];
    expect(Number(uid)).to.not.equal(0);
  });

  it('gives a distinct empty database on each createDatabase()', async () => {
    const first = await server!.createDatabase();
    const second = await server!.createDatabase();
    expect(first).to.not.equal(second);
    expect(first).to.not.equal(server!.url);
    expect(await userTables(first)).to.deep.equal([]);
    expect(await userTables(second)).to.deep.equal([]);
    await query(first, 'CREATE TABLE marker (id int)');
    expect(await userTables(first)).to.deep.equal([{ table_name: 'marker' }]);
    expect(await userTables(second)).to.deep.equal([]);
    const named = await server!.createDatabase('postilion_named');
    expect(named).to.match(/\/postilion_named$/);
    expect(await userTables(named)).to.deep.equal([]);
  });

  it('stops: the server process is gone, its port refuses connections and its temp dir is removed', async () => {
    const { pid, port, dir } = server!;
    expect(alive(pid)).to.equal(true);
    expect(existsSync(dir)).to.equal(true);
    await server!.stop();
    expect(alive(pid)).to.equal(false);
    expect(await refused(port)).to.equal(true);
    expect(existsSync(dir)).to.equal(false);
    await server!.stop(); // a second stop is harmless
  });
});
