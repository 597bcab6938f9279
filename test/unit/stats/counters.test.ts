import { expect } from 'chai';
import type { EventRecord, MessageRecord } from '../../../src/store/records.ts';
import type { Counts, WriteOp } from '../../../src/store/group-commit.ts';
import {
  counted,
  counterAdds,
  countersObserver,
  countKey,
  deliveredDelta,
  deltaOf,
  encodeTag,
  expandCount,
  hourKey,
  keyOf,
  keyTime,
  tagSet,
  type CounterKey,
} from '../../../src/stats/counters.ts';

const ACC = '0190a0b0-0000-7000-8000-000000000001';

function message(fields: Partial<MessageRecord> = {}): MessageRecord {
  const created = '2026-11-03T09:00:00.000Z';
  return {
    v: 1, id: '0190a0b0-0000-7000-8000-0000000000aa', accountId: ACC, domainId: 'dom', domain: 'example.com', messageId: '<m@example.com>',
    direction: 'outbound', source: 'api', sender: 'app@example.com', recipient: 'someone@Gmail.COM', subject: 's',
    tags: [], status: 'Received', sandbox: null, tracking: { open: false, click: false },
    retention: { metadataDays: 30, dataDays: 7 }, schedule: null, dueAt: created, bodyId: 'b', head: '', contentPurged: false,
    createdAt: created, updatedAt: created, sentAt: null, deliveredAt: null, retainUntil: created, dataRetainUntil: created,
    attempts: [], openCount: 0, clickCount: 0, bounceClassification: '', isBounceNotification: false, referenceMessageId: null,
    ...fields,
  };
}

function event(type: string, createdAt = '2026-11-03T09:30:00.000Z'): EventRecord {
  return { v: 1, id: 'e1', accountId: ACC, type, createdAt, data: {} };
}

const keys = (ops: WriteOp[]) => ops.map((op) => op.key);

