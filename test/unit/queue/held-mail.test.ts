import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Messages } from '../../../src/message/messages.ts';
import { HeldMail } from '../../../src/queue/held-mail.ts';
import { JobIndex } from '../../../src/store/job-index.ts';
import { MessagesRepo } from '../../../src/store/messages-repo.ts';
import type { AccountRecord, MessageRecord } from '../../../src/store/records.ts';
import { Store } from '../../../src/store/store.ts';
import { newIdAt } from '../../../src/util/ids.ts';
import { KeyedMutex } from '../../../src/util/keyed-mutex.ts';

const NOW = Date.parse('2026-11-21T12:00:00Z');

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
    dueAt: created,
    bodyId: 'b',
    head: '',
    contentPurged: false,
    createdAt: created,
    updatedAt: created,
    sentAt: null,
    deliveredAt: null,
    retainUntil: new Date(NOW + 86_400_000).toISOString(),
    dataRetainUntil: new Date(NOW + 86_400_000).toISOString(),
    attempts: [],
    openCount: 0,
    clickCount: 0,
    bounceClassification: '',
    isBounceNotification: false,
    referenceMessageId: null,
    ...fields,
  };
}

describe('HeldMail', () => {
  let dir: string;
  let store: Store;
  let repo: MessagesRepo;
  let messages: Messages;
  let status: AccountRecord['status'];
  let due: number[];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-held-'));
    store = await Store.open(dir);
    repo = new MessagesRepo(store);
    messages = new Messages(store, repo, new KeyedMutex(), { now: () => NOW });
    status = 'suspended';
    due = [];
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function held(): HeldMail {
    const account = async () => {
      return { id: 'acc', status } as AccountRecord;
    };
    return new HeldMail(account, messages, repo, pino({ level: 'silent' }), (ms) => due.push(ms));
  }

  async function stored(m: MessageRecord): Promise<MessageRecord> {
    await store.commit([...repo.put(m), ...repo.schedule(m)]);
    return m;
  }

  it('takes a held message off the due-time index, lists it under its account, and puts it back due now on release', async () => {
    const m = await stored(message());
    const mail = held();
    expect(await mail.mayDeliver(m)).to.equal(false);
    await mail.hold(m);
    const after = (await repo.get(m.id))!;
    expect(after.heldAt).to.equal(new Date(NOW).toISOString());
    expect(after.status).to.equal('Deferred');
    expect(await repo.isScheduled(after)).to.equal(false);
    expect(await new JobIndex(store).due('message', NOW, 10)).to.deep.equal([]);
    expect(await repo.heldOf('acc', 10)).to.deep.equal([m.id]);

    status = 'active';
    expect(await mail.release(['acc'])).to.equal(1);
    const back = (await repo.get(m.id))!;
    expect(back.heldAt).to.equal(null);
    expect(back.dueAt).to.equal(new Date(NOW).toISOString());
    expect(await repo.isScheduled(back)).to.equal(true);
    expect(await repo.heldOf('acc', 10)).to.deep.equal([]);
    expect(due).to.deep.equal([NOW]);
  });

  it('releases by itself a message held just as its account became active (a release that had already looked)', async () => {
    const m = await stored(message());
    const mail = held();
    expect(await mail.mayDeliver(m)).to.equal(false);
    // The account turns active now, and its release finds nothing held yet; then the hold lands.
    status = 'active';
    expect(await mail.release(['acc'])).to.equal(0);
    await mail.hold(m);
    const back = (await repo.get(m.id))!;
    expect(back.heldAt).to.equal(null);
    expect(await repo.isScheduled(back)).to.equal(true);
    expect(await repo.heldOf('acc', 10)).to.deep.equal([]);
  });

  it('keeps a later due time, drops entries of messages that are gone, and releases active accounts on start', async () => {
    const later = new Date(NOW + 3_600_000).toISOString();
    const m = await stored(message({ dueAt: later }));
    const gone = await stored(message({ id: newIdAt(NOW - 1000) }));
    const mail = held();
    await mail.hold(m);
    await mail.hold(gone);
    await store.commit(repo.delete((await repo.get(gone.id))!));
    status = 'active';
    expect(await mail.releaseActive()).to.equal(1);
    expect((await repo.get(m.id))!.dueAt).to.equal(later);
    expect(await repo.heldOf('acc', 10)).to.deep.equal([]);
  });

  it('does not hold a message that moved on since it was taken', async () => {
    const m = await stored(message());
    await store.commit(repo.put({ ...m, status: 'Delivered' }, m));
    await held().hold(m);
    expect((await repo.get(m.id))!.heldAt).to.equal(undefined);
    expect(await repo.heldOf('acc', 10)).to.deep.equal([]);
  });
});
