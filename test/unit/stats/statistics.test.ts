import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bucketCount, bucketsOf, GROUPS, Statistics, type Bucket, type Group, type StatsQuery } from '../../../src/stats/statistics.ts';
import { counterAdds } from '../../../src/store/counter-keys.ts';
import { CountersRepo } from '../../../src/store/counters-repo.ts';
import type { Counts } from '../../../src/store/group-commit.ts';
import { Store } from '../../../src/store/store.ts';

const T = (s: string) => Date.parse(`${s}Z`);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Buckets as [from, to] ISO strings, for readable failures. */
const spans = (buckets: Array<{ from: number; to: number }>) => buckets.map((b) => [new Date(b.from).toISOString(), new Date(b.to).toISOString()]);

describe('statistics buckets', () => {
  describe('bucketsOf', () => {
    it('hours: one bucket per UTC hour', () => {
      expect(spans(bucketsOf(T('2026-11-02T09:00:00'), T('2026-11-02T12:00:00'), 'hour'))).to.deep.equal([
        ['2026-11-02T09:00:00.000Z', '2026-11-02T10:00:00.000Z'],
        ['2026-11-02T10:00:00.000Z', '2026-11-02T11:00:00.000Z'],
        ['2026-11-02T11:00:00.000Z', '2026-11-02T12:00:00.000Z'],
      ]);
    });

    it('days: UTC days, the first and last cut to the window', () => {
      expect(spans(bucketsOf(T('2026-11-01T22:00:00'), T('2026-11-04T06:00:00'), 'day'))).to.deep.equal([
        ['2026-11-01T22:00:00.000Z', '2026-11-02T00:00:00.000Z'],
        ['2026-11-02T00:00:00.000Z', '2026-11-03T00:00:00.000Z'],
        ['2026-11-03T00:00:00.000Z', '2026-11-04T00:00:00.000Z'],
        ['2026-11-04T00:00:00.000Z', '2026-11-04T06:00:00.000Z'],
      ]);
      expect(spans(bucketsOf(T('2026-11-02T00:00:00'), T('2026-11-04T00:00:00'), 'day'))).to.deep.equal([
        ['2026-11-02T00:00:00.000Z', '2026-11-03T00:00:00.000Z'],
        ['2026-11-03T00:00:00.000Z', '2026-11-04T00:00:00.000Z'],
      ]);
      expect(spans(bucketsOf(T('2026-11-02T03:00:00'), T('2026-11-02T05:00:00'), 'day'))).to.deep.equal([
        ['2026-11-02T03:00:00.000Z', '2026-11-02T05:00:00.000Z'],
      ]);
    });

    it('weeks start on Monday 00:00 UTC, the first and last cut to the window', () => {
      // 2026-11-01 is a Sunday: its week ends the next day.
      expect(spans(bucketsOf(T('2026-11-01T10:00:00'), T('2026-11-18T07:00:00'), 'week'))).to.deep.equal([
        ['2026-11-01T10:00:00.000Z', '2026-11-02T00:00:00.000Z'],
        ['2026-11-02T00:00:00.000Z', '2026-11-09T00:00:00.000Z'],
        ['2026-11-09T00:00:00.000Z', '2026-11-16T00:00:00.000Z'],
        ['2026-11-16T00:00:00.000Z', '2026-11-18T07:00:00.000Z'],
      ]);
      // From a Monday: whole weeks.
      expect(spans(bucketsOf(T('2026-11-02T00:00:00'), T('2026-11-16T00:00:00'), 'week'))).to.deep.equal([
        ['2026-11-02T00:00:00.000Z', '2026-11-09T00:00:00.000Z'],
        ['2026-11-09T00:00:00.000Z', '2026-11-16T00:00:00.000Z'],
      ]);
      // From a Wednesday afternoon to the next Tuesday: cut at the Monday between.
      expect(spans(bucketsOf(T('2026-11-04T15:00:00'), T('2026-11-10T01:00:00'), 'week'))).to.deep.equal([
        ['2026-11-04T15:00:00.000Z', '2026-11-09T00:00:00.000Z'],
        ['2026-11-09T00:00:00.000Z', '2026-11-10T01:00:00.000Z'],
      ]);
      // Across a year end: 2026-12-28 and 2027-01-04 are Mondays.
      expect(spans(bucketsOf(T('2026-12-30T00:00:00'), T('2027-01-05T00:00:00'), 'week'))).to.deep.equal([
        ['2026-12-30T00:00:00.000Z', '2027-01-04T00:00:00.000Z'],
        ['2027-01-04T00:00:00.000Z', '2027-01-05T00:00:00.000Z'],
      ]);
    });

    it('every week boundary is a Monday at midnight UTC, whatever day the window starts', () => {
      for (let day = 0; day < 7; day++) {
        const start = T('2026-11-02T05:00:00') + day * DAY;
        const buckets = bucketsOf(start, start + 30 * DAY, 'week');
        expect(buckets[0]!.from).to.equal(start);
        for (const b of buckets.slice(1)) {
          expect(new Date(b.from).getUTCDay(), new Date(b.from).toISOString()).to.equal(1);
          expect(b.from % DAY).to.equal(0);
        }
        for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.from).to.equal(buckets[i - 1]!.to);
        expect(buckets.at(-1)!.to).to.equal(start + 30 * DAY);
      }
    });

    it('months: calendar months in UTC (28, 29, 30, 31 days), across a year end, cut to the window', () => {
      expect(spans(bucketsOf(T('2027-12-15T06:00:00'), T('2028-03-10T00:00:00'), 'month'))).to.deep.equal([
        ['2027-12-15T06:00:00.000Z', '2028-01-01T00:00:00.000Z'],
        ['2028-01-01T00:00:00.000Z', '2028-02-01T00:00:00.000Z'],
        ['2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z'],
        ['2028-03-01T00:00:00.000Z', '2028-03-10T00:00:00.000Z'],
      ]);
      const [feb] = bucketsOf(T('2028-02-01T00:00:00'), T('2028-03-01T00:00:00'), 'month');
      expect((feb!.to - feb!.from) / DAY).to.equal(29);
      const [feb27] = bucketsOf(T('2027-02-01T00:00:00'), T('2027-03-01T00:00:00'), 'month');
      expect((feb27!.to - feb27!.from) / DAY).to.equal(28);
    });

    it('an empty window has no buckets, and every bucket starts empty', () => {
      for (const group of GROUPS) {
        expect(bucketsOf(T('2026-11-02T10:00:00'), T('2026-11-02T10:00:00'), group)).to.deep.equal([]);
        for (const b of bucketsOf(T('2026-11-02T10:00:00'), T('2026-12-02T10:00:00'), group)) expect(b.counts).to.deep.equal({});
      }
    });
  });

  describe('bucketCount', () => {
    const windows: Array<[string, string]> = [
      ['2026-11-02T09:40:00', '2026-11-02T11:05:00'],
      ['2026-11-01T22:00:00', '2026-11-04T06:00:00'],
      ['2026-11-02T00:00:00', '2026-11-16T00:00:00'],
      ['2026-11-04T15:30:00', '2026-11-10T00:00:01'],
      ['2027-12-15T06:00:00', '2028-03-10T00:00:00'],
      ['2026-11-01T00:00:00', '2026-12-01T00:00:00'],
      ['2026-01-01T00:00:00', '2027-01-01T00:00:00'],
    ];
    /** The buckets of a window as Statistics rounds it (whole hours). */
    const made = (from: number, to: number, group: Group) => bucketsOf(Math.floor(from / HOUR) * HOUR, Math.ceil(to / HOUR) * HOUR, group).length;

    it('is exact for every grouping, on the window rounded to whole hours', () => {
      expect(bucketCount(T('2026-11-02T09:40:00'), T('2026-11-02T11:05:00'), 'hour')).to.equal(3);
      expect(bucketCount(T('2026-11-01T22:00:00'), T('2026-11-04T06:00:00'), 'day')).to.equal(4);
      expect(bucketCount(T('2026-11-02T09:00:00'), T('2026-11-02T10:00:00'), 'week')).to.equal(1);
      expect(bucketCount(T('2026-11-01T00:00:00'), T('2026-12-01T00:00:00'), 'month')).to.equal(1);
      for (const [from, to] of windows) {
        for (const group of GROUPS) {
          expect(bucketCount(T(from), T(to), group), `${group} ${from}..${to}`).to.equal(made(T(from), T(to), group));
        }
      }
    });
  });

  describe('Statistics on counter rows', () => {
    let dir: string;
    let store: Store;
    let stats: Statistics;

    /**
     * Events of account `acc` (2026-11-01 is a Sunday):
     *  e0 11-01 10:00 example.com→gmail.com  [welcome]        r
     *  e1 11-01 23:30 example.com→gmail.com  [welcome]        r
     *  e2 11-02 00:10 example.com→yahoo.com  []               r
     *  e3 11-02 10:15 example.net→gmail.com  [promo]          r
     *  e4 11-03 12:00 example.com→gmail.com  [welcome,promo]  d (1 s to gmail.com)
     *  e5 11-04 05:59 example.com→gmail.com  [promo]          r
     *  e6 11-04 06:00 example.net→yahoo.com  [welcome]        r
     *  e7 12-01 00:00 example.com→gmail.com  []               r, and d (3 s)
     * and one of account `other`, at 11-02 10:00, that must never show.
     */
    const EVENTS: Array<{ account?: string; at: string; sender: string; recipient: string; tags: string[]; delta: Counts }> = [
      { at: '2026-11-01T10:00:00', sender: 'example.com', recipient: 'gmail.com', tags: ['welcome'], delta: { r: 1 } },
      { at: '2026-11-01T23:30:00', sender: 'example.com', recipient: 'gmail.com', tags: ['welcome'], delta: { r: 1 } },
      { at: '2026-11-02T00:10:00', sender: 'example.com', recipient: 'yahoo.com', tags: [], delta: { r: 1 } },
      { at: '2026-11-02T10:15:00', sender: 'example.net', recipient: 'gmail.com', tags: ['promo'], delta: { r: 1 } },
      {
        at: '2026-11-03T12:00:00',
        sender: 'example.com',
        recipient: 'gmail.com',
        tags: ['welcome', 'promo'],
        delta: { d: 1, dt: { 'gmail.com': { ms: 1000, n: 1 } } },
      },
      { at: '2026-11-04T05:59:00', sender: 'example.com', recipient: 'gmail.com', tags: ['promo'], delta: { r: 1 } },
      { at: '2026-11-04T06:00:00', sender: 'example.net', recipient: 'yahoo.com', tags: ['welcome'], delta: { r: 1 } },
      { at: '2026-12-01T00:00:00', sender: 'example.com', recipient: 'gmail.com', tags: [], delta: { r: 1 } },
      { at: '2026-12-01T00:00:00', sender: 'example.com', recipient: 'gmail.com', tags: [], delta: { d: 1, dt: { 'gmail.com': { ms: 3000, n: 1 } } } },
      { account: 'other', at: '2026-11-02T10:00:00', sender: 'other.example', recipient: 'gmail.com', tags: ['welcome'], delta: { r: 5 } },
    ];

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'postilion-stats-'));
      const counters = new CountersRepo();
      store = await Store.open(dir, { journal: counters });
      stats = new Statistics(counters);
      for (const e of EVENTS) {
        await store.commit(
          counterAdds({ accountId: e.account ?? 'acc', at: T(e.at), senderDomain: e.sender, recipientDomain: e.recipient, tags: e.tags }, e.delta),
        );
      }
    });
    after(async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });

    /** The counts (and, with series 'times', the delivery times) of a window; the counts carry no `dt` but from the finest rows. */
    function query(
      from: string,
      to: string,
      group: Group,
      filters: Partial<Pick<StatsQuery, 'senderDomains' | 'recipientDomains' | 'tags' | 'series'>> = {},
    ): Promise<Bucket[]> {
      return stats.buckets({
        accountId: 'acc',
        series: 'counts',
        fromMs: T(from),
        toMs: T(to),
        group,
        senderDomains: null,
        recipientDomains: null,
        tags: null,
        ...filters,
      });
    }

    /** Each bucket as [from, counts]. */
    const table = (buckets: Bucket[]) => buckets.map((b) => [new Date(b.from).toISOString().slice(0, 16), b.counts]);

    function total(buckets: Bucket[]): Counts {
      const out: Record<string, number> = {};
      for (const b of buckets) for (const [k, v] of Object.entries(b.counts)) if (typeof v === 'number') out[k] = (out[k] ?? 0) + v;
      return out;
    }

    it('hours: the window rounded out to whole hours, each event in its hour', async () => {
      const buckets = await query('2026-11-02T09:40:00', '2026-11-02T11:05:00', 'hour');
      expect(table(buckets)).to.deep.equal([
        ['2026-11-02T09:00', {}],
        ['2026-11-02T10:00', { r: 1 }],
        ['2026-11-02T11:00', {}],
      ]);
      expect(buckets.at(-1)!.to).to.equal(T('2026-11-02T12:00:00'));
    });

    it("days: partial days at the ends count only their own hours (not the whole day's row), whole days between", async () => {
      // The 11-01 row holds e0 (10:00), outside the window; the 11-04 row holds e6 (06:00), at the excluded end.
      const buckets = await query('2026-11-01T22:00:00', '2026-11-04T06:00:00', 'day');
      expect(table(buckets)).to.deep.equal([
        ['2026-11-01T22:00', { r: 1 }],
        ['2026-11-02T00:00', { r: 2 }],
        ['2026-11-03T00:00', { d: 1 }],
        ['2026-11-04T00:00', { r: 1 }],
      ]);
    });

    it('the start rounds down and the end rounds up to the hour', async () => {
      // 23:59 → 23:00 (e1 at 23:30 is in), 05:01 → 06:00 (e5 at 05:59 is in, e6 at 06:00 is not): e1, e2, e3, e5 and e4's delivery.
      const buckets = await query('2026-11-01T23:59:00', '2026-11-04T05:01:00', 'day');
      expect(buckets[0]!.from).to.equal(T('2026-11-01T23:00:00'));
      expect(buckets.at(-1)!.to).to.equal(T('2026-11-04T06:00:00'));
      expect(total(buckets)).to.deep.equal({ r: 4, d: 1 });
    });

    it('weeks start on Monday', async () => {
      const buckets = await query('2026-11-01T00:00:00', '2026-11-16T00:00:00', 'week');
      expect(table(buckets)).to.deep.equal([
        ['2026-11-01T00:00', { r: 2 }],
        ['2026-11-02T00:00', { r: 4, d: 1 }],
        ['2026-11-09T00:00', {}],
      ]);
    });

    it('months: calendar months, cut to the window', async () => {
      const buckets = await query('2026-10-20T00:00:00', '2026-12-01T01:00:00', 'month');
      expect(table(buckets)).to.deep.equal([
        ['2026-10-20T00:00', {}],
        ['2026-11-01T00:00', { r: 6, d: 1 }],
        ['2026-12-01T00:00', { r: 1, d: 1 }],
      ]);
    });

    it('gives the same totals whatever the grouping', async () => {
      for (const [from, to] of [
        ['2026-10-20T00:00:00', '2026-12-03T00:00:00'],
        ['2026-11-01T22:30:00', '2026-11-04T05:30:00'],
        ['2026-11-02T10:00:00', '2026-11-02T10:30:00'],
      ] as const) {
        const totals = await Promise.all(GROUPS.map(async (group) => total(await query(from, to, group))));
        for (const t of totals.slice(1)) expect(t, `${from}..${to}`).to.deep.equal(totals[0]);
      }
      expect(total(await query('2026-10-20T00:00:00', '2026-12-03T00:00:00', 'week'))).to.deep.equal({ r: 7, d: 2 });
    });

    it('filters on sender domains (one rollup range per domain)', async () => {
      const window = ['2026-10-20T00:00:00', '2026-12-03T00:00:00'] as const;
      expect(total(await query(...window, 'month', { senderDomains: ['example.net'] }))).to.deep.equal({ r: 2 });
      expect(total(await query(...window, 'day', { senderDomains: ['example.com'] }))).to.deep.equal({ r: 5, d: 2 });
      expect(total(await query(...window, 'day', { senderDomains: ['example.com', 'example.net', 'example.com'] }))).to.deep.equal({ r: 7, d: 2 });
      expect(total(await query(...window, 'day', { senderDomains: ['nobody.example'] }))).to.deep.equal({});
    });

    it('filters on recipient domains', async () => {
      const buckets = await query('2026-11-01T22:00:00', '2026-11-05T00:00:00', 'day', { recipientDomains: ['yahoo.com'] });
      expect(table(buckets)).to.deep.equal([
        ['2026-11-01T22:00', {}],
        ['2026-11-02T00:00', { r: 1 }],
        ['2026-11-03T00:00', {}],
        ['2026-11-04T00:00', { r: 1 }],
      ]);
    });

    it('filters on one tag', async () => {
      const buckets = await query('2026-11-01T00:00:00', '2026-11-05T00:00:00', 'day', { tags: ['welcome'] });
      expect(table(buckets)).to.deep.equal([
        ['2026-11-01T00:00', { r: 2 }],
        ['2026-11-02T00:00', {}],
        ['2026-11-03T00:00', { d: 1 }],
        ['2026-11-04T00:00', { r: 1 }],
      ]);
    });

    it('filters on several tags, counting a message with more than one of them once', async () => {
      const buckets = await query('2026-11-01T00:00:00', '2026-11-05T00:00:00', 'day', { tags: ['welcome', 'promo'] });
      expect(table(buckets)).to.deep.equal([
        ['2026-11-01T00:00', { r: 2 }],
        ['2026-11-02T00:00', { r: 1 }],
        ['2026-11-03T00:00', { d: 1 }],
        ['2026-11-04T00:00', { r: 2 }],
      ]);
    });

    it('combines filters through the finest rows: sender and tag, recipient and tag, all three', async () => {
      const window = ['2026-10-20T00:00:00', '2026-12-03T00:00:00'] as const;
      expect(total(await query(...window, 'week', { senderDomains: ['example.com'], tags: ['promo'] }))).to.deep.equal({ r: 1, d: 1 });
      // No sender filter: every sender domain of the account, not `other`'s.
      expect(total(await query(...window, 'week', { recipientDomains: ['gmail.com'], tags: ['welcome'] }))).to.deep.equal({ r: 2, d: 1 });
      expect(total(await query(...window, 'week', { senderDomains: ['example.net'], recipientDomains: ['yahoo.com'], tags: ['welcome'] }))).to.deep.equal({
        r: 1,
      });
      expect(total(await query(...window, 'week', { senderDomains: ['example.com'], recipientDomains: ['yahoo.com'] }))).to.deep.equal({ r: 1 });
      // The finest rows are hourly: a partial hour window still counts whole hours.
      const hours = await query('2026-11-04T05:30:00', '2026-11-04T06:30:00', 'hour', {
        senderDomains: ['example.com', 'example.net'],
        tags: ['promo', 'welcome'],
      });
      expect(table(hours)).to.deep.equal([
        ['2026-11-04T05:00', { r: 1 }],
        ['2026-11-04T06:00', { r: 1 }],
      ]);
    });

    it('reads the delivery times as their own series, by recipient domain, for every filter shape', async () => {
      const window = ['2026-10-20T00:00:00', '2026-12-03T00:00:00'] as const;
      const times = await query(...window, 'month', { series: 'times' });
      expect(table(times)).to.deep.equal([
        ['2026-10-20T00:00', {}],
        ['2026-11-01T00:00', { dt: { 'gmail.com': { ms: 1000, n: 1 } } }],
        ['2026-12-01T00:00', { dt: { 'gmail.com': { ms: 3000, n: 1 } } }],
      ]);
      const shapes: Array<Partial<StatsQuery>> = [
        { senderDomains: ['example.com'] },
        { recipientDomains: ['gmail.com'] },
        { tags: ['welcome'] },
        { tags: ['welcome', 'promo'] },
        { senderDomains: ['example.com'], recipientDomains: ['gmail.com'] },
        { senderDomains: ['example.com'], tags: ['promo'] },
        { recipientDomains: ['gmail.com'], tags: ['promo'] },
        { senderDomains: ['example.com'], recipientDomains: ['gmail.com'], tags: ['promo'] },
      ];
      for (const shape of shapes) {
        const dt = (await query(...window, 'month', { ...shape, series: 'times' })).map((b) => b.counts.dt ?? null);
        expect(dt, JSON.stringify(shape)).to.deep.equal([null, { 'gmail.com': { ms: 1000, n: 1 } }, shape.tags ? null : { 'gmail.com': { ms: 3000, n: 1 } }]);
      }
    });

    it("several tags over many tag sets: the tags' rows minus the sets holding two or more, each message once", async () => {
      // Account `ie`: five tag sets hold x or y, one of them both: reading t|x, t|y and g|x,y (−1)
      // is fewer rows than the five sets, and must give the same counts.
      const events: Array<[string[], Counts]> = [
        [['x', 'a1'], { r: 1 }],
        [['x', 'a2'], { r: 1, d: 1, dt: { 'gmail.com': { ms: 10, n: 1 } } }],
        [['x', 'a3'], { r: 1 }],
        [['y', 'a4'], { r: 1, b: 1, bc: { InvalidRecipient: 1 } }],
        [['x', 'y'], { r: 1, d: 1, dt: { 'gmail.com': { ms: 30, n: 1 } } }],
        [['x', 'y'], { r: 1, b: 1, bc: { InvalidRecipient: 1 } }],
        [['z'], { r: 1 }],
      ];
      for (const [tags, delta] of events) {
        await store.commit(
          counterAdds({ accountId: 'ie', at: T('2026-11-05T10:00:00'), senderDomain: 'example.com', recipientDomain: 'gmail.com', tags }, delta),
        );
      }
      const ask = (series: 'counts' | 'times', tags: string[]) =>
        stats.buckets({
          accountId: 'ie',
          series,
          fromMs: T('2026-11-05T00:00:00'),
          toMs: T('2026-11-06T00:00:00'),
          group: 'day',
          senderDomains: null,
          recipientDomains: null,
          tags,
        });
      expect((await ask('counts', ['x', 'y']))[0]!.counts).to.deep.equal({ r: 6, d: 2, b: 2, bc: { InvalidRecipient: 2 } });
      expect((await ask('times', ['x', 'y']))[0]!.counts).to.deep.equal({ dt: { 'gmail.com': { ms: 40, n: 2 } } });
      // The same through the finest rows (a sender domain given): the two plans agree.
      const fine = await stats.buckets({
        accountId: 'ie',
        series: 'counts',
        fromMs: T('2026-11-05T00:00:00'),
        toMs: T('2026-11-06T00:00:00'),
        group: 'day',
        senderDomains: ['example.com'],
        recipientDomains: ['gmail.com'],
        tags: ['x', 'y'],
      });
      expect(fine[0]!.counts).to.deep.include({ r: 6, d: 2, b: 2 });
    });

    it("finds the account's tag sets holding any of some tags", async () => {
      expect(await stats.tagSetsWithAny('acc', ['welcome'])).to.deep.equal(['promo,welcome', 'welcome']);
      expect(await stats.tagSetsWithAny('acc', ['promo', 'nothing'])).to.deep.equal(['promo', 'promo,welcome']);
      expect(await stats.tagSetsWithAny('acc', ['nothing'])).to.deep.equal([]);
      expect(await stats.tagSetsWithAny('other', ['promo'])).to.deep.equal([]);
    });

    it('lists the sender domains an account has counts for', async () => {
      expect(await stats.senderDomains('acc')).to.deep.equal(['example.com', 'example.net']);
      expect(await stats.senderDomains('other')).to.deep.equal(['other.example']);
      expect(await stats.senderDomains('nobody')).to.deep.equal([]);
    });

    it("never shows another account's counts", async () => {
      const buckets = await query('2026-11-02T10:00:00', '2026-11-02T11:00:00', 'hour');
      expect(table(buckets)).to.deep.equal([['2026-11-02T10:00', { r: 1 }]]);
      const theirs = await stats.buckets({
        accountId: 'other',
        series: 'counts',
        fromMs: T('2026-11-02T00:00:00'),
        toMs: T('2026-11-03T00:00:00'),
        group: 'day',
        senderDomains: null,
        recipientDomains: null,
        tags: null,
      });
      expect(table(theirs)).to.deep.equal([['2026-11-02T00:00', { r: 5 }]]);
    });

    it('returns every bucket of the window, empty ones too, and none for an empty window', async () => {
      const buckets = await query('2026-11-20T00:00:00', '2026-11-23T00:00:00', 'day');
      expect(table(buckets)).to.deep.equal([
        ['2026-11-20T00:00', {}],
        ['2026-11-21T00:00', {}],
        ['2026-11-22T00:00', {}],
      ]);
      expect(await query('2026-11-02T10:00:00', '2026-11-02T10:00:00', 'hour')).to.deep.equal([]);
      // A window inside one hour rounds out to that hour.
      expect(table(await query('2026-11-02T10:20:00', '2026-11-02T10:21:00', 'day'))).to.deep.equal([['2026-11-02T10:00', { r: 1 }]]);
    });
  });
});
