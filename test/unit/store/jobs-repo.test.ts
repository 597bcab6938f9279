import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobIndex } from '../../../src/store/job-index.ts';
import { JobsRepo } from '../../../src/store/jobs-repo.ts';
import type { JobRecord } from '../../../src/store/records.ts';
import { Store } from '../../../src/store/store.ts';

const AT = '2026-11-26T12:00:00.000Z';
const job = (id: string, fields: Partial<JobRecord> = {}): JobRecord => ({
  v: 1, id, kind: 'webhook', accountId: 'acc', targetId: 'wh', eventId: `ev-${id}`, state: 'pending',
  attempts: 0, dueAt: AT, createdAt: AT, updatedAt: AT, lastAttempt: null, ...fields,
});

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
    expect((await repo.getMany(['c', 'a', 'b', 'x'])).map((j) => j?.id)).to.deep.equal(['c', 'a', 'b', undefined]);
    expect(reads).to.deep.equal(['c', 'x']);
    // Read and left on the index (no room for it yet): still kept.
    reads.length = 0;
    expect((await repo.getMany(['a'])).map((j) => j?.id)).to.deep.equal(['a']);
    expect(reads).to.deep.equal([]);
    repo.taken(['a']);
    expect((await repo.getMany(['a', 'b'])).map((j) => j?.id)).to.deep.equal(['a', 'b']);
    expect(reads).to.deep.equal(['a']);
  });

  it('a job changed after its creation is read from the store, never the kept copy', async () => {
    const created = job('a');
    await store.commit(repo.create(created));
    repo.created([created]);
    await store.commit(repo.change(created, { ...created, state: 'held' }));
    const [read] = await repo.getMany(['a']);
    expect(read?.state).to.equal('held');
    expect(reads).to.deep.equal(['a']);
    const deleted = job('d');
    await store.commit(repo.create(deleted));
    repo.created([deleted]);
    await store.commit(repo.change(deleted, null));
    expect(await repo.getMany(['d'])).to.deep.equal([undefined]);
  });
});