describe('statistics counters', () => {
  describe('hourKey and keyTime', () => {
    it('hourKey is YYYYMMDDHH in UTC, zero-padded', () => {
      expect(hourKey(Date.parse('2026-11-03T09:59:59.999Z'))).to.equal('2026110309');
      expect(hourKey(Date.parse('2026-01-01T00:00:00Z'))).to.equal('2026010100');
      expect(hourKey(Date.parse('2026-12-31T23:00:00Z'))).to.equal('2026123123');
      // Not the local time: 23:30 at UTC-5 is 04:30 UTC the next day.
      expect(hourKey(Date.parse('2026-03-07T23:30:00-05:00'))).to.equal('2026030804');
    });

    it('keyTime reads an hour key or a day key back as the start of that hour or day, UTC', () => {
      expect(keyTime('2026110309')).to.equal(Date.parse('2026-11-03T09:00:00Z'));
      expect(keyTime('20261103')).to.equal(Date.parse('2026-11-03T00:00:00Z'));
      expect(keyTime('2024022923')).to.equal(Date.parse('2024-02-29T23:00:00Z'));
    });

    it('round-trips every hour of a year, and hour keys sort in time order', () => {
      const start = Date.parse('2024-01-01T00:00:00Z');
      let previous = '';
      const wrong: string[] = [];
      let hours = 0;
      for (let at = start; at < Date.parse('2025-01-01T00:00:00Z'); at += 3_600_000, hours++) {
        const key = hourKey(at);
        if (key.length !== 10 || keyTime(key) !== at || !(key > previous)) wrong.push(`${new Date(at).toISOString()} → ${key}`);
        previous = key;
      }
      expect(wrong).to.deep.equal([]);
      expect(hours).to.equal(366 * 24);
      expect(previous).to.equal('2024123123');
    });

    it('the day key is the first 8 characters of the hour key', () => {
      const at = Date.parse('2026-11-03T17:42:00Z');
      expect(keyTime(hourKey(at).slice(0, 8))).to.equal(Date.parse('2026-11-03T00:00:00Z'));
    });
  });

  describe('tags in keys', () => {
    it('URI-encodes a tag, so that | and , cannot split a key or a tag set', () => {
      expect(encodeTag('welcome')).to.equal('welcome');
      expect(encodeTag('a|b')).to.equal('a%7Cb');
      expect(encodeTag('a,b')).to.equal('a%2Cb');
      expect(encodeTag('café tag')).to.equal('caf%C3%A9%20tag');
    });

    it('a tag set is the distinct encoded tags, sorted, joined by commas; empty for no tags', () => {
      expect(tagSet([])).to.equal('');
      expect(tagSet(['welcome'])).to.equal('welcome');
      expect(tagSet(['promo', 'welcome'])).to.equal(tagSet(['welcome', 'promo']));
      expect(tagSet(['welcome', 'promo', 'welcome'])).to.equal('promo,welcome');
      expect(tagSet(['b,c', 'a|z'])).to.equal('a%7Cz,b%2Cc');
    });
  });

  describe('counterAdds (the rows of one event)', () => {
    const at = Date.parse('2026-11-03T09:30:00Z');
    const key: CounterKey = { accountId: 'acc', at, senderDomain: 'example.com', recipientDomain: 'gmail.com', tags: ['welcome', 'a|b'] };

    it('adds the counts to the hourly and daily rows of every dimension, pair and the tag set, the delivery times to their own series, and the finest row and indexes', () => {
      const delta = { d: 1, dt: { 'gmail.com': { ms: 120_000, n: 1 } } };
      const ops = counterAdds(key, delta);
      const rows = [
        'a|',
        's|example.com',
        'r|gmail.com',
        'sr|example.com,gmail.com',
        't|welcome',
        'st|example.com,welcome',
        'rt|gmail.com,welcome',
        't|a%7Cb',
        'st|example.com,a%7Cb',
        'rt|gmail.com,a%7Cb',
        'g|a%7Cb,welcome',
      ];
      expect(keys(ops)).to.deep.equal([
        ...rows.flatMap((row) => [`h|acc|${row}|2026110309`, `d|acc|${row}|20261103`]),
        ...rows.flatMap((row) => [`ht|acc|${row}|2026110309`, `dt|acc|${row}|20261103`]),
        'f|acc|example.com|2026110309|gmail.com|a%7Cb,welcome',
        'e|acc|example.com|gmail.com|2026110309|a%7Cb,welcome',
        'i|acc|example.com',
        'j|acc|a%7Cb,welcome',
      ]);
      for (const op of ops) {
        expect(op.type).to.equal('add');
        expect(op.family).to.equal('counters');
      }
      for (const op of ops) {
        const value = (op as { value: unknown }).value;
        if (op.key.startsWith('i|') || op.key.startsWith('j|')) expect(value, op.key).to.deep.equal({});
        else if (op.key.startsWith('f|') || op.key.startsWith('e|')) expect(value, op.key).to.deep.equal(delta);
        else if (op.key.startsWith('ht|') || op.key.startsWith('dt|')) expect(value, op.key).to.deep.equal({ dt: delta.dt });
        else expect(value, op.key).to.deep.equal({ d: 1 });
      }
    });

    it('an event without delivery times writes no time rows', () => {
      expect(keys(counterAdds(key, { b: 1, bc: { InvalidRecipient: 1 } })).filter((k) => k.startsWith('ht|') || k.startsWith('dt|'))).to.deep.equal([]);
    });

    it('without tags: no tag or tag-set rows, and an empty tag set in the finest row', () => {
      const ops = counterAdds({ ...key, tags: [] }, { r: 1 });
      expect(keys(ops).filter((k) => /\|(t|g|st|rt)\|/.test(k) || k.startsWith('j|'))).to.deep.equal([]);
      expect(keys(ops)).to.include('f|acc|example.com|2026110309|gmail.com|');
      // a, s, r, sr, hourly and daily, the two finest rows and the sender index.
      expect(ops).to.have.length(11);
    });

    it('counts a tag given twice once', () => {
      const ops = counterAdds({ ...key, tags: ['x', 'x'] }, { r: 1 });
      expect(keys(ops).filter((k) => k.includes('|t|'))).to.deep.equal(['h|acc|t|x|2026110309', 'd|acc|t|x|20261103']);
      expect(keys(ops)).to.include('f|acc|example.com|2026110309|gmail.com|x');
      expect(keys(ops)).to.include('h|acc|g|x|2026110309');
      expect(keys(ops)).to.include('j|acc|x');
    });

    it('writes one tag-set row for the same tags in any order', () => {
      const one = keys(counterAdds({ ...key, tags: ['b', 'a'] }, { r: 1 })).filter((k) => k.includes('|g|') || k.startsWith('j|'));
      const other = keys(counterAdds({ ...key, tags: ['a', 'b', 'a'] }, { r: 1 })).filter((k) => k.includes('|g|') || k.startsWith('j|'));
      expect(one).to.deep.equal(['h|acc|g|a,b|2026110309', 'd|acc|g|a,b|20261103', 'j|acc|a,b']);
      expect(other).to.deep.equal(one);
    });

    it('files an event at the UTC hour and day it happened', () => {
      const late = counterAdds({ ...key, at: Date.parse('2026-11-03T23:59:59.999Z'), tags: [] }, { r: 1 });
      expect(keys(late).slice(0, 2)).to.deep.equal(['h|acc|a||2026110323', 'd|acc|a||20261103']);
      const next = counterAdds({ ...key, at: Date.parse('2026-11-04T00:00:00Z'), tags: [] }, { r: 1 });
      expect(keys(next).slice(0, 2)).to.deep.equal(['h|acc|a||2026110400', 'd|acc|a||20261104']);
    });
  });

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
      expect(deltaOf(event('message.bounced'), message({ bounceClassification: 'InvalidRecipient' }), false)).to.deep.equal({ b: 1, bc: { InvalidRecipient: 1 } });
      expect(deltaOf(event('message.bounced'), message(), false)).to.deep.equal({ b: 1, bc: { Uncategorized: 1 } });
    });

    it('a deferral only the first time: not when an earlier attempt was deferred already', () => {
      const first = message({ attempts: [{ time: 't1', log: '451', status: 'Deferred' }] });
      expect(deltaOf(event('message.transient_error'), first, false)).to.deep.equal({ df: 1 });
      const afterBounceAttempt = message({ attempts: [{ time: 't0', log: '550', status: 'Failed' }, { time: 't1', log: '451', status: 'Deferred' }] });
      expect(deltaOf(event('message.transient_error'), afterBounceAttempt, false)).to.deep.equal({ df: 1 });
      const second = message({ attempts: [{ time: 't1', log: '451', status: 'Deferred' }, { time: 't2', log: '451', status: 'Deferred' }] });
      expect(deltaOf(event('message.transient_error'), second, false)).to.equal(null);
      const third = message({ attempts: [{ time: 't1', log: '451', status: 'Deferred' }, { time: 't2', log: '451', status: 'Deferred' }, { time: 't3', log: '451', status: 'Failed' }] });
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
    const observe = countersObserver();

    it('writes the rows of a counted event at the event\'s time', () => {
      const m = message({ tags: ['welcome'] });
      const ops = observe(event('message.reception', '2026-11-03T23:10:00.000Z'), { message: m });
      // One count op for the event, expanded into its rows when the store folds its log.
      expect(ops).to.deep.equal([{ type: 'count', family: 'counters', key: `${ACC}|2026110323|example.com|gmail.com|welcome`, value: { r: 1 } }]);
      const op = ops[0] as { key: string; value: Counts };
      expect(expandCount(op.key, op.value)).to.deep.equal(counterAdds({ accountId: ACC, at: Date.parse('2026-11-03T23:10:00.000Z'), senderDomain: 'example.com', recipientDomain: 'gmail.com', tags: ['welcome'] }, { r: 1 }));
      expect(expandCount(op.key, op.value)[0]!.key).to.equal(`h|${ACC}|a||2026110323`);
    });

    it('a count key round-trips tags that need encoding, and no tags', () => {
      const k = { accountId: ACC, at: Date.parse('2026-11-03T09:59:59.000Z'), senderDomain: 'example.com', recipientDomain: 'gmail.com', tags: ['a|b', 'c,d', 'é'] };
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
