import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessagesRepo } from '../../../src/store/messages-repo.ts';
import type { MessageRecord } from '../../../src/store/records.ts';
import { Store } from '../../../src/store/store.ts';
import { newIdAt } from '../../../src/util/ids.ts';

/** Counts the records the query reads from the store: an index-driven query reads only what its index names. */
class CountingRepo extends MessagesRepo {
  reads = 0;
  constructor(store: Store) {
    super(store);
    const family = store.families.messages;
    const get: (key: string) => Promise<unknown> = family.get.bind(family);
    Object.assign(family, {
      get: (key: string) => {
        this.reads++;
        return get(key);
      },
    });
  }
}

function message(i: number, fields: Partial<MessageRecord> = {}): MessageRecord {
  const at = Date.parse('2026-11-21T12:00:00Z') + i * 1000;
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
    subject: `s${i % 7}`,
    tags: [`t${i % 5}`],
    status: 'Received',
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

describe('MessagesRepo queries', () => {
  let dir: string;
  let store: Store;
  let repo: CountingRepo;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-msgrepo-'));
    store = await Store.open(dir);
    repo = new CountingRepo(store);
    const ops = [];
    for (let i = 0; i < 300; i++) ops.push(...repo.put(message(i, i % 100 === 0 ? { recipient: 'Target@example.org', status: 'Deferred' } : {})));
    await store.commit(ops);
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => (repo.reads = 0));

  it('reads only the recipient index range, not every message', async () => {
    const page = await repo.query('acc', { recipient: 'target@example.org' }, { limit: 100 });
    expect(page.items.map((m) => m.messageId)).to.deep.equal(['<m200@example.com>', '<m100@example.com>', '<m0@example.com>']);
    expect(repo.reads).to.equal(3);
  });

  it('walks several status ranges merged in id order', async () => {
    const page = await repo.query('acc', { statuses: ['Deferred', 'Delivered'] }, { limit: 2 });
    expect(page.items.map((m) => m.messageId)).to.deep.equal(['<m200@example.com>', '<m100@example.com>']);
    expect(page.hasNext).to.equal(true);
    expect(repo.reads).to.equal(3);
  });

  it('moves index entries when a record changes, writing only those that changed', async () => {
    const before = (await repo.query('acc', { recipient: 'r1@example.org' }, { limit: 1 })).items[0]!;
    const ops = repo.put({ ...before, status: 'Delivered' }, before);
    // The record, and its status entry moved: the other entries (account, sender, recipient,
    // subject, Message-ID, domain, tag, expiry) stay as they are.
    expect(ops.map((op) => `${op.type} ${op.family}`)).to.deep.equal(['put messages', 'del messageIndex', 'put messageIndex']);
    await store.commit(ops);
    // Found through each index it was already in.
    for (const filter of [{}, { recipient: 'r1@example.org' }, { sender: 'app@example.com' }, { tags: ['t1'] }, { messageIdHeader: '<m1@example.com>' }]) {
      const found = (await repo.query('acc', filter, { limit: 400 })).items.filter((m) => m.id === before.id);
      expect(
        found.map((m) => m.status),
        JSON.stringify(filter),
      ).to.deep.equal(['Delivered']);
    }
    expect((await repo.query('acc', { statuses: ['Delivered'] }, { limit: 10 })).items.map((m) => m.id)).to.deep.equal([before.id]);
    expect((await repo.query('acc', { statuses: ['Received'], recipient: 'r1@example.org' }, { limit: 10 })).items).to.have.length(0);
  });

  it('moves the entries of each field that changed, and of the tags and expiry times, and none of those unchanged', async () => {
    const before = (await repo.query('acc', { recipient: 'r2@example.org' }, { limit: 1 })).items[0]!;
    const changed = (next: MessageRecord) =>
      repo
        .put(next, before)
        .slice(1)
        .map((op) => `${op.type} ${op.family} ${op.key.split(':')[0]}`);
    expect(changed({ ...before, updatedAt: '2026-11-21T13:00:00.000Z', attempts: [{ time: before.createdAt, log: 'x', status: 'Deferred' }] })).to.deep.equal(
      [],
    );
    // An address that differs only in case has the same entry.
    expect(changed({ ...before, sender: 'App@Example.com' })).to.deep.equal([]);
    expect(changed({ ...before, subject: 'another', recipient: 'other@example.org' })).to.deep.equal([
      'del messageIndex r',
      'put messageIndex r',
      'del messageIndex j',
      'put messageIndex j',
    ]);
    expect(changed({ ...before, tags: ['t2', 'new'] })).to.deep.equal(['put messageIndex t']);
    expect(changed({ ...before, tags: [] })).to.deep.equal(['del messageIndex t']);
    expect(changed({ ...before, contentPurged: true })).to.deep.equal(['del messageExpiry c']);
    // Each of them lands as the whole set of entries would have: the record is found by its new values only.
    await store.commit(repo.put({ ...before, subject: 'another', recipient: 'other@example.org', tags: ['new'] }, before));
    const ids = async (filter: Parameters<MessagesRepo['query']>[1]) =>
      (await repo.query('acc', filter, { limit: 400 })).items.map((m) => m.id).filter((id) => id === before.id);
    expect(await ids({ recipient: 'other@example.org' })).to.deep.equal([before.id]);
    expect(await ids({ subject: 'another' })).to.deep.equal([before.id]);
    expect(await ids({ tags: ['new'] })).to.deep.equal([before.id]);
    expect(await ids({ recipient: 'r2@example.org' })).to.deep.equal([]);
    expect(await ids({ subject: before.subject })).to.deep.equal([]);
    expect(await ids({ tags: ['t2'] })).to.deep.equal([]);
  });

  it('bounds a time window by id, reading nothing outside it', async () => {
    const from = Date.parse('2026-11-21T12:00:10Z');
    const page = await repo.query('acc', { fromMs: from, toMs: from + 4000 }, { limit: 100 });
    expect(page.items.map((m) => m.messageId)).to.deep.equal([14, 13, 12, 11, 10].map((i) => `<m${i}@example.com>`));
    expect(repo.reads).to.equal(5);
  });
});
