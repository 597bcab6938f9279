import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openClusterDb } from '../../../src/cluster/database.ts';
import { publish } from '../../../src/cluster/publication.ts';
import { purgePublished } from '../../../src/cluster/published-retention.ts';
import { PublishedView } from '../../../src/cluster/published-view.ts';
import { validateConfig } from '../../../src/config/load.ts';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import type { EventRecord, MessageRecord } from '../../../src/store/records.ts';
import type { WriteOp } from '../../../src/store/types.ts';
import { call, startServer, type CallResult, type TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';
import { trackingGet, trackingUrls } from '../../helpers/tracking.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * Cluster-wide reads: node A and node B on one PostgreSQL. Each publishes its messages, events
 * and statistics counters from its outbox; the read API of either answers from what both published.
 */
describe('cluster: reads on any node (publication)', function () {
  this.timeout(90_000);
  let postgres: PostgresServer;
  let dir: string;
  let url: string;
  let a: MessageBed;
  let b: TestServer;
  let receiver: WebhookReceiver;
  let client: pg.Client;

  const clusterConfig = (nodeId: string) => ({ database_url: url, node_id: nodeId, key_file: join(dir, 'cluster.key') });
  const viaB = () => ({ url: b.url, adminKey: a.server.adminKey });
  const messagesPath = () => `/v2/accounts/${a.server.accountId}/messages`;
  const statsPath = () => `/v2/accounts/${a.server.accountId}/statistics/transactional/deliverability?group_by=month`;

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-publication-'));
    receiver = await WebhookReceiver.start();
    url = await postgres.createDatabase();
    const db = await openClusterDb(validateConfig({ cluster: clusterConfig('init'), keys: { dir: join(dir, 'keys') } }, 'test'), { createKey: true });
    await db.close();
    const shared = {
      webhooks: { allow_networks: ['127.0.0.0/8'] },
      tracking: {},
      api: { rate_limits: { general: { per_second: 1000, burst: 10_000 }, statistics: { per_second: 1000, burst: 10_000 } } },
    };
    a = await startMessageBed({ ...shared, cluster: clusterConfig('node-a') });
    b = await startServer({
      clock: a.clock,
      config: { ...shared, cluster: clusterConfig('node-b'), dns: { servers: [a.dns.address], timeout_ms: 500, tries: 1 } },
    });
    client = new pg.Client({ connectionString: url });
    await client.connect();
  });

  after(async () => {
    await client?.end();

    await b?.stop();
    await a?.stop();
    await receiver?.stop();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Calls `read` until `done` holds of its answer, for 2 s at most (the publication's promise). */
  async function within2s(read: () => Promise<CallResult>, done: (res: CallResult) => boolean): Promise<CallResult> {
    const deadline = Date.now() + 2000;
    for (;;) {
      const res = await read();
      if (done(res)) return res;
      if (Date.now() > deadline) throw new Error(`not within 2 s: ${res.status} ${JSON.stringify(res.body).slice(0, 500)}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async function sendOnA(fields: Record<string, unknown> = {}): Promise<string> {
    const res = await a.send(fields);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.data[0].id as string;
  }

  const uuidOf = (ref: string) => ref.replace(/^<|@.*$/g, '');

  it('a message sent on node A is listed and got on node B within 2 s, its content left out and its node named', async () => {
    const ref = await sendOnA({ recipients: [{ email: 'listed@example.org' }], subject: 'Published' });
    const got = await within2s(
      () => call(viaB(), 'GET', `${messagesPath()}/${encodeURIComponent(ref)}`),
      (res) => res.status === 200,
    );
    expect(got.body).to.include({ message_id: ref, subject: 'Published', recipient: 'listed@example.org', status: 'Received', account_id: a.server.accountId });
    expect(got.body).to.not.have.property('content');
    expect(got.body).to.not.have.property('node');
    expect(got.headers.get('postilion-content-node')).to.equal('node-a');

    const listed = await within2s(
      () => call(viaB(), 'GET', `${messagesPath()}?recipient=listed%40example.org`),
      (res) => res.status === 200 && res.body.data.length === 1,
    );
    expect(listed.body.data[0].id).to.equal(uuidOf(ref));

    // On its own node the content is there, and the summary is the same.
    const own = await a.read(ref);
    expect(own.content).to.include('Subject: Published');
    const { content: _content, content_parsed: _parsed, ...summary } = own;
    expect(summary).to.deep.equal(got.body);

    // A message sent on B is listed on A at once after too: B's node is named there.
    const onB = await call(viaB(), 'POST', messagesPath(), {
      body: { from: { email: 'app@example.com' }, subject: 'From B', text_content: 'b', recipients: [{ email: 'from-b@example.org' }] },
    });
    expect(onB.status, JSON.stringify(onB.body)).to.equal(202);
    const seenOnA = await within2s(
      () => a.api('GET', `${messagesPath()}/${encodeURIComponent(onB.body.data[0].id)}`),
      (res) => res.status === 200,
    );
    expect(seenOnA.headers.get('postilion-content-node')).to.equal('node-b');
    // Each node lists what it accepted itself as soon as the API answered (it waits for its own publication).
    expect((await call(viaB(), 'GET', `${messagesPath()}?recipient=from-b%40example.org`)).body.data).to.have.length(1);
  });

  it('answers the statistics and the usage the same on both nodes', async () => {
    const total = (res: CallResult) => (res.body.data as Array<{ reception_count: number }>).reduce((sum, x) => sum + x.reception_count, 0);
    const before = await a.api('GET', statsPath());
    expect(before.status, JSON.stringify(before.body)).to.equal(200);
    for (let i = 0; i < 3; i++) await sendOnA({ recipients: [{ email: `stats-a${i}@example.org` }] });
    const onB = await call(viaB(), 'POST', messagesPath(), {
      body: { from: { email: 'app@example.com' }, subject: 'S', text_content: 's', recipients: [{ email: 'stats-b@example.org' }] },
    });
    expect(onB.status).to.equal(202);

    const fromA = await within2s(
      () => a.api('GET', statsPath()),
      (res) => total(res) === total(before) + 4,
    );
    await within2s(
      () => call(viaB(), 'GET', statsPath()),
      (res) => JSON.stringify(res.body) === JSON.stringify(fromA.body),
    );
    // Every reception published counts once: as many as the messages listed.
    const listed = await a.api('GET', `${messagesPath()}?limit=100`);
    expect(total(fromA)).to.equal(listed.body.data.length);

    const usagePath = `/v2/accounts/${a.server.accountId}/sub-accounts/usage`;
    const usageA = await a.api('GET', usagePath);
    const usageB = await call(viaB(), 'GET', usagePath);
    expect(usageA.status, JSON.stringify(usageA.body)).to.equal(200);
    expect(usageB.body).to.deep.equal(usageA.body);
    expect(JSON.stringify(usageA.body)).to.include(`"reception_count":${total(fromA)}`);
  });

  it('two nodes counting into the same rows at once lose no count', async () => {
    const total = (res: CallResult) => (res.body.data as Array<{ reception_count: number }>).reduce((sum, x) => sum + x.reception_count, 0);
    const before = total(await a.api('GET', statsPath()));
    const bulk = (node: { url: string; adminKey: string }, name: string) =>
      call(node, 'POST', messagesPath(), {
        body: {
          from: { email: 'app@example.com' },
          subject: 'Both',
          text_content: 'both',
          tags: ['both'],
          recipients: Array.from({ length: 100 }, (_, j) => ({ email: `${name}-${j}@example.org` })),
        },
      });
    const sent = await Promise.all([0, 1, 2].flatMap((i) => [bulk(a.server, `both-a${i}`), bulk(viaB(), `both-b${i}`)]));
    expect(sent.map((res) => res.status)).to.deep.equal([202, 202, 202, 202, 202, 202]);
    await b.daemon.core.publisher!.caughtUp(5000);
    const fromA = await a.api('GET', statsPath());
    expect(total(fromA) - before).to.equal(600);
    const tagged = await a.api('GET', `${statsPath()}&tags=both`);
    expect(total(tagged)).to.equal(600);
    expect((await call(viaB(), 'GET', statsPath())).body).to.deep.equal(fromA.body);
  });

  it('publishing a batch again (the cursor a node keeps in memory lost in a crash) adds nothing', async () => {
    await sendOnA({ recipients: [{ email: 'replay@example.org' }] });
    await a.server.daemon.core.publisher!.caughtUp();
    const before = await publishedState();
    const core = a.server.daemon.core;
    // What the node's outbox holds, published again from the start: as after a crash right after a commit.
    const events = await core.eventsRepo.after(null, 10_000);
    const ids = [...new Set(events.map((e) => e.data.id as string))];
    const records = new Map<string, MessageRecord>();
    for (const [i, m] of (await core.messagesRepo.getMany(ids)).entries()) if (m) records.set(ids[i]!, m);
    const again = await publish(
      core.cluster!.pool,
      { events, records, links: new Map() },
      { nodeId: 'node-a', published: core.cluster!.published, counting: true },
    );
    expect(again.events, 'no event is new').to.equal(0);
    expect(await publishedState()).to.deep.equal(before);
    // A publisher started afresh reads its cursor from the database: nothing to publish either.
    const published = core.publisher!.stats.events;
    await core.publisher!.stop();
    await core.publisher!.start();
    await core.publisher!.caughtUp();
    expect(await publishedState()).to.deep.equal(before);
    expect(core.publisher!.stats.events).to.equal(published);
  });

  it('publishes in batches: a transaction per hundreds of messages', async () => {
    const publisher = a.server.daemon.core.publisher!;
    await publisher.caughtUp();
    const before = { ...publisher.stats };
    let messages = 0;
    for (let i = 0; i < 10; i++) {
      const res = await a.send({ recipients: Array.from({ length: 100 }, (_, j) => ({ email: `bulk${i}-${j}@example.org` })) });
      expect(res.status).to.equal(202);
      messages += res.body.data.length;
    }
    // Waited for without reading the database (each read of the published records is a transaction too).
    await publisher.caughtUp(5000);
    // Each batch is one transaction, and the publication reads nothing outside them.
    const transactions = publisher.stats.batches - before.batches;
    expect(messages).to.equal(1000);
    expect(publisher.stats.events - before.events, 'every reception published').to.equal(1000);
    expect(transactions / messages, `${transactions} transactions for ${messages} messages`).to.be.at.most(0.1);
    expect((await call(viaB(), 'GET', `${messagesPath()}?recipient=bulk9-99%40example.org`)).body.data, 'and node B lists them').to.have.length(1);
  });

  it('an open and a click on node B of a message of node A are recorded once: events, counts, statistics, one webhook each', async () => {
    const hook = await a.api('POST', `/v2/accounts/${a.server.accountId}/webhooks`, {
      body: { name: 'hits', url: receiver.url('/hits'), scope: 'global', on_opened: true, on_clicked: true },
    });
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
    receiver.secrets.set('/hits', hook.body.secret);
    const statsBefore = await a.api('GET', statsPath());
    const ref = await sendOnA({
      recipients: [{ email: 'reader@example.org' }],
      html_content: '<html><body><a href="https://shop.example.net/x">x</a></body></html>',
      tracking: { open: true, click: true },
    });
    const html = (await a.read(ref)).content_parsed.parts.find((p: { content_type: string }) => p.content_type === 'text/html').content as string;
    const { pixel, links } = trackingUrls(html);
    const id = uuidOf(ref);
    await within2s(
      () => call(viaB(), 'GET', `${messagesPath()}/${id}`),
      (res) => res.status === 200,
    );

    const trackingB = b.daemon.parts.tracking.url!;
    expect((await trackingGet(trackingB, pixel!)).status).to.equal(200);
    const click = await trackingGet(trackingB, links[0]!);
    expect(click.status).to.equal(302);
    expect(click.headers.location).to.equal('https://shop.example.net/x');
    await b.daemon.parts.tracking.drained();

    const shown = await within2s(
      () => a.api('GET', `${messagesPath()}/${id}`),
      (res) => res.body.open_count === 1 && res.body.click_count === 1,
    );
    expect((await call(viaB(), 'GET', `${messagesPath()}/${id}`)).body).to.include({ open_count: 1, click_count: 1 });
    expect(shown.body).to.include({ open_count: 1, click_count: 1 });

    // The events: in B's outbox, published once; none in A's.
    const published = new EventsRepo(new PublishedView(a.server.daemon.core.cluster!.published));
    const ofMessage = (await published.recent(a.server.accountId, 1000)).filter((e) => e.data.id === id).map((e) => e.type);
    expect(ofMessage.sort()).to.deep.equal(['message.clicked', 'message.opened', 'message.reception']);
    expect((await a.server.daemon.core.eventsRepo.recent(a.server.accountId, 1000)).filter((e) => e.data.id === id).map((e) => e.type)).to.deep.equal([
      'message.reception',
    ]);

    // Counted once, the same on both nodes.
    const count = (res: CallResult, field: string) => (res.body.data as Array<Record<string, number>>).reduce((sum, x) => sum + x[field]!, 0);
    const statsA = await a.api('GET', statsPath());
    expect(count(statsA, 'opened_count') - count(statsBefore, 'opened_count')).to.equal(1);
    expect(count(statsA, 'clicked_count') - count(statsBefore, 'clicked_count')).to.equal(1);
    expect((await call(viaB(), 'GET', statsPath())).body).to.deep.equal(statsA.body);

    // One webhook delivery each, sent by B's fan-out.
    await receiver.until((r) => r.length >= 2);
    await new Promise((r) => setTimeout(r, 500));
    expect(
      receiver
        .verified('/hits')
        .map((d) => d.payload!.type)
        .sort(),
    ).to.deep.equal(['message.clicked', 'message.opened']);

    // A second open, on the owner: counted in the message's opens, not as a first open in the statistics.
    expect((await trackingGet(a.server.daemon.parts.tracking.url!, pixel!)).status).to.equal(200);
    await a.server.daemon.parts.tracking.drained();
    await within2s(
      () => call(viaB(), 'GET', `${messagesPath()}/${id}`),
      (res) => res.body.open_count === 2,
    );
    const statsAfter = await call(viaB(), 'GET', statsPath());
    expect(count(statsAfter, 'opened_count') - count(statsBefore, 'opened_count')).to.equal(1);
  });

  it('publishes an event whose commit waited on the shared database after events committed meanwhile: its id is made as it lands', async () => {
    const core = a.server.daemon.core;
    const shared = (value: string): WriteOp => ({ type: 'put', family: 'usersByEmail', key: 'order-test@example.invalid', value });
    const event = (name: string): EventRecord => ({
      v: 1,
      id: '',
      accountId: a.server.accountId,
      type: 'test.order',
      createdAt: new Date().toISOString(),
      data: { name },
    });
    await core.store.commit([shared('0')]);
    // Another transaction holds the shared row: the first commit's shared write waits for it.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM kv WHERE family = 'usersByEmail' AND key = 'order-test@example.invalid' FOR UPDATE");
      const first = event('first');
      const waiting = core.store.commit([shared('1'), ...core.eventsRepo.put(first)]);
      await new Promise((r) => setTimeout(r, 100));
      const second = event('second');
      await core.store.commit(core.eventsRepo.put(second));
      await core.publisher!.caughtUp();
      await holder.query('COMMIT');
      await waiting;
      expect(first.id > second.id, 'the event that landed last sorts last').to.equal(true);
      await core.publisher!.caughtUp();
      const published = await new PublishedView(core.cluster!.published).getMany<EventRecord>('events', [first.id, second.id]);
      expect(published.map((e) => e?.data.name)).to.deep.equal(['first', 'second']);
    } finally {
      await holder.end();
      await core.store.commit([{ type: 'del', family: 'usersByEmail', key: 'order-test@example.invalid' }]);
    }
  });

  it('tells its publication lag: the age of the oldest event not yet published', async () => {
    const publisher = a.server.daemon.core.publisher!;
    await publisher.caughtUp();
    expect(publisher.lagMs).to.equal(0);
    // Another transaction holds node A's cursor row: its next batch waits for it.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM publication WHERE node_id = 'node-a' FOR UPDATE");
      const ref = await sendOnA({ recipients: [{ email: 'lagging@example.org' }] });
      a.clock.advance(3000);
      expect(publisher.lagMs).to.equal(3000);
      expect((await call(viaB(), 'GET', `${messagesPath()}/${encodeURIComponent(ref)}`)).status, 'not published yet').to.equal(404);
      await holder.query('COMMIT');
      await within2s(
        () => call(viaB(), 'GET', `${messagesPath()}/${encodeURIComponent(ref)}`),
        (res) => res.status === 200,
      );
      expect(publisher.lagMs).to.equal(0);
    } finally {
      await holder.end();
    }
  });

  // Last: it empties what was published.
  it('purges what was published past its retention (done by the leader) and keeps the statistics', async () => {
    const core = a.server.daemon.core;
    await core.publisher!.caughtUp();
    await b.daemon.core.publisher!.caughtUp();
    const families = async () =>
      Object.fromEntries(
        (await client.query<{ family: string; n: string }>('SELECT family, count(*) AS n FROM published GROUP BY family')).rows.map((r) => [
          r.family,
          Number(r.n),
        ]),
      );
    const before = await families();
    expect(before.messages).to.be.greaterThan(1000);
    const stats = await a.api('GET', statsPath());
    // A year and a day on (the default metadata retention is shorter), events of before now.
    const purged = await purgePublished(core.cluster!.published, a.clock.now() + 366 * 86_400_000, Date.now() + 1000);
    expect(purged.messages).to.equal(before.messages);
    expect(purged.events).to.equal(before.events);
    const after = await families();
    for (const family of ['messages', 'messageIndex', 'messageExpiry', 'links', 'messageHits', 'events']) expect(after[family], family).to.equal(undefined);
    expect(after.counters).to.equal(before.counters);
    expect((await call(viaB(), 'GET', messagesPath())).body.data).to.deep.equal([]);
    expect((await call(viaB(), 'GET', statsPath())).body).to.deep.equal(stats.body);
  });

  /** The published rows, but the node's publication time. */
  async function publishedState(): Promise<unknown> {
    const rows = await client.query('SELECT family, key, value FROM published ORDER BY family, key');
    const cursors = await client.query('SELECT node_id, cursor FROM publication ORDER BY node_id');
    return { rows: rows.rows, cursors: cursors.rows };
  }
});
