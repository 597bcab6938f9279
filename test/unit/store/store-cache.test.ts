import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../../src/store/store.ts';

describe('Store read cache (accounts, API keys, domains)', () => {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-cache-'));
    store = await Store.open(dir);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves a cached record until a commit changes or deletes it', async () => {
    await store.commit([{ type: 'put', family: 'apiKeysByHash', key: 'h', value: 'k1' }]);
    expect(await store.get('apiKeysByHash', 'h')).to.equal('k1');
    await store.commit([{ type: 'put', family: 'apiKeysByHash', key: 'h', value: 'k2' }]);
    expect(await store.get('apiKeysByHash', 'h')).to.equal('k2');
    await store.commit([{ type: 'del', family: 'apiKeysByHash', key: 'h' }]);
    expect(await store.get('apiKeysByHash', 'h')).to.equal(undefined);
  });

  it('does not keep a value read while a write of the same key was landing', async () => {
    await store.commit([{ type: 'put', family: 'accounts', key: 'a', value: { name: 'old' } }]);
    const writing = store.commit([{ type: 'put', family: 'accounts', key: 'a', value: { name: 'new' } }]);
    const racing = store.get('accounts', 'a');
    await Promise.all([writing, racing]);
    expect(await store.get('accounts', 'a')).to.deep.equal({ name: 'new' });
  });

  it('sees relaxed writes (last-used times) at once', async () => {
    await store.commit([{ type: 'put', family: 'apiKeys', key: 'k', value: { lastUsedAt: null } }]);
    expect(await store.get('apiKeys', 'k')).to.deep.equal({ lastUsedAt: null });
    await store.putRelaxed('apiKeys', 'k', { lastUsedAt: 'now' });
    expect(await store.get('apiKeys', 'k')).to.deep.equal({ lastUsedAt: 'now' });
  });

  it('hands out frozen records, so no caller can change the cached copy', async () => {
    await store.commit([{ type: 'put', family: 'domains', key: 'd', value: { dns: { valid: true } } }]);
    await store.get('domains', 'd');
    const cached = (await store.get<{ dns: { valid: boolean } }>('domains', 'd'))!;
    expect(() => {
      cached.dns.valid = false;
    }).to.throw(TypeError);
  });
});
