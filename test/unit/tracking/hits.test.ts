import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventRecorder } from '../../../src/events/recorder.ts';
import { Messages } from '../../../src/message/messages.ts';
import type { WriteOp } from '../../../src/store/group-commit.ts';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import { MessagesRepo } from '../../../src/store/messages-repo.ts';
import type { EventRecord, MessageRecord } from '../../../src/store/records.ts';
import { Store } from '../../../src/store/store.ts';
import { TrackingHits } from '../../../src/tracking/hits.ts';
import type { ThreadHit } from '../../../src/tracking/thread-protocol.ts';
import { KeyedMutex } from '../../../src/util/keyed-mutex.ts';
import { newIdAt } from '../../../src/util/ids.ts';
import { ManualClock } from '../../helpers/harness.ts';

const BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';

function message(i: number, fields: Partial<MessageRecord> = {}): MessageRecord {
  const at = Date.parse('2026-11-21T11:00:00Z') + i * 1000;
  const created = new Date(at).toISOString();
  return {
    v: 1,
    id: newIdAt(at),
    accountId: 'acc',
    domainId: 'dom',
    domain: 'example.com',
    messageId: `<m${i}@example.com>`,
    direction: 'outbound',
    source: 'api',
    sender: 'app@example.com',
    recipient: `r${i}@example.org`,
    subject: 'Hello',
    tags: [],
    status: 'Delivered',
    sandbox: null,
    tracking: { open: true, click: true },
    retention: { metadataDays: 30, dataDays: 7 },
    schedule: null,
    dueAt: created,
    bodyId: 'b',
    head: '',
    contentPurged: false,
    createdAt: created,
    updatedAt: created,
    sentAt: created,
    deliveredAt: created,
    retainUntil: created,
    dataRetainUntil: created,
    attempts: [],
    openCount: 0,
    clickCount: 0,
    bounceClassification: '',
    isBounceNotification: false,
    referenceMessageId: null,
    ...fields,
  };
}

/**
 * TrackingHits against a real store: hits taken in bursts are written in batches, each message's
 * counts in its own record (the message record is never rewritten), the first human open once,
 * and a batch that fails leaves nothing counted twice.
 */
