import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openData, type Data } from '../../../src/assemblies/core.ts';
import { openClusterDb } from '../../../src/cluster/database.ts';
import { validateConfig } from '../../../src/config/load.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

/**
 * Relaxed puts (an API key's last-used time) are written about a second after they are made: a
 * change another node made to the record meanwhile (an allow list narrowed, the key deleted) is
 * kept, never undone by this node's older copy.
 */
describe('cluster: relaxed puts and other nodes', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let dir: string;
  let a: Data;
  let b: Data;

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-relaxed-'));
    const config = (node: string) =>
      validateConfig(
        {
          data: { dir: join(dir, node) },
          keys: { dir: join(dir, 'keys') },
          cluster: { database_url: postgres.url, node_id: node, key_file: join(dir, 'cluster.key') },
        },
        'test',
      );
    await (await openClusterDb(config('init'), { createKey: true })).close();
    a = await openData(config('node-a'));
    b = await openData(config('node-b'));
  });
  after(async () => {
    await a?.store.close();
    await b?.store.close();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  type Key = { allow: string[]; lastUsedAt: string | null };

  it('is read back at once on its node, and written a moment later when no one changed the record', async () => {
    const v0: Key = { allow: [], lastUsedAt: null };
    await a.store.commit([{ type: 'put', family: 'apiKeys', key: 'k1', value: v0 }]);
    await a.store.putRelaxed('apiKeys', 'k1', { ...v0, lastUsedAt: 't1' }, v0);
    expect(await a.store.get('apiKeys', 'k1')).to.deep.equal({ allow: [], lastUsedAt: 't1' });
    await a.cluster!.kv.flushRelaxed();
    expect(await b.store.families.apiKeys.get('k1')).to.deep.equal({ allow: [], lastUsedAt: 't1' });
  });

  it('is lost when another node changed the record since it was read: the change stays, on both nodes', async () => {
    const v0: Key = { allow: [], lastUsedAt: null };
    await a.store.commit([{ type: 'put', family: 'apiKeys', key: 'k2', value: v0 }]);
    await a.store.putRelaxed('apiKeys', 'k2', { ...v0, lastUsedAt: 't1' }, v0);
    const narrowed: Key = { allow: ['10.0.0.0/8'], lastUsedAt: null };
    await b.store.commit([{ type: 'put', family: 'apiKeys', key: 'k2', value: narrowed }]);
    // Before node A heard of it, and after.
    expect(await a.store.families.apiKeys.get('k2')).to.deep.equal(narrowed);
    await a.cluster!.kv.flushRelaxed();
    expect(await a.store.families.apiKeys.get('k2')).to.deep.equal(narrowed);
    expect(await b.store.families.apiKeys.get('k2')).to.deep.equal(narrowed);
  });

  it('never makes again a record another node deleted', async () => {
    const v0: Key = { allow: [], lastUsedAt: null };
    await a.store.commit([{ type: 'put', family: 'apiKeys', key: 'k3', value: v0 }]);
    await a.store.putRelaxed('apiKeys', 'k3', { ...v0, lastUsedAt: 't1' }, v0);
    await b.store.commit([{ type: 'del', family: 'apiKeys', key: 'k3' }]);
    expect(await a.store.families.apiKeys.get('k3')).to.equal(undefined);
    await a.cluster!.kv.flushRelaxed();
    expect(await b.store.families.apiKeys.get('k3')).to.equal(undefined);
  });

  it('made twice before it is written, lands over the record the first was made from', async () => {
    const v0: Key = { allow: [], lastUsedAt: null };
    await a.store.commit([{ type: 'put', family: 'apiKeys', key: 'k4', value: v0 }]);
    const v1 = { ...v0, lastUsedAt: 't1' };
    await a.store.putRelaxed('apiKeys', 'k4', v1, v0);
    await a.store.putRelaxed('apiKeys', 'k4', { ...v1, lastUsedAt: 't2' }, await a.store.get('apiKeys', 'k4'));
    await a.cluster!.kv.flushRelaxed();
    expect(await b.store.families.apiKeys.get('k4')).to.deep.equal({ allow: [], lastUsedAt: 't2' });
  });
});
