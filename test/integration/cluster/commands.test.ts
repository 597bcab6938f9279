import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openClusterDb } from '../../../src/cluster/database.ts';
import { validateConfig } from '../../../src/config/load.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

const HOUR = 3_600_000;
const uuidOf = (messageId: string) => messageId.slice(1, messageId.indexOf('@'));

/**
 * A cancel sent to a node that does not hold the message reaches the node that does, through the
 * cluster database, and is answered after that node applied it; a holder that is down gets 409.
 */
describe('cluster: a cancel of a message another node holds', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let dir: string;
  let url: string;
  let owner: MessageBed | null = null;
  let other: TestServer | null = null;
  let restarted: TestServer | null = null;
  let db: pg.Pool;

  const cluster = (nodeId: string) => ({ database_url: url, node_id: nodeId, key_file: join(dir, 'cluster.key') });

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-cluster-commands-'));
    url = await postgres.createDatabase();
    const init = await openClusterDb(validateConfig({ cluster: cluster('init'), keys: { dir: join(dir, 'keys') } }, 'test'), { createKey: true });
    await init.close();
    db = new pg.Pool({ connectionString: url, max: 2 });
    // Its idle connections end when the server stops at the end.
    db.on('error', () => undefined);
    owner = await startMessageBed({ cluster: cluster('node-1') }, 'example.com', { dir: join(dir, 'node-1') });
    other = await startServer({ config: { cluster: cluster('node-2') } });
  });
  after(async () => {
    await restarted?.stop();
    await owner?.stop();
    await other?.stop();
    await db?.end();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A message scheduled for an hour from now on the owner: its Message-ID. */
  async function scheduled(): Promise<string> {
    const res = await owner!.send({ schedule: { first_attempt: new Date(owner!.clock.now() + HOUR).toISOString() } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.data[0].id as string;
  }
  const viaOther = (id: string, key = owner!.server.adminKey) =>
    call({ url: other!.url, adminKey: key }, 'DELETE', `${owner!.messages}/${encodeURIComponent(id)}/cancel`);

  it("a bounce that reached another node's MX is applied by the node that holds the message: Bounced, with a suppression", async () => {
    const id = await scheduled();
    const uuid = uuidOf(id);
    // Node 2's inbound MX read a hard bounce for it: the message is found in the published copy, the bounce handed to its holder.
    const deadline = Date.now() + 5000;
    let published = await other!.daemon.core.trackedMessages.get(uuid);
    while (!published && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      published = await other!.daemon.core.trackedMessages.get(uuid);
    }
    expect(published?.node).to.equal('node-1');
    await other!.daemon.parts.commands.bounceElsewhere!('node-1', { id: uuid, classification: 'InvalidRecipient', text: '5.1.1 no such user' });
    const bounced = await owner!.until(uuid, 'Bounced');
    expect(bounced.bounce_classification).to.equal('InvalidRecipient');
    expect(bounced.delivery_attempts.at(-1).log).to.equal('bounce received: 5.1.1 no such user');
    const suppressed = await owner!.api('GET', `/v2/accounts/${owner!.server.accountId}/suppressions?email=${encodeURIComponent(bounced.recipient)}`);
    expect(suppressed.body.data).to.have.length(1);
  });

  it('is applied by the owner and answered with its answer: cancelled, then already cancelled; an unknown id is 404; scopes are checked', async () => {
    const id = await scheduled();
    const repo = owner!.server.daemon.core.messagesRepo;
    const stored = (await repo.get(uuidOf(id)))!;
    expect(await repo.isScheduled(stored)).to.equal(true);
    // Not on the node asked: the owner applies it.
    expect(await other!.daemon.core.messagesRepo.get(uuidOf(id))).to.equal(undefined);

    const res = await viaOther(id);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.message).to.equal(`message ${id} cancelled`);
    const cancelled = (await repo.get(uuidOf(id)))!;
    expect(cancelled.status).to.equal('Cancelled');
    expect(await repo.isScheduled(stored)).to.equal(false);
    expect((await owner!.read(uuidOf(id))).status).to.equal('Cancelled');

    const again = await viaOther(uuidOf(id));
    expect(again.status).to.equal(409);
    expect(again.body.message).to.contain('already cancelled');

    expect((await viaOther('01a1fdfb-3448-7586-aa7f-39a2956fbdb2')).status).to.equal(404);

    const second = await scheduled();
    const readOnly = await owner!.key(['messages:read:all']);
    const refused = await viaOther(second, readOnly);
    expect(refused.status).to.equal(403);
    expect((await repo.get(uuidOf(second)))!.status).to.not.equal('Cancelled');
    const scoped = await owner!.key(['messages:cancel:{example.com}']);
    expect((await viaOther(second, scoped)).status).to.equal(200);

    // One command each, answered (the read-only key was refused by the API's scope gate, before any lookup).
    const { rows } = await db.query<{ state: string; n: number }>("SELECT state, count(*)::int AS n FROM commands WHERE kind = 'cancel' GROUP BY state");
    expect(rows).to.deep.equal([{ state: 'done', n: 4 }]);
  });

  it('answers 409 naming the owner while it is down, and a late owner does not apply a cancel its asker gave up on', async () => {
    const id = await scheduled();
    const key = owner!.server.adminKey;
    const messages = owner!.messages;
    await owner!.stop();
    owner = null;

    // Stopped cleanly: known down at once, nothing is sent to it.
    let started = Date.now();
    const down = await call({ url: other!.url, adminKey: key }, 'DELETE', `${messages}/${encodeURIComponent(id)}/cancel`);
    expect(down.status, JSON.stringify(down.body)).to.equal(409);
    expect(down.body.message).to.equal(
      `message ${id} is not on this node and may be held by node node-1, which is not reachable: it was not cancelled; try again once that node is back`,
    );
    expect(Date.now() - started).to.be.below(2000);
    expect((await db.query("SELECT 1 FROM commands WHERE node_id = 'node-1' AND state = 'pending'")).rowCount).to.equal(0);

    // Gone without a word (its heartbeat still fresh): asked, no answer, the cancel is withdrawn.
    await db.query("UPDATE nodes SET heartbeat_at = now(), stopped_at = NULL WHERE id = 'node-1'");
    started = Date.now();
    const silent = await call({ url: other!.url, adminKey: key }, 'DELETE', `${messages}/${uuidOf(id)}/cancel`);
    expect(silent.status, JSON.stringify(silent.body)).to.equal(409);
    expect(silent.body.message).to.contain('may be held by node node-1, which is not reachable: it was not cancelled');
    expect(Date.now() - started).to.be.within(4500, 9000);
    const { rows } = await db.query<{ id: string; state: string }>(
      "SELECT id::text, state FROM commands WHERE node_id = 'node-1' AND kind = 'cancel' ORDER BY id DESC LIMIT 1",
    );
    expect(rows[0]!.state).to.equal('expired');

    // The owner comes back and reads its commands: the withdrawn one is not applied.
    restarted = await startServer({ dir: join(dir, 'node-1'), config: { cluster: cluster('node-1') } });
    await new Promise((r) => setTimeout(r, 1000));
    const record = (await restarted.daemon.core.messagesRepo.get(uuidOf(id)))!;
    expect(record.status).to.equal('Received');
    expect(await restarted.daemon.core.messagesRepo.isScheduled(record)).to.equal(true);
    expect((await db.query<{ state: string }>('SELECT state FROM commands WHERE id = $1', [rows[0]!.id])).rows[0]!.state).to.equal('expired');

    // Back, it answers again.
    const res = await call({ url: other!.url, adminKey: key }, 'DELETE', `${messages}/${uuidOf(id)}/cancel`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect((await restarted.daemon.core.messagesRepo.get(uuidOf(id)))!.status).to.equal('Cancelled');
  });
});
