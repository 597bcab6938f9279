import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { entryKey, JobIndex } from '../../../src/store/job-index.ts';
import { JobsRepo, newJob } from '../../../src/store/jobs-repo.ts';
import type { JobRecord } from '../../../src/store/records.ts';
import { Store } from '../../../src/store/store.ts';

const AT = '2026-11-26T12:00:00.000Z';
const job = (id: string, fields: Partial<JobRecord> = {}): JobRecord => ({
  v: 1,
  id,
  kind: 'webhook',
  accountId: 'acc',
  targetId: 'wh',
  eventId: `ev-${id}`,
  state: 'pending',
  attempts: 0,
  dueAt: AT,
  createdAt: AT,
  updatedAt: AT,
  lastAttempt: null,
  ...fields,
});
/** The due-time entry of a job due at AT. */
const key = (id: string) => entryKey('webhook', id, Date.parse(AT));
const keys = (ids: string[]) => ids.map(key);

describe('JobsRepo: jobs just created are handed to their first read', () => {
  let dir: string;
  let store: Store;
  let repo: JobsRepo;
  let reads: string[];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-jobs-'));
    store = await Store.open(dir);
    repo = new JobsRepo(store, new JobIndex(store));
    reads = [];
    const getMany = store.getMany.bind(store);
    Object.assign(store, { getMany: (family: never, keys: readonly string[]) => (reads.push(...keys), getMany(family, keys)) });
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves a created job from memory until the engine has taken it, then from the store, in the order asked', async () => {
    const jobs = [job('a'), job('b')];
    await store.commit(jobs.flatMap((j) => repo.create(j)));
    repo.created(jobs);
    await store.commit(repo.create(job('c')));
    // c from its due-time entry; x has none, and no record under its id either.
    expect((await repo.getMany(['c', 'a', 'b', 'x'], keys(['c', 'a', 'b', 'x']))).map((j) => j?.id)).to.deep.equal(['c', 'a', 'b', undefined]);
    expect(reads).to.deep.equal([key('c'), key('x'), 'x']);
    // Read and left on the index (no room for it yet): still kept.
    reads.length = 0;
    expect((await repo.getMany(['a'], keys(['a']))).map((j) => j?.id)).to.deep.equal(['a']);
    expect(reads).to.deep.equal([]);
    repo.taken(['a']);
    expect((await repo.getMany(['a', 'b'], keys(['a', 'b']))).map((j) => j?.id)).to.deep.equal(['a', 'b']);
    expect(reads).to.deep.equal([key('a')]);
  });

  it('a job changed after its creation is read from the store, never the kept copy', async () => {
    const created = job('a');
    await store.commit(repo.create(created));
    repo.created([created]);
    await store.commit(repo.change(created, { ...created, state: 'held' }));
    const [read] = await repo.getMany(['a'], keys(['a']));
    expect(read?.state).to.equal('held');
    expect(reads).to.deep.equal([key('a'), 'a']);
    const deleted = job('d');
    await store.commit(repo.create(deleted));
    repo.created([deleted]);
    await store.commit(repo.change(deleted, null));
    expect(await repo.getMany(['d'], keys(['d']))).to.deep.equal([undefined]);
  });
});

