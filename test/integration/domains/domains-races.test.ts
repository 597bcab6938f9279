import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { recordOf, startDomainBed, type DomainBed } from '../../helpers/domains.ts';

/** Delays the commits whose ops match, so that another request can run in between. */
function holdCommits(bed: DomainBed, matches: (ops: Array<{ type: string; family?: string; value?: unknown }>) => boolean, ms = 150) {
  const { store } = bed.server.daemon.core;
  const commit = store.commit.bind(store);
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  store.commit = async (ops) => {
    if (matches(ops)) {
      held();
      await new Promise((r) => setTimeout(r, ms));
    }
    return commit(ops);
  };
  return { holding, restore: () => (store.commit = commit) };
}

describe('domains under concurrent changes', () => {
  let bed: DomainBed;
  beforeEach(async () => {
    bed = await startDomainBed();
  });
  afterEach(async () => {
    await bed.stop();
  });

  it("removes a deleted domain's scopes without undoing a concurrent change to the same key", async () => {
    await bed.create('example.com');
    const keys = `/v2/accounts/${bed.server.accountId}/api-keys`;
    const key = (await bed.api('POST', keys, { body: { label: 'k', scopes: ['accounts:read', 'messages:send:{example.com}'] } })).body;
    const hold = holdCommits(bed, (ops) => ops.some((op) => (op.value as { ipAllowList?: string[] } | undefined)?.ipAllowList?.length));
    try {
      const update = bed.api('PUT', `${keys}/${key.id}`, { body: { ip_allow_list: ['10.0.0.0/8'] } });
      await hold.holding;
      const del = await bed.api('DELETE', `${bed.base}/example.com`);
      expect(del.status).to.equal(200);
      expect((await update).status).to.equal(200);
    } finally {
      hold.restore();
    }
    const after = (await bed.api('GET', `${keys}/${key.id}`)).body;
    expect(after.ip_allow_list).to.deep.equal(['10.0.0.0/8']);
    expect(after.scopes.map((s: { scope: string }) => s.scope)).to.deep.equal(['accounts:read']);
  });

  it('never brings back a domain deleted while a rotation of it was running', async () => {
    const created = await bed.create('example.com', { dkim_rotation_interval_days: 1 });
    bed.publish(created);
    expect((await bed.recheck('example.com')).body.rotation_ready).to.equal(true);
    bed.clock.advance(2 * 86_400_000);
    const { core } = bed.server.daemon;
    const snapshot = await core.domains.byName('example.com');
    expect((await bed.api('DELETE', `${bed.base}/example.com`)).status).to.equal(200);
    let error: unknown;
    await core.rotator.rotate(snapshot).catch((err: unknown) => (error = err));
    expect((error as { status?: number } | undefined)?.status).to.equal(404);
    expect((await bed.api('GET', `${bed.base}/example.com`)).status).to.equal(404);
    expect((await bed.api('GET', bed.base)).body.data).to.have.length(0);
    expect(existsSync(join(bed.server.dir, 'keys', 'dkim', created.id))).to.equal(false);
  });

  it('does not credit a changed record with the answer to the question asked before the change', async () => {
    const created = await bed.create('example.com');
    bed.publish(created); // rp.example.com is published; bounces.example.com will not be
    const { resolver } = bed.server.daemon.core;
    const cname = resolver.cname.bind(resolver);
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    resolver.cname = async (name) => {
      entered();
      await gate;
      return cname(name);
    };
    try {
      bed.clock.advance(61_000);
      const check = bed.api('POST', `${bed.base}/example.com/check-dns`);
      await inside;
      const changed = await bed.api('PUT', `${bed.base}/example.com`, { body: { return_path_subdomain: 'bounces' } });
      expect(changed.status).to.equal(200);
      release();
      expect((await check).status).to.equal(200);
    } finally {
      resolver.cname = cname;
    }
    const after = await bed.get('example.com');
    expect(recordOf(after, (r) => r.host === 'bounces.example.com').propagated).to.equal(false);
    // Not locked by a record that was never seen: it can still be changed back.
    expect((await bed.api('PUT', `${bed.base}/example.com`, { body: { return_path_subdomain: 'rp' } })).status).to.equal(200);
  });
});
