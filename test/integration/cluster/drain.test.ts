import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { main } from '../../../src/cli/main.ts';
import { openClusterDb } from '../../../src/cluster/database.ts';
import { validateConfig } from '../../../src/config/load.ts';
import type { ConfigInput } from '../../../src/config/schema.ts';
import type { MessageRecord } from '../../../src/store/records.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

const HOUR = 3_600_000;
const uuidOf = (messageId: string) => messageId.slice(1, messageId.indexOf('@'));

/** `postilion queue drain --to <node>`: a node's queued mail, with its bodies, handed to another node of the cluster. */
describe('cluster: postilion queue drain', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let dir: string;
  let url: string;
  let source: MessageBed | null = null;
  let target: TestServer | null = null;
  let db: pg.Pool | null = null;
  let configPath: string;

  const cluster = (nodeId: string) => ({ database_url: url, node_id: nodeId, key_file: join(dir, 'cluster.key') });

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-cluster-drain-'));
  });
  after(async () => {
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function startNodes(config: ConfigInput = {}): Promise<void> {
    url = await postgres.createDatabase();
    const init = await openClusterDb(validateConfig({ cluster: cluster('init'), keys: { dir: join(dir, 'keys') } }, 'test'), { createKey: true });
    await init.close();
    db = new pg.Pool({ connectionString: url, max: 2 });
    // Its idle connections end when the server stops at the end.
    db.on('error', () => undefined);
    source = await startMessageBed({ ...config, cluster: cluster('node-1') });
    target = await startServer({ config: { cluster: cluster('node-2') } });
    configPath = join(source.server.dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(source.server.dir, 'data')}\nkeys:\n  dir: ${join(source.server.dir, 'keys')}\nlog:\n  level: silent\n`);
  }
  afterEach(async () => {
    await source?.stop();
    await target?.stop();
    await db?.end();
    db = null;
    source = null;
    target = null;
  });

  async function drain(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, 'queue', 'drain', ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  async function accepted(res: { status: number; body: { data: Array<{ id: string }> } }): Promise<string[]> {
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.data.map((e) => uuidOf(e.id));
  }

  it('moves every queued message, body and schedule to the other node: none left here, each there once', async () => {
    await startNodes();
    const big = Buffer.alloc(200_000, 'attachment bytes ').toString('base64');
    const ids = [
      ...(await accepted(await source!.send({ recipients: [{ email: 'a@example.org' }, { email: 'b@example.org' }] }))),
      ...(await accepted(await source!.send({ attachments: [{ data: big, base64: true, content_type: 'application/octet-stream', file_name: 'big.bin' }] }))),
      // One body for the three: shared, handed over whole with each.
      ...(await accepted(await source!.converse({ to: [{ email: 'c@example.org' }, { email: 'd@example.org' }], cc: [{ email: 'e@example.org' }] }))),
      ...(await accepted(await source!.send({ schedule: { first_attempt: new Date(source!.clock.now() + HOUR).toISOString() } }))),
      ...(await accepted(await source!.send({ html_content: '<p><a href="https://shop.example.net/x">x</a></p>', tracking: { open: true, click: true } }))),
    ];
    expect(ids).to.have.length(8);
    const from = source!.server.daemon.core;
    const to = target!.daemon.core;
    const before = new Map<string, { record: MessageRecord; content: Buffer | null; links: string[] | undefined }>();
    for (const id of ids) {
      const record = (await from.messagesRepo.get(id))!;
      expect(await from.messagesRepo.isScheduled(record), id).to.equal(true);
      before.set(id, { record, content: await from.messages.content(record), links: await from.messagesRepo.links(id) });
    }
    expect([...before.values()].filter((m) => m.links !== undefined)).to.have.length(1);
    expect((await from.store.families.bodies.keys().all()).length).to.be.above(ids.length);

    const res = await drain('--to', 'node-2');
    expect(res.err).to.equal('');
    expect(res.code).to.equal(0);
    expect(res.out).to.match(
      /^handing the queued mail of node-1 to node-2\n(\d+ handed over \(\d+ in all\)\n)+drained: 8 messages handed to node-2; none left on node-1\n$/,
    );

    // None left on the draining node: records, schedule, bodies and their references gone.
    for (const id of ids) expect(await from.messagesRepo.get(id), id).to.equal(undefined);
    const left = async (family: 'bodies' | 'bodyRefs' | 'messages' | 'links') => (await from.store.families[family].keys().all()).length;
    expect([await left('messages'), await left('bodies'), await left('bodyRefs'), await left('links')]).to.deep.equal([0, 0, 0, 0]);
    for await (const entry of from.messagesRepo.scheduled()) expect.fail(`still on the due-time index: ${entry.id}`);

    // Each on the other node once, the same message: state, schedule, body, links.
    for (const [id, was] of before) {
      const record = (await to.messagesRepo.get(id))!;
      expect(record, id).to.deep.equal({ ...was.record, heldAt: null });
      expect(await to.messagesRepo.isScheduled(record), id).to.equal(true);
      expect(await to.messages.content(record), id).to.deep.equal(was.content);
      expect(await to.messagesRepo.links(id), id).to.deep.equal(was.links);
    }
    const entries: string[] = [];
    for await (const { id } of to.messagesRepo.scheduled()) entries.push(id);
    expect(entries.sort()).to.deep.equal([...ids].sort());
    expect((await to.store.families.bodyRefs.keys().all()).length).to.equal(ids.length);
    expect((await db!.query('SELECT 1 FROM command_bodies')).rowCount).to.equal(0);
    const { rows } = await db!.query<{ state: string; ok: boolean }>("SELECT state, (result->>'ok')::boolean AS ok FROM commands WHERE kind = 'handover'");
    expect(rows.length).to.be.above(0);
    expect(rows.every((r) => r.state === 'done' && r.ok)).to.equal(true);

    // Nothing more to move; and a drain needs a live node that is not this one.
    expect((await drain('--to', 'node-2')).out).to.match(/drained: 0 messages handed to node-2; none left on node-1\n$/);
    const self = await drain('--to', 'node-1');
    expect(self).to.deep.include({ code: 2, out: '', err: 'postilion: node-1 is this node: drain to another node of the cluster\n' });
    const unknown = await drain('--to', 'node-9');
    expect(unknown).to.deep.include({ code: 2, err: 'postilion: no node node-9 in this cluster (live nodes: node-2)\n' });
    await target!.stop();
    target = null;
    const down = await drain('--to', 'node-2');
    expect(down).to.deep.include({ code: 2, err: 'postilion: node node-2 is not reachable (stopped, or no heartbeat lately): drain to a live node\n' });
  });

  it('is refused by a node on its own', async () => {
    const alone = await startServer();
    try {
      configPath = join(alone.dir, 'postilion.yaml');
      writeFileSync(configPath, `data:\n  dir: ${join(alone.dir, 'data')}\nkeys:\n  dir: ${join(alone.dir, 'keys')}\nlog:\n  level: silent\n`);
      expect(await drain('--to', 'node-2')).to.deep.include({
        code: 2,
        out: '',
        err: 'postilion: queue drain hands queued mail to another node of a cluster: this node runs on its own (no cluster.database_url)\n',
      });
    } finally {
      await alone.stop();
    }
  });

  it('leaves a message the delivery engine holds to its attempt (the in-flight window) and hands over the rest', async () => {
    // An MX that takes the connection and never greets: the attempt stays in flight.
    const stalled: Socket[] = [];
    const stall: Server = createServer((socket) => void stalled.push(socket));
    await new Promise<void>((resolve) => stall.listen(0, '127.0.0.1', resolve));
    try {
      const port = (stall.address() as { port: number }).port;
      await startNodes({ delivery: { enabled: true, transport: { 'stall.example': { host: '127.0.0.1', port } } } });
      const [inFlight] = await accepted(await source!.send({ recipients: [{ email: 'x@stall.example' }] }));
      const deadline = Date.now() + 10_000;
      while (!source!.server.daemon.parts.jobs.engine.holds('message', inFlight!)) {
        if (Date.now() > deadline) throw new Error('the message never went into delivery');
        await new Promise((r) => setTimeout(r, 20));
      }
      const queued = await accepted(await source!.send({ schedule: { first_attempt: new Date(source!.clock.now() + HOUR).toISOString() } }));

      const res = await drain('--to', 'node-2', '--wait', '1', '--json');
      expect(res.code, res.err).to.equal(0);
      const lines = res.out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.at(-1)).to.deep.equal({ result: { from: 'node-1', to: 'node-2', moved: 1, in_delivery: 1 } });
      expect(await source!.server.daemon.core.messagesRepo.get(inFlight!)).to.not.equal(undefined);
      expect(await target!.daemon.core.messagesRepo.get(inFlight!)).to.equal(undefined);
      expect(await source!.server.daemon.core.messagesRepo.get(queued[0]!)).to.equal(undefined);
      expect((await target!.daemon.core.messagesRepo.get(queued[0]!))!.status).to.equal('Received');
    } finally {
      for (const socket of stalled) socket.destroy();
      await source?.stop();
      source = null;
      await new Promise<void>((resolve) => stall.close(() => resolve()));
    }
  });
});
