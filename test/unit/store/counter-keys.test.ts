import { expect } from 'chai';
import type { WriteOp } from '../../../src/store/group-commit.ts';
import { counterAdds, encodeTag, hourKey, keyTime, tagSet, type CounterKey } from '../../../src/store/counter-keys.ts';

const keys = (ops: WriteOp[]) => ops.map((op) => op.key);

describe('statistics counter keys', () => {
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
});
