import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QueueAdmin } from '../../../src/control/queue-admin.ts';
import { messageEventData } from '../../../src/events/message-data.ts';
import { EventRecorder } from '../../../src/events/recorder.ts';
import { Messages } from '../../../src/message/messages.ts';
import { purgedByOperator } from '../../../src/queue/outcomes.ts';
import { countersObserver } from '../../../src/stats/counters.ts';
import { CountersRepo } from '../../../src/store/counters-repo.ts';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import { JobIndex } from '../../../src/store/job-index.ts';
import { MessagesRepo } from '../../../src/store/messages-repo.ts';
import type { EventRecord, MessageRecord } from '../../../src/store/records.ts';
import { Store } from '../../../src/store/store.ts';
import { newIdAt } from '../../../src/util/ids.ts';
import { KeyedMutex } from '../../../src/util/keyed-mutex.ts';

const NOW = Date.parse('2026-11-21T12:00:00Z');
const clock = { now: () => NOW };

function message(fields: Partial<MessageRecord> = {}): MessageRecord {
  const created = new Date(NOW - 60_000).toISOString();
  return {
    v: 1,
    id: newIdAt(NOW - 60_000),
    accountId: 'acc',
    domainId: 'dom',
    domain: 'example.com',
    messageId: '<m@example.com>',
    direction: 'outbound',
    source: 'api',
    sender: 'app@example.com',
    recipient: 'r@example.org',
    subject: 's',
    tags: [],
    status: 'Deferred',
    sandbox: null,
    tracking: { open: false, click: false },
    retention: { metadataDays: 30, dataDays: 7 },
    schedule: null,
    dueAt: new Date(NOW + 600_000).toISOString(),
    bodyId: 'b',
    head: '',
    contentPurged: false,
    createdAt: created,
    updatedAt: created,
    sentAt: null,
    deliveredAt: null,
    retainUntil: new Date(NOW + 86_400_000).toISOString(),
    dataRetainUntil: new Date(NOW + 86_400_000).toISOString(),
    attempts: [{ time: created, log: 'mx.example.org: 451 try later', status: 'Deferred' }],
    openCount: 0,
    clickCount: 0,
    bounceClassification: '',
    isBounceNotification: false,
    referenceMessageId: null,
    ...fields,
  };
}

describe("the operator's purge, through the outcomes (over a real store)", () => {
  let dir: string;
  let store: Store;
  let counters: CountersRepo;
  let repo: MessagesRepo;
  let messages: Messages;
  let events: EventsRepo;
  let recorder: EventRecorder;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-purge-'));
    counters = new CountersRepo();
    store = await Store.open(dir, { journal: counters });
    repo = new MessagesRepo(store);
    messages = new Messages(store, repo, new KeyedMutex(), clock);
    events = new EventsRepo(store);
    recorder = new EventRecorder(events, clock, [countersObserver(counters)]);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function stored(m: MessageRecord, held = false): Promise<MessageRecord> {
    await store.commit([...repo.put(m), ...(held ? repo.hold(m) : repo.schedule(m))]);
    return m;
  }

  async function failedCount(): Promise<unknown> {
    await counters.fold();
    let f: unknown;
    await counters.rollup({ accountId: 'acc', series: 'counts', dimension: 'a', value: '' }, 'day', NOW - 86_400_000, NOW + 86_400_000, (_at, c) => (f = c.f));
    return f;
  }

  it('fails a scheduled message with the purge line, off the due-time index, with message.failed and its count, in one batch', async () => {
    const m = await stored(message());
    const before = store.commitStats.batches;
    const next = await messages.update(m.id, (current, now) => purgedByOperator(current, now, repo, recorder));
    expect(store.commitStats.batches - before).to.equal(1);
    const read = (await repo.get(m.id))!;
    expect(read).to.deep.equal(next);
    expect(read).to.include({ status: 'Failed', heldAt: null, bounceClassification: 'Uncategorized', updatedAt: new Date(NOW).toISOString() });
    expect(read.attempts).to.deep.equal([...m.attempts, { time: new Date(NOW).toISOString(), log: 'purged by operator', status: 'Failed' }]);
    expect(await repo.isScheduled(m)).to.equal(false);
    expect(await new JobIndex(store).due('message', NOW + 3_600_000, 10)).to.deep.equal([]);
    const [failed, ...others] = (await store.families.events.values().all()) as EventRecord[];
    expect(others).to.deep.equal([]);
    expect(failed).to.deep.include({ type: 'message.failed', accountId: 'acc' });
    expect(failed!.data).to.deep.equal(messageEventData(read, 'on_failed'));
    expect(failed!.data).to.not.have.property('delivery_attempt');
    expect(await failedCount()).to.equal(1);
  });

  it('takes a message held for its account off the held list', async () => {
    const m = await stored(message({ heldAt: new Date(NOW - 30_000).toISOString() }), true);
    expect(await repo.heldOf('acc', 10)).to.deep.equal([m.id]);
    await messages.update(m.id, (current, now) => purgedByOperator(current, now, repo, recorder));
    expect(await repo.heldOf('acc', 10)).to.deep.equal([]);
    expect((await repo.get(m.id))!).to.include({ status: 'Failed', heldAt: null });
  });

  it('is what QueueAdmin.purge writes: queued messages go, one the scheduler holds and final ones stay', async () => {
    const queued = await stored(message());
    const busy = await stored(message());
    const done = await stored(message({ status: 'Delivered' }));
    const scheduler = {
      snapshot: () => {
        throw new Error('not asked');
      },
      wake: async () => undefined,
      holds: (id: string) => id === busy.id,
    };
    const admin = new QueueAdmin({
      messages,
      repo,
      events: recorder,
      clock,
      daemon: { delivery: { scheduler, limits: { concurrency: 1, perDestination: 1, readyLimit: 1 } } },
    });
    const result = await admin.purge({ ids: [queued.id, busy.id, done.id] });
    expect(result).to.deep.equal({ purged: 1, ids: [queued.id], in_delivery: 1, not_queued: [{ id: done.id, status: 'Delivered' }] });
    expect((await repo.get(queued.id))!.attempts.at(-1)).to.deep.equal({ time: new Date(NOW).toISOString(), log: 'purged by operator', status: 'Failed' });
    expect((await repo.get(busy.id))!.status).to.equal('Deferred');
    expect(((await store.families.events.values().all()) as EventRecord[]).map((e) => [e.type, e.data.id])).to.deep.equal([['message.failed', queued.id]]);
  });
});
