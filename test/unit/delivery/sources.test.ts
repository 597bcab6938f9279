import { expect } from 'chai';
import pino from 'pino';
import { drawOf, pickByWeight, SourceSet, type Source } from '../../../src/delivery/sources/sources.ts';
import { nextDayMs, warmupCap } from '../../../src/delivery/sources/warmup.ts';
import { SourceChoice } from '../../../src/queue/source-choice.ts';
import type { AccountRecord, MessageRecord } from '../../../src/store/records.ts';

const DAY = 86_400_000;
const START = Date.parse('2026-11-20T00:00:00Z');

const settings = {
  sources: {
    a: { address: '192.0.2.10', ehlo: 'a.example.net' },
    b: { address: '2001:db8::10', ehlo: 'b.example.net', warmup: { start: '2026-11-20', daily_caps: [2, 5] } },
    c: { address: '192.0.2.12', ehlo: 'c.example.net' },
  },
  pools: { bulk: { a: 1, b: 3 }, solo: { c: 1 } },
  default_pool: null,
};

describe('delivery sources: pools, weights, warm-up caps', () => {
  it('draws a member by weight: a weight of 3 three times as often as one of 1', () => {
    const members = [
      { name: 'a', weight: 1 },
      { name: 'b', weight: 3 },
    ];
    expect(pickByWeight(members, 0)!.name).to.equal('a');
    expect(pickByWeight(members, 0.2499)!.name).to.equal('a');
    expect(pickByWeight(members, 0.25)!.name).to.equal('b');
    expect(pickByWeight(members, 0.9999)!.name).to.equal('b');
    expect(pickByWeight([], 0.5)).to.equal(null);
    // The draw of an attempt is spread evenly: across 4,000 ids, the shares follow the weights.
    let b = 0;
    for (let i = 0; i < 4000; i++) if (pickByWeight(members, drawOf(`id-${i}`, 0))!.name === 'b') b += 1;
    expect(b / 4000).to.be.within(0.72, 0.78);
    // The same for every read of one attempt; another at the next.
    expect(drawOf('m', 0)).to.equal(drawOf('m', 0));
    expect(drawOf('m', 0)).to.not.equal(drawOf('m', 1));
  });

  it('caps a source in warm-up day by day (UTC), the first cap before its start, none past the schedule', () => {
    const warmup = { startMs: START, dailyCaps: [50, 100, 500] };
    expect(warmupCap(null, START)).to.equal(null);
    expect(warmupCap(warmup, START - 3 * DAY)).to.equal(50);
    expect(warmupCap(warmup, START + 5)).to.equal(50);
    expect(warmupCap(warmup, START + DAY + 5)).to.equal(100);
    expect(warmupCap(warmup, START + 3 * DAY - 1)).to.equal(500);
    expect(warmupCap(warmup, START + 3 * DAY)).to.equal(null);
    expect(nextDayMs(START + 5)).to.equal(START + DAY);
    expect(nextDayMs(START)).to.equal(START + DAY);
  });

  it('is absent without sources; without a default pool every source is in it, weight 1', () => {
    expect(SourceSet.fromConfig({ sources: {}, pools: {}, default_pool: null })).to.equal(null);
    const set = SourceSet.fromConfig(settings)!;
    expect(set.pool(null).members.map((m) => [m.source.name, m.weight])).to.deep.equal([
      ['a', 1],
      ['b', 1],
      ['c', 1],
    ]);
    expect(set.get('b')!.family).to.equal(6);
    expect(set.pool('bulk').members.map((m) => [m.source.name, m.weight])).to.deep.equal([
      ['a', 1],
      ['b', 3],
    ]);
    expect(SourceSet.fromConfig({ ...settings, default_pool: 'solo' })!.pool(null).name).to.equal('solo');
  });

  describe('the source of a message', () => {
    const PARENT = '0190a6c4-0000-7000-8000-000000000001';
    const CHILD = '0190a6c4-0000-7000-8000-000000000002';
    const OTHER = '0190a6c4-0000-7000-8000-000000000003';
    let accounts: Map<string, Partial<AccountRecord>>;
    let sent: Map<string, number>;
    let now: number;

    function choice(accountPools: Record<string, string> = {}) {
      const set = SourceSet.fromConfig(settings)!;
      const counter = {
        remaining: (s: Source) => (s.name === 'b' ? Math.max(warmupCap(s.warmup, now)! - (sent.get(s.name) ?? 0), 0) : Infinity),
        take(s: Source) {
          if (this.remaining(s) <= 0) return false;
          sent.set(s.name, (sent.get(s.name) ?? 0) + 1);
          return true;
        },
      };
      return new SourceChoice(set, counter, accountPools, {
        account: async (id) => accounts.get(id) as AccountRecord | undefined,
        messages: { update: async () => null },
        repo: { schedule: () => [], unschedule: () => [] },
        clock: { now: () => now },
        log: pino({ level: 'silent' }),
      });
    }
    const message = (id: string, accountId: string) => ({ id, accountId, attempts: [] }) as unknown as MessageRecord;

    beforeEach(() => {
      now = START + 1000;
      sent = new Map();
      accounts = new Map<string, Partial<AccountRecord>>([
        [PARENT, { id: PARENT, parentAccountId: null }],
        [CHILD, { id: CHILD, parentAccountId: PARENT }],
        [OTHER, { id: OTHER, parentAccountId: null }],
      ]);
    });

    it("takes the account's stored pool, then its configured one, then its parent's, then the default", async () => {
      const c = choice({ [CHILD]: 'solo', [PARENT]: 'bulk' });
      expect((await c.poolOf(CHILD)).name).to.equal('solo');
      accounts.get(CHILD)!.deliveryPool = 'bulk';
      expect((await c.poolOf(CHILD)).name).to.equal('bulk');
      // A stored pool no longer configured is passed over.
      accounts.get(CHILD)!.deliveryPool = 'gone';
      expect((await c.poolOf(CHILD)).name).to.equal('solo');
      const d = choice({ [PARENT]: 'solo' });
      accounts.get(CHILD)!.deliveryPool = null;
      expect((await d.poolOf(CHILD)).name).to.equal('solo');
      accounts.get(PARENT)!.deliveryPool = 'bulk';
      expect((await d.poolOf(CHILD)).name).to.equal('bulk');
      expect((await d.poolOf(OTHER)).name).to.equal('*');
    });

    it('files mail under a source of the pool with room; over the cap, another source of the pool, or the next day when none has room', async () => {
      const c = choice({ [OTHER]: 'bulk' });
      // b (weight 3) warms up with 2 a day: once it has sent 2, every message goes out from a.
      sent.set('b', 2);
      for (let i = 0; i < 20; i++) expect(await c.choose(message(`m${i}`, OTHER))).to.equal('a');
      expect(await c.admit(message('m', OTHER), 'b/mx.example.org')).to.deep.equal({
        refile: 'source b reached its warm-up cap for today; filed again under another source of its pool',
      });
      // A pool of b alone: the next day.
      accounts.get(OTHER)!.deliveryPool = null;
      const only = choice({ [OTHER]: 'bulk' });
      sent.set('b', 2);
      const solo = SourceSet.fromConfig({ ...settings, pools: { bulk: { b: 1 } } })!;
      const waiting = await new SourceChoice(
        solo,
        { remaining: () => 0, take: () => false },
        { [OTHER]: 'bulk' },
        {
          account: async (id) => accounts.get(id) as AccountRecord | undefined,
          messages: { update: async () => null },
          repo: { schedule: () => [], unschedule: () => [] },
          clock: { now: () => now },
          log: pino({ level: 'silent' }),
        },
      ).admit(message('m', OTHER), 'b/mx.example.org');
      expect(waiting).to.have.property('waitUntilMs', START + DAY);
      // Under its cap: counted, and the source is given.
      sent.set('b', 0);
      const admitted = await only.admit(message('m', OTHER), 'b/mx.example.org');
      expect(admitted).to.have.nested.property('source.name', 'b');
      expect(sent.get('b')).to.equal(1);
      // A lane without a source (no sources, sandbox): nothing counted.
      expect(await only.admit(message('m', OTHER), 'mx.example.org')).to.deep.equal({ source: null });
    });
  });
});