describe('tracking hits', () => {
  let dir: string;
  let store: Store;
  let repo: MessagesRepo;
  let events: EventsRepo;
  let clock: ManualClock;
  let written: number[];
  let errors: unknown[];
  let failNext: boolean;
  let hits: TrackingHits;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-hits-'));
    store = await Store.open(dir);
    repo = new MessagesRepo(store);
    events = new EventsRepo(store);
    clock = new ManualClock();
    written = [];
    errors = [];
    failNext = false;
    const commit = (ops: WriteOp[]) => {
      if (failNext) {
        failNext = false;
        return Promise.reject(new Error('disk full'));
      }
      return store.commit(ops);
    };
    hits = new TrackingHits(
      repo,
      commit,
      new EventRecorder(events, clock),
      clock,
      10_000,
      (err) => errors.push(err),
      (n) => written.push(n),
    );
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const hit = (id: string, kind: 'open' | 'click', userAgent = BROWSER): ThreadHit => ({
    id,
    kind,
    ip: '192.0.2.7',
    userAgent,
    ...(kind === 'click' ? { url: 'https://shop.example.net/x' } : {}),
  });
  const recorded = async (type: string): Promise<EventRecord[]> => (await events.recent('acc', 1000, type)).reverse();

  it('writes a burst of hits in one batch, with one event each and the counts beside the message', async () => {
    const [a, b] = [message(1), message(2)];
    await store.commit([...repo.put(a), ...repo.put(b)]);
    hits.take([hit(a.id, 'open'), hit(a.id, 'open'), hit(a.id, 'click'), hit(b.id, 'click', 'curl/8.5.0')]);
    await hits.drain();
    expect(written).to.deep.equal([4]);
    expect((await recorded('message.opened')).map((e) => e.data.id)).to.deep.equal([a.id, a.id]);
    expect((await recorded('message.clicked')).map((e) => [e.data.id, e.data.is_bot])).to.deep.equal([
      [a.id, false],
      [b.id, true],
    ]);
    const [ha, hb] = await repo.hits([a.id, b.id]);
    expect(ha).to.deep.equal({ v: 1, opens: 2, clicks: 1, firstOpenAt: '2026-11-21T12:00:00.000Z', firstClickAt: '2026-11-21T12:00:00.000Z' });
    // A bot's click is counted, and is no first click.
    expect(hb).to.deep.equal({ v: 1, opens: 0, clicks: 1, firstOpenAt: null, firstClickAt: null });
    expect(await repo.get(a.id), 'the message record is not rewritten').to.deep.equal(a);
  });

  it('keeps counting across batches, and adds to the counts a message had before they moved beside it', async () => {
    const old = message(3, { openCount: 4, clickCount: 1, firstOpenAt: '2026-11-20T08:00:00.000Z' });
    await store.commit(repo.put(old));
    hits.take([hit(old.id, 'open')]);
    await hits.drain();
    clock.advance(60_000);
    hits.take([hit(old.id, 'open'), hit(old.id, 'click')]);
    await hits.drain();
    expect((await repo.hits([old.id]))[0]).to.deep.equal({ v: 1, opens: 2, clicks: 1, firstOpenAt: null, firstClickAt: '2026-11-21T12:01:00.000Z' });
    const messages = new Messages(store, repo, new KeyedMutex(), clock);
    const [shown] = await messages.shown([old]);
    expect(shown).to.include({ openCount: 6, clickCount: 2, firstOpenAt: '2026-11-20T08:00:00.000Z', firstClickAt: '2026-11-21T12:01:00.000Z' });
    // An untracked message is shown as stored, with no read of hits.
    const plain = message(4, { tracking: { open: false, click: false } });
    expect((await messages.shown([plain]))[0]).to.equal(plain);
  });

  it('after a batch that failed, counts from what the store holds: nothing twice, nothing from the lost batch', async () => {
    const m = message(5);
    await store.commit(repo.put(m));
    hits.take([hit(m.id, 'open')]);
    await hits.drain();
    failNext = true;
    hits.take([hit(m.id, 'open'), hit(m.id, 'open')]);
    await hits.drain();
    expect(errors.map((e) => (e as Error).message)).to.deep.equal(['disk full']);
    hits.take([hit(m.id, 'open')]);
    await hits.drain();
    expect((await repo.hits([m.id]))[0]).to.include({ opens: 2 });
    expect(await recorded('message.opened')).to.have.length(2);
    expect(written, 'every batch is reported done, failed or not').to.deep.equal([1, 2, 1]);
  });

  it('writes nothing for a message that is gone or is not outbound mail', async () => {
    const inbound = message(6, { direction: 'inbound' });
    await store.commit(repo.put(inbound));
    hits.take([hit(inbound.id, 'open'), hit(newIdAt(Date.now()), 'click')]);
    await hits.drain();
    expect(await events.recent('acc', 10)).to.have.length(0);
    expect(await repo.hits([inbound.id])).to.deep.equal([undefined]);
    expect(written).to.deep.equal([2]);
  });

  it('flags a hit within the scanner window of delivery, with the delivery time as stored when it is written', async () => {
    const m = message(7, { status: 'Deferred', deliveredAt: null });
    await store.commit(repo.put(m));
    hits.take([hit(m.id, 'click')]);
    await hits.drain();
    const delivered = { ...m, status: 'Delivered' as const, deliveredAt: new Date(clock.now()).toISOString() };
    await store.commit(repo.put(delivered, m));
    clock.advance(2_000);
    hits.take([hit(m.id, 'click')]);
    await hits.drain();
    expect((await recorded('message.clicked')).map((e) => e.data.is_bot)).to.deep.equal([false, true]);
  });
});
