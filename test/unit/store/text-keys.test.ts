import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessagesRepo } from '../../../src/store/messages-repo.ts';
import type { MessageRecord, SuppressionRecord } from '../../../src/store/records.ts';
import { Store } from '../../../src/store/store.ts';
import { SuppressionsRepo } from '../../../src/store/suppressions-repo.ts';
import { newIdAt } from '../../../src/util/ids.ts';

/**
 * Index keys hold user text (tags, addresses, Message-IDs) encoded with encodeURIComponent, which
 * throws a URIError on an unpaired surrogate: that was a 500 on a send with such a tag. The API
 * refuses such text now; the store must still never throw on it (other entrances, later callers).
 */
describe('store keys made of user text', () => {
  let dir: string;
  let store: Store;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-text-keys-'));
    store = await Store.open(dir);
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('indexes and finds a message whose tag, recipient and Message-ID hold unpaired surrogates', async () => {
    const repo = new MessagesRepo(store);
    const at = Date.parse('2026-11-21T12:00:00Z');
    const created = new Date(at).toISOString();
    const message: MessageRecord = {
      v: 1,
      id: newIdAt(at),
      accountId: 'acc',
      domainId: 'dom',
      domain: 'example.com',
      messageId: '<a\ud800@example.com>',
      direction: 'outbound',
      source: 'api',
      sender: 'app@example.com',
      recipient: 'r\udc00@example.org',
      subject: 's\ud800',
      tags: ['a\ud800b'],
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
    };
    await store.commit(repo.put(message));
    for (const filter of [{ tags: ['a\ud800b'] }, { recipient: 'r\udc00@example.org' }, { messageIdHeader: '<a\ud800@example.com>' }]) {
      const page = await repo.query('acc', filter, { limit: 10 });
      expect(
        page.items.map((m) => m.id),
        JSON.stringify(filter),
      ).to.deep.equal([message.id]);
    }
    expect((await repo.findByMessageId('acc', '<a\ud800@example.com>')).map((m) => m.id)).to.deep.equal([message.id]);
  });

  it('stores, finds and lists a suppression of an address holding an unpaired surrogate', async () => {
    const repo = new SuppressionsRepo(store);
    const record: SuppressionRecord = {
      v: 1,
      id: newIdAt(Date.parse('2026-11-21T12:00:00Z')),
      accountId: 'acct',
      email: 'x\ud800@example.org',
      domain: 'example.com',
      reason: 'test',
      source: 'api',
      createdAt: '2026-11-21T12:00:00.000Z',
      expiresAt: '2027-11-21T00:00:00.000Z',
    };
    await store.commit(repo.put(record));
    await repo.settled();
    expect((await repo.get('acct', 'X\ud800@example.org', 'example.com'))?.id).to.equal(record.id);
    expect((await repo.forEmail('acct', 'x\ud800@example.org')).map((r) => r.id)).to.deep.equal([record.id]);
    expect((await repo.list('acct', { email: 'x\ud800@example.org' }, { limit: 10 })).items.map((r) => r.id)).to.deep.equal([record.id]);
  });
});
