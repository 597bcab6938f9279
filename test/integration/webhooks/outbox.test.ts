import { expect } from 'chai';
import type { TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';
import { FANOUT_CONSUMER } from '../../../src/webhooks/fanout.ts';
import type { EventRecord, JobRecord } from '../../../src/store/records.ts';
import { newIdAt } from '../../../src/util/ids.ts';

const DAY = 86_400_000;

/**
 * The events family as the outbox: the webhook fan-out's persisted cursor across restarts, no
 * backlog sent on a first start, and the retention purge of old events and failed deliveries.
 */
const RECEPTION_ONLY = { on_reception: true };

describe('events outbox', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let receiver: WebhookReceiver;
  let restarted: TestServer | null = null;

  beforeEach(async () => {
    receiver = await WebhookReceiver.start();
    bed = await startMessageBed({ webhooks: { allow_networks: ['127.0.0.0/8'] } });
  });

  afterEach(async () => {
    await restarted?.daemon.stop();
    restarted = null;
    await bed.stop();
    await receiver.stop();
  });

  async function createWebhook(path: string): Promise<string> {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/webhooks`, {
      body: { name: path, url: receiver.url(path), scope: 'global', ...RECEPTION_ONLY },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set(path, res.body.secret);
    return res.body.id;
  }

  it('events that landed while the fan-out was not running are fanned out after a restart, from the persisted cursor', async () => {
    await createWebhook('/hook');
    await bed.send({ sandbox: true, recipients: [{ email: 'first@example.org' }] });
    await receiver.until((r) => r.length === 1);
    // The fan-out stops (its cursor is written); events keep landing, as before a crash.
    await bed.server.daemon.parts.webhooks.fanout.stop();
    const cursor = await bed.server.daemon.core.meta.cursor(FANOUT_CONSUMER);
    expect(cursor).to.be.a('string');
    for (const to of ['a@example.org', 'b@example.org']) await bed.send({ sandbox: true, recipients: [{ email: to }] });
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.received).to.have.length(1);

    restarted = await bed.server.restart();
    await receiver.until((r) => r.length === 3);
    await restarted.daemon.parts.webhooks.fanout.drained();
    await new Promise((r) => setTimeout(r, 200));
    // Up to 4 requests are in flight per origin: order is not kept.
    expect(
      receiver
        .verified()
        .map((d) => d.payload!.data.recipient)
        .sort(),
    ).to.deep.equal(['a@example.org', 'b@example.org', 'first@example.org']);
  });

  it('an event made before another but landing after it is fanned out, after a restart too: ids follow the order batches land', async () => {
    await createWebhook('/hook');
    const core = bed.server.daemon.core;
    const event = (to: string) =>
      core.events.record({
        type: 'message.reception',
        accountId: bed.server.accountId,
        data: {
          account_id: bed.server.accountId,
          event: 'on_reception',
          from: 'app@example.com',
          recipient: to,
          subject: 'Hi',
          message_id_header: '',
          is_bot: false,
          id: to,
        },
      });
    // Made in this order (as an outcome batch made before a DSN is prepared, and committed after)...
    const early = event('early@example.org');
    const late = event('late@example.org');
    // ...landed in the other, with the fan-out stopped in between as by a crash: its cursor is
    // past `late` when `early` lands.
    await core.store.commit(late);
    await bed.server.daemon.parts.webhooks.fanout.drained();
    await bed.server.daemon.parts.webhooks.fanout.stop();
    await core.store.commit(early);
    const keys = await core.store.families.events.keys().all();
    expect(keys.at(-1)! > (await core.meta.cursor(FANOUT_CONSUMER))!).to.equal(true);

    restarted = await bed.server.restart();
    await receiver.until((r) => r.length === 2);
    expect(
      receiver
        .verified()
        .map((d) => d.payload!.data.recipient)
        .sort(),
    ).to.deep.equal(['early@example.org', 'late@example.org']);
  });

  it('deliveries stored by schema 3 (records under their ids, entries pointing at them) are sent after the upgrade to schema 4', async () => {
    const hook = await createWebhook('/hook');
    const { core, parts } = bed.server.daemon;
    const { engine: jobEngine } = parts.jobs;
    const { fanout: webhookFanout } = parts.webhooks;
    await webhookFanout.stop();
    await jobEngine.stop(1000);
    // An event the webhook does not subscribe to (no new delivery is made of it), and two
    // deliveries of it as release 3 stored them.
    const [eventOp] = core.events.record({
      type: 'message.delivered',
      accountId: bed.server.accountId,
      data: {
        account_id: bed.server.accountId,
        event: 'on_delivered',
        from: 'app@example.com',
        recipient: 'old@example.org',
        subject: 'Hi',
        message_id_header: '',
        is_bot: false,
        id: 'old',
      },
    });
    await core.store.commit([eventOp!]);
    const [event] = (await core.store.families.events.values({ reverse: true, limit: 1 }).all()) as EventRecord[];
    const at = new Date(core.clock.now() - 60_000).toISOString();
    const ops = ['j1', 'j2'].flatMap((_n) => {
      const id = newIdAt(Date.parse(at));
      const job: JobRecord = {
        v: 1,
        id,
        kind: 'webhook',
        accountId: bed.server.accountId,
        targetId: hook,
        eventId: event!.id,
        state: 'pending',
        attempts: 0,
        dueAt: at,
        createdAt: at,
        updatedAt: at,
        lastAttempt: null,
      };
      return [
        { type: 'put' as const, family: 'jobs' as const, key: id, value: job },
        { type: 'put' as const, family: 'schedule' as const, key: `webhook:${String(Date.parse(at)).padStart(15, '0')}:${id}`, value: id },
      ];
    });
    await core.store.commit([...ops, { type: 'put', family: 'meta', key: 'schema', value: 3 }]);

    restarted = await bed.server.restart();
    expect(await restarted.daemon.core.meta.schemaVersion()).to.equal(4);
    await receiver.until((r) => r.length === 2);
    expect(receiver.verified().map((d) => d.payload!.data.recipient)).to.deep.equal(['old@example.org', 'old@example.org']);
    await new Promise((r) => setTimeout(r, 200));
    // Delivered: nothing of them is left, under their ids or on the index.
    expect(await restarted.daemon.core.store.families.jobs.keys().all()).to.deep.equal([]);
    expect(await restarted.daemon.core.store.families.schedule.keys({ gte: 'webhook:', lt: 'webhook;' }).all()).to.deep.equal([]);
  });

  it('a first start with events already stored sends no backlog: the cursor starts at the newest event', async () => {
    await bed.send({ sandbox: true, recipients: [{ email: 'old@example.org' }] });
    const store = bed.server.daemon.core.store;
    const [newest] = await store.families.events.keys({ reverse: true, limit: 1 }).all();
    // As a store written before webhooks were delivered: no cursor yet.
    await store.commit([{ type: 'del', family: 'meta', key: `cursor:${FANOUT_CONSUMER}` }]);
    await createWebhook('/hook');
    restarted = await bed.server.restart();
    expect(await restarted.daemon.core.meta.cursor(FANOUT_CONSUMER)).to.equal(newest);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.received).to.have.length(0);
  });

  it('purges events older than the retention, with the account index earlier releases wrote, and failed deliveries', async () => {
    const core = bed.server.daemon.core;
    const now = Date.now();
    const event = (days: number): EventRecord => ({
      v: 1,
      id: newIdAt(now - days * DAY),
      accountId: bed.server.accountId,
      type: 'message.reception',
      createdAt: new Date(now - days * DAY).toISOString(),
      data: { n: days },
    });
    const [old, recent] = [event(40), event(10)];
    // Written as they are (EventsRepo.put would give them ids of now).
    await core.store.commit([old, recent].map((e) => ({ type: 'put', family: 'events', key: e.id, value: e })));
    // Events are no longer indexed by account; a data directory of an earlier release has the rows.
    expect(await core.store.families.eventsByAccount.keys().all()).to.have.length(0);
    await core.store.commit([old, recent].map((e) => ({ type: 'put', family: 'eventsByAccount', key: `${e.accountId}:${e.id}`, value: e.id })));
    const job = (id: string, _days: number): JobRecord => ({
      v: 1,
      id,
      kind: 'webhook',
      accountId: bed.server.accountId,
      targetId: 'w',
      eventId: old.id,
      state: 'pending',
      attempts: 0,
      dueAt: new Date(now).toISOString(),
      createdAt: new Date(now).toISOString(),
      updatedAt: new Date(now).toISOString(),
      lastAttempt: null,
    });
    for (const [id, days] of [
      [newIdAt(now), 40],
      [newIdAt(now), 10],
    ] as const) {
      const pending = job(id, days);
      await core.store.commit(core.jobs.create(pending));
      await core.store.commit(core.jobs.change(pending, { ...pending, state: 'failed', attempts: 6, updatedAt: new Date(now - days * DAY).toISOString() }));
    }
    const cutoff = now - 30 * DAY;
    expect(await core.eventsRepo.purgeBefore(cutoff)).to.equal(1);
    const left = await core.store.families.events.keys().all();
    expect(left).to.include(recent.id).and.not.include(old.id);
    const indexed = await core.store.families.eventsByAccount.keys().all();
    expect(indexed.some((k) => k.endsWith(old.id))).to.equal(false);
    expect(indexed.some((k) => k.endsWith(recent.id))).to.equal(true);

    expect(await core.jobs.purgeFailedBefore(cutoff)).to.equal(1);
    const jobs: JobRecord[] = [];
    for await (const job of core.jobs.list('webhook')) jobs.push(job);
    expect(jobs.map((j) => j.updatedAt)).to.deep.equal([new Date(now - 10 * DAY).toISOString()]);
    expect(await core.store.families.jobsFailed.keys().all()).to.have.length(1);
    expect(await core.eventsRepo.purgeBefore(cutoff)).to.equal(0);
  });

  it("an account's webhooks, kept between batches, are read again when one is created or deleted", async () => {
    // An event with no webhook: the fan-out reads (and keeps) the account's empty list.
    await bed.send({ sandbox: true, recipients: [{ email: 'before@example.org' }] });
    await bed.server.daemon.parts.webhooks.fanout.drained();
    const id = await createWebhook('/hook');
    await bed.send({ sandbox: true, recipients: [{ email: 'after-create@example.org' }] });
    await receiver.until((r) => r.length === 1);
    expect(receiver.verified()[0]!.payload!.data.recipient).to.equal('after-create@example.org');

    expect((await bed.api('DELETE', `/v2/accounts/${bed.server.accountId}/webhooks/${id}`)).status).to.be.oneOf([200, 204]);
    await bed.send({ sandbox: true, recipients: [{ email: 'after-delete@example.org' }] });
    await bed.server.daemon.parts.webhooks.fanout.drained();
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.received).to.have.length(1);
    for await (const job of bed.server.daemon.core.jobs.list('webhook')) expect.fail(`no delivery expected, found ${job.id}`);
  });
});
