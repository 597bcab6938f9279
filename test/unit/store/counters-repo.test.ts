import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CounterKey } from '../../../src/store/counter-keys.ts';
import { CountersRepo } from '../../../src/store/counters-repo.ts';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import type { Counts } from '../../../src/store/group-commit.ts';
import type { EventRecord } from '../../../src/store/records.ts';
import { Store, StoreWriteError } from '../../../src/store/store.ts';

const T = (s: string) => Date.parse(`${s}Z`);
const at = (key: Partial<CounterKey> & { at: number }): CounterKey => ({
  accountId: 'acc',
  senderDomain: 'example.com',
  recipientDomain: 'gmail.com',
  tags: [],
  ...key,
});
const event = (id: string): EventRecord => ({ v: 1, id, accountId: 'acc', type: 'message.reception', createdAt: '2026-11-03T09:00:00.000Z', data: {} });

describe('CountersRepo (the statistics counters, over a real store)', () => {
  let dir: string;
  let store: Store;
  let counters: CountersRepo;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-counters-repo-'));
    counters = new CountersRepo();
    store = await Store.open(dir, { journal: counters });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every row `rollup` gives, as [ISO hour or day, counts]. */
  async function rows(read: (into: (at: number, counts: Counts) => void) => Promise<void>): Promise<Array<[string, Counts]>> {
    const out: Array<[string, Counts]> = [];
    await read((time, counts) => out.push([new Date(time).toISOString().slice(0, 13), counts]));
    return out;
  }

  it('writes a count in the batch of the event it counts: both land, or neither', async () => {
    const events = new EventsRepo(store);
    await store.commit([...events.put(event('e1')), counters.count(at({ at: T('2026-11-03T09:10:00') }), { r: 1 })]);
    expect(await store.families.counterLog.keys().all()).to.have.length(1);
    store.injectFault(() => new Error('IO error: No space left on device'));
    const failed = await store
      .commit([...events.put(event('e2')), counters.count(at({ at: T('2026-11-03T09:20:00') }), { r: 1 })])
      .catch((err: unknown) => err);
    expect(failed).to.be.instanceOf(StoreWriteError);
    store.injectFault(null);
    await store.recover();
    expect(await store.families.events.keys().all()).to.have.length(1);
    expect(await store.families.counterLog.keys().all()).to.have.length(1);
    await counters.fold();
    expect(
      await rows((into) =>
        counters.rollup({ accountId: 'acc', series: 'counts', dimension: 'a', value: '' }, 'hour', T('2026-11-03T00:00:00'), T('2026-11-04T00:00:00'), into),
      ),
    ).to.deep.equal([['2026-11-03T09', { r: 1 }]]);
  });

  it('reads a rollup hourly or daily, in time order, only the rows starting in the window, each series apart', async () => {
    const key = { senderDomain: 'example.com', recipientDomain: 'gmail.com', tags: ['welcome'] };
    await store.commit([
      ...counters.adds(at({ ...key, at: T('2026-11-02T23:30:00') }), { r: 1 }),
      ...counters.adds(at({ ...key, at: T('2026-11-03T09:10:00') }), { r: 1 }),
      ...counters.adds(at({ ...key, at: T('2026-11-03T09:50:00') }), { d: 1, dt: { 'gmail.com': { ms: 2000, n: 1 } } }),
      ...counters.adds(at({ ...key, at: T('2026-11-04T00:00:00') }), { r: 1 }),
    ]);
    await counters.fold();
    const tag = { accountId: 'acc', series: 'counts' as const, dimension: 't' as const, value: 'welcome' };
    expect(await rows((into) => counters.rollup(tag, 'hour', T('2026-11-03T00:00:00'), T('2026-11-04T00:00:00'), into))).to.deep.equal([
      ['2026-11-03T09', { r: 1, d: 1 }],
    ]);
    expect(await rows((into) => counters.rollup(tag, 'day', T('2026-11-02T00:00:00'), T('2026-11-04T00:00:00'), into))).to.deep.equal([
      ['2026-11-02T00', { r: 1 }],
      ['2026-11-03T00', { r: 1, d: 1 }],
    ]);
    expect(await rows((into) => counters.rollup({ ...tag, series: 'times' }, 'day', T('2026-11-01T00:00:00'), T('2026-11-05T00:00:00'), into))).to.deep.equal([
      ['2026-11-03T00', { dt: { 'gmail.com': { ms: 2000, n: 1 } } }],
    ]);
    // An empty window, and another account's rows: nothing.
    expect(await rows((into) => counters.rollup(tag, 'hour', T('2026-11-03T09:00:00'), T('2026-11-03T09:00:00'), into))).to.deep.equal([]);
    expect(
      await rows((into) => counters.rollup({ ...tag, accountId: 'other' }, 'day', T('2026-11-01T00:00:00'), T('2026-11-05T00:00:00'), into)),
    ).to.deep.equal([]);
  });

  it('reads the finest rows of a sender domain, or of a sender and recipient domain, with their tag sets', async () => {
    await store.commit([
      ...counters.adds(at({ at: T('2026-11-03T09:10:00'), recipientDomain: 'gmail.com', tags: ['b', 'a|z'] }), { r: 1 }),
      ...counters.adds(at({ at: T('2026-11-03T10:10:00'), recipientDomain: 'yahoo.com', tags: [] }), { r: 2 }),
      ...counters.adds(at({ at: T('2026-11-03T11:10:00'), senderDomain: 'example.net', tags: [] }), { r: 4 }),
    ]);
    await counters.fold();
    const seen: Array<[string, string, Counts]> = [];
    const into = (time: number, set: string, counts: Counts) => seen.push([new Date(time).toISOString().slice(0, 13), set, counts]);
    await counters.finest('acc', 'example.com', T('2026-11-03T00:00:00'), T('2026-11-04T00:00:00'), into);
    expect(seen).to.deep.equal([
      ['2026-11-03T09', 'a%7Cz,b', { r: 1 }],
      ['2026-11-03T10', '', { r: 2 }],
    ]);
    seen.length = 0;
    await counters.finestTo('acc', 'example.com', 'yahoo.com', T('2026-11-03T00:00:00'), T('2026-11-04T00:00:00'), into);
    expect(seen).to.deep.equal([['2026-11-03T10', '', { r: 2 }]]);
    seen.length = 0;
    await counters.finest('acc', 'example.com', T('2026-11-03T10:00:00'), T('2026-11-03T10:00:00'), into);
    expect(seen).to.deep.equal([]);
  });

  it("lists an account's sender domains and tag sets from its index rows", async () => {
    await store.commit([
      ...counters.adds(at({ at: T('2026-11-03T09:10:00'), senderDomain: 'example.net', tags: ['promo', 'welcome'] }), { r: 1 }),
      ...counters.adds(at({ at: T('2026-11-03T09:10:00'), senderDomain: 'example.com', tags: ['welcome'] }), { r: 1 }),
      ...counters.adds(at({ at: T('2026-11-03T09:10:00'), accountId: 'other', senderDomain: 'other.example', tags: ['x'] }), { r: 1 }),
    ]);
    await counters.fold();
    expect(await counters.senderDomains('acc')).to.deep.equal(['example.com', 'example.net']);
    const sets: string[] = [];
    for await (const set of counters.tagSets('acc')) sets.push(set);
    expect(sets).to.deep.equal(['promo,welcome', 'welcome']);
    expect(await counters.senderDomains('nobody')).to.deep.equal([]);
  });

  it('clear deletes every row and what the log holds, and counting starts again from zero', async () => {
    await store.commit(counters.adds(at({ at: T('2026-11-03T09:10:00') }), { r: 1 }));
    await counters.fold();
    await store.commit(counters.adds(at({ at: T('2026-11-03T09:10:00') }), { r: 1 }));
    await counters.clear();
    expect(await store.families.counters.keys().all()).to.deep.equal([]);
    expect(await store.families.counterLog.keys().all()).to.deep.equal([]);
    await store.commit([counters.count(at({ at: T('2026-11-03T09:10:00') }), { r: 1 })]);
    await counters.fold();
    expect(await counters.senderDomains('acc')).to.deep.equal(['example.com']);
    expect(
      await rows((into) =>
        counters.rollup(
          { accountId: 'acc', series: 'counts', dimension: 's', value: 'example.com' },
          'hour',
          T('2026-11-03T00:00:00'),
          T('2026-11-04T00:00:00'),
          into,
        ),
      ),
    ).to.deep.equal([['2026-11-03T09', { r: 1 }]]);
  });

  it('refuses to read or fold before it is handed to a store', async () => {
    const loose = new CountersRepo();
    expect(await loose.fold().catch((err: unknown) => err)).to.be.instanceOf(Error);
    expect(await loose.senderDomains('acc').catch((err: unknown) => err)).to.be.instanceOf(Error);
    // Building ops needs no store.
    expect(loose.count(at({ at: T('2026-11-03T09:10:00') }), { r: 1 })).to.deep.equal({
      type: 'count',
      family: 'counters',
      key: 'acc|2026110309|example.com|gmail.com|',
      value: { r: 1 },
    });
  });
});