describe('JobsRepo: a new job is kept in its due-time entry', () => {
  let dir: string;
  let store: Store;
  let repo: JobsRepo;
  const all = async (family: 'jobs' | 'schedule') => await store.families[family].iterator().all();
  const listed = async () => {
    const out: JobRecord[] = [];
    for await (const j of repo.list('webhook')) out.push(j);
    return out;
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-jobs-'));
    store = await Store.open(dir);
    repo = new JobsRepo(store, new JobIndex(store));
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is written once, as its entry, and ended by removing that entry alone', async () => {
    const created = job('a');
    const ops = repo.create(created);
    expect(ops.map((op) => `${op.type} ${op.family}`)).to.deep.equal(['put schedule']);
    await store.commit(ops);
    expect(await all('jobs')).to.deep.equal([]);
    const [read] = await repo.getMany(['a'], keys(['a']));
    expect(read).to.deep.include({ id: 'a', state: 'pending', inEntry: true });
    expect((await listed()).map((j) => j.id)).to.deep.equal(['a']);
    const done = repo.change(read!, null);
    expect(done.map((op) => `${op.type} ${op.family}`)).to.deep.equal(['del schedule']);
    await store.commit(done);
    expect(await all('schedule')).to.deep.equal([]);
    expect(await listed()).to.deep.equal([]);
  });

  it('moves under its id when it changes: retried, its new entry points at it; then deleted from there', async () => {
    await store.commit(repo.create(job('a')));
    const [read] = await repo.getMany(['a'], keys(['a']));
    const later = new Date(Date.parse(AT) + 60_000).toISOString();
    await store.commit(repo.change(read!, { ...read!, attempts: 1, dueAt: later }));
    const [id, stored] = ((await all('jobs')) as Array<[string, JobRecord]>)[0]!;
    expect(id).to.equal('a');
    expect(stored).to.include({ attempts: 1, dueAt: later }).and.not.have.property('inEntry');
    expect(await all('schedule')).to.deep.equal([[entryKey('webhook', 'a', Date.parse(later)), 'a']]);
    const [again] = await repo.getMany(['a'], [entryKey('webhook', 'a', Date.parse(later))]);
    expect(again).to.deep.equal(stored);
    expect(await listed()).to.deep.equal([stored]);
    await store.commit(repo.change(again!, null));
    expect(await all('jobs')).to.deep.equal([]);
    expect(await all('schedule')).to.deep.equal([]);
  });

  it('reads a job stored by schema 3 (a record under its id, an entry pointing at it), and deletes both', async () => {
    const old = job('o');
    await store.commit([
      { type: 'put', family: 'jobs', key: 'o', value: old },
      { type: 'put', family: 'schedule', key: key('o'), value: 'o' },
    ]);
    const [read] = await repo.getMany(['o'], keys(['o']));
    expect(read).to.deep.equal(old);
    expect(await listed()).to.deep.equal([old]);
    await store.commit(repo.change(read!, null));
    expect(await all('jobs')).to.deep.equal([]);
    expect(await all('schedule')).to.deep.equal([]);
  });
});

describe('newJob: the one builder of a new HTTP job', () => {
  const now = Date.parse(AT);

  it('builds a webhook delivery of one event and a route POST with its recipients, pending and due now', () => {
    const webhook = newJob('webhook', { accountId: 'acc', targetId: 'wh', eventId: 'ev1' }, now);
    expect(Object.keys(webhook)).to.deep.equal([
      'v',
      'id',
      'kind',
      'accountId',
      'targetId',
      'eventId',
      'state',
      'attempts',
      'dueAt',
      'createdAt',
      'updatedAt',
      'lastAttempt',
    ]);
    expect(webhook).to.deep.include({
      v: 1,
      kind: 'webhook',
      accountId: 'acc',
      targetId: 'wh',
      eventId: 'ev1',
      state: 'pending',
      attempts: 0,
      dueAt: AT,
      createdAt: AT,
      updatedAt: AT,
      lastAttempt: null,
    });
    const route = newJob('route', { accountId: 'acc', targetId: 'rt', eventId: 'in1', recipients: ['a@example.com'] }, now);
    expect(Object.keys(route)).to.deep.equal([
      'v',
      'id',
      'kind',
      'accountId',
      'targetId',
      'eventId',
      'recipients',
      'state',
      'attempts',
      'dueAt',
      'createdAt',
      'updatedAt',
      'lastAttempt',
    ]);
    expect(route).to.deep.include({ kind: 'route', targetId: 'rt', eventId: 'in1', recipients: ['a@example.com'], state: 'pending', dueAt: AT });
  });

  it('gives time-ordered ids (UUIDv7 at `now`), distinct within one millisecond', () => {
    const ids = Array.from({ length: 3 }, () => newJob('webhook', { accountId: 'acc', targetId: 'wh', eventId: 'ev' }, now).id);
    expect(new Set(ids).size).to.equal(3);
    expect([...ids].sort()).to.deep.equal(ids);
    const later = newJob('webhook', { accountId: 'acc', targetId: 'wh', eventId: 'ev' }, now + 1000).id;
    expect(later > ids[2]!).to.equal(true);
  });

  it('is stored by create and read back as built', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'postilion-new-job-'));
    const store = await Store.open(dir);
    try {
      const repo = new JobsRepo(store, new JobIndex(store));
      const job = newJob('route', { accountId: 'acc', targetId: 'rt', eventId: 'in1', recipients: ['a@example.com', 'b@example.com'] }, now);
      await store.commit(repo.create(job));
      const [read] = await repo.getMany([job.id], [entryKey('route', job.id, now)]);
      expect(read).to.deep.equal({ ...job, inEntry: true });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
