import { expect } from 'chai';
import type { EventRecord, MessageRecord } from '../../../src/store/records.ts';
import type { Counts } from '../../../src/store/group-commit.ts';
import { counterAdds, countKey, expandCount } from '../../../src/store/counter-keys.ts';
import { CountersRepo } from '../../../src/store/counters-repo.ts';
import { counted, countersObserver, deliveredDelta, deltaOf, keyOf } from '../../../src/stats/counters.ts';

const ACC = '0190a0b0-0000-7000-8000-000000000001';

function message(fields: Partial<MessageRecord> = {}): MessageRecord {
  const created = '2026-11-03T09:00:00.000Z';
  return {
    v: 1,
    id: '0190a0b0-0000-7000-8000-0000000000aa',
    accountId: ACC,
    domainId: 'dom',
    domain: 'example.com',
    messageId: '<m@example.com>',
    direction: 'outbound',
    source: 'api',
    sender: 'app@example.com',
    recipient: 'someone@Gmail.COM',
    subject: 's',
    tags: [],
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

function event(type: string, createdAt = '2026-11-03T09:30:00.000Z'): EventRecord {
  return { v: 1, id: 'e1', accountId: ACC, type, createdAt, data: {} };
}

describe('statistics counters', () => {
  describe('which messages count', () => {
    it('outbound, not sandbox, not one of our own DSNs', () => {
      expect(counted(message())).to.equal(true);
      expect(counted(message({ direction: 'inbound' }))).to.equal(false);
      expect(counted(message({ sandbox: 'deliver' }))).to.equal(false);
      expect(counted(message({ isBounceNotification: true }))).to.equal(false);
    });

    it('keyOf attributes a message to its account, sender domain, lower-cased recipient domain and tags', () => {
      const m = message({ tags: ['t1'], recipient: 'Someone@Mail.Example.ORG' });
      expect(keyOf(m, 42)).to.deep.equal({ accountId: ACC, at: 42, senderDomain: 'example.com', recipientDomain: 'mail.example.org', tags: ['t1'] });
    });
  });

  describe('deltaOf (what one event adds)', () => {
    it('reception, failure, suppression: one each', () => {
      expect(deltaOf(event('message.reception'), message(), false)).to.deep.equal({ r: 1 });
      expect(deltaOf(event('message.failed'), message(), false)).to.deep.equal({ f: 1 });
      expect(deltaOf(event('message.suppressed'), message(), false)).to.deep.equal({ s: 1 });
    });

    it('a bounce, with its classification (Uncategorized when it has none)', () => {
      expect(deltaOf(event('message.bounced'), message({ bounceClassification: 'InvalidRecipient' }), false)).to.deep.equal({
        b: 1,
        bc: { InvalidRecipient: 1 },
      });
      expect(deltaOf(event('message.bounced'), message(), false)).to.deep.equal({ b: 1, bc: { Uncategorized: 1 } });
    });

    it('a deferral only the first time: not when an earlier attempt was deferred already', () => {
      const first = message({ attempts: [{ time: 't1', log: '451', status: 'Deferred' }] });
      expect(deltaOf(event('message.transient_error'), first, false)).to.deep.equal({ df: 1 });
      const afterBounceAttempt = message({
        attempts: [
          { time: 't0', log: '550', status: 'Failed' },
          { time: 't1', log: '451', status: 'Deferred' },
        ],
      });
      expect(deltaOf(event('message.transient_error'), afterBounceAttempt, false)).to.deep.equal({ df: 1 });
      const second = message({
        attempts: [
          { time: 't1', log: '451', status: 'Deferred' },
          { time: 't2', log: '451', status: 'Deferred' },
        ],
      });
      expect(deltaOf(event('message.transient_error'), second, false)).to.equal(null);
      const third = message({
        attempts: [
          { time: 't1', log: '451', status: 'Deferred' },
          { time: 't2', log: '451', status: 'Deferred' },
          { time: 't3', log: '451', status: 'Failed' },
        ],
      });
      expect(deltaOf(event('message.transient_error'), third, false)).to.equal(null);
    });

    it('an open or click only when it is the first by a person', () => {
      expect(deltaOf(event('message.opened'), message(), true)).to.deep.equal({ o: 1 });
      expect(deltaOf(event('message.opened'), message(), false)).to.equal(null);
      expect(deltaOf(event('message.clicked'), message(), true)).to.deep.equal({ c: 1 });
      expect(deltaOf(event('message.clicked'), message(), false)).to.equal(null);
    });

    it('nothing for other events', () => {
      expect(deltaOf(event('suppression.created'), message(), true)).to.equal(null);
      expect(deltaOf(event('domain.verified'), message(), false)).to.equal(null);
    });

    it('a delivery, with the time from acceptance to delivery by recipient domain', () => {
      const m = message({ createdAt: '2026-11-03T09:00:00.000Z', deliveredAt: '2026-11-03T09:02:00.000Z', updatedAt: '2026-11-03T10:00:00.000Z' });
      expect(deltaOf(event('message.delivered'), m, false)).to.deep.equal({ d: 1, dt: { 'gmail.com': { ms: 120_000, n: 1 } } });
    });
  });

  describe('deliveredDelta', () => {
    it('measures from the scheduled first attempt when there is one', () => {
      const m = message({
        createdAt: '2026-11-03T09:00:00.000Z',
        schedule: { firstAttempt: '2026-11-03T12:00:00.000Z', expires: null },
        deliveredAt: '2026-11-03T12:00:30.000Z',
      });
      expect(deliveredDelta(m)).to.deep.equal({ d: 1, dt: { 'gmail.com': { ms: 30_000, n: 1 } } });
    });

    it('measures from acceptance when the schedule has no first attempt', () => {
      const m = message({ schedule: { firstAttempt: null, expires: '2026-11-05T00:00:00.000Z' }, deliveredAt: '2026-11-03T09:00:05.000Z' });
      expect(deliveredDelta(m)).to.deep.equal({ d: 1, dt: { 'gmail.com': { ms: 5_000, n: 1 } } });
    });

    it('falls back to updatedAt without a delivery time, and never goes below zero', () => {
      expect(deliveredDelta(message({ updatedAt: '2026-11-03T09:00:07.000Z' })).dt).to.deep.equal({ 'gmail.com': { ms: 7_000, n: 1 } });
      const early = message({ schedule: { firstAttempt: '2026-11-03T12:00:00.000Z', expires: null }, deliveredAt: '2026-11-03T11:59:00.000Z' });
      expect(deliveredDelta(early).dt).to.deep.equal({ 'gmail.com': { ms: 0, n: 1 } });
    });
  });

  describe('countersObserver', () => {
    const observe = countersObserver(new CountersRepo());

    it("writes the rows of a counted event at the event's time", () => {
      const m = message({ tags: ['welcome'] });
      const ops = observe(event('message.reception', '2026-11-03T23:10:00.000Z'), { message: m });
      // One count op for the event, expanded into its rows when the store folds its log.
      expect(ops).to.deep.equal([{ type: 'count', family: 'counters', key: `${ACC}|2026110323|example.com|gmail.com|welcome`, value: { r: 1 } }]);
      const op = ops[0] as { key: string; value: Counts };
      expect(expandCount(op.key, op.value)).to.deep.equal(
        counterAdds(
          { accountId: ACC, at: Date.parse('2026-11-03T23:10:00.000Z'), senderDomain: 'example.com', recipientDomain: 'gmail.com', tags: ['welcome'] },
          { r: 1 },
        ),
      );
      expect(expandCount(op.key, op.value)[0]!.key).to.equal(`h|${ACC}|a||2026110323`);
    });

    it('a count key round-trips tags that need encoding, and no tags', () => {
      const k = {
        accountId: ACC,
        at: Date.parse('2026-11-03T09:59:59.000Z'),
        senderDomain: 'example.com',
        recipientDomain: 'gmail.com',
        tags: ['a|b', 'c,d', 'é'],
      };
      const byKey = (ops: Array<{ key: string }>) => [...ops].sort((x, y) => x.key.localeCompare(y.key));
      expect(byKey(expandCount(countKey(k), { r: 1 }))).to.deep.equal(byKey(counterAdds(k, { r: 1 })));
      expect(expandCount(countKey({ ...k, tags: [] }), { r: 1 })).to.deep.equal(counterAdds({ ...k, tags: [] }, { r: 1 }));
    });

    it('passes `first` on: only a first open counts', () => {
      expect(observe(event('message.opened'), { message: message(), first: true })).to.not.be.empty;
      expect(observe(event('message.opened'), { message: message(), first: false })).to.deep.equal([]);
      expect(observe(event('message.opened'), { message: message() })).to.deep.equal([]);
    });

    it('writes nothing without a message, for an uncounted message, or for an event that counts nothing', () => {
      expect(observe(event('message.reception'), undefined)).to.deep.equal([]);
      expect(observe(event('message.reception'), { message: message({ sandbox: 'deliver' }) })).to.deep.equal([]);
      expect(observe(event('message.reception'), { message: message({ direction: 'inbound' }) })).to.deep.equal([]);
      expect(observe(event('message.reception'), { message: message({ isBounceNotification: true }) })).to.deep.equal([]);
      expect(observe(event('message.opened'), { message: message(), first: false })).to.deep.equal([]);
    });
  });
});
