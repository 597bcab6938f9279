import { expect } from 'chai';
import type { TestDnsServer } from './dns-server.ts';
import type { CallOptions } from './harness.ts';

/** What the shared target-URL tests need of a webhooks or routes test file (read when each test runs). */
export interface TargetUrlBed {
  /** The file's refusal table: URL and the message it gets. */
  refused: ReadonlyArray<readonly [unknown, string]>;
  /** A valid create body with `url` (and other fields) replaced. */
  body: (fields?: object) => object;
  create: (body: object) => Promise<{ id: string }>;
  api: (method: string, path: string, options?: CallOptions) => Promise<{ status: number; body: Record<string, unknown> }>;
  base: () => string;
  dns: () => TestDnsServer;
}

/**
 * The URL rules webhooks and routes share (one setting, one check at create and at dial time):
 * a refusal by the network rules names the setting that lifts it, and a host that does not
 * resolve yet is accepted, to be checked when dialled.
 */
export function itFollowsTargetUrlRules(bed: TargetUrlBed): void {
  it('names webhooks.allow_networks, the setting that allows them, in every refusal by the network rules', async () => {
    const byNetwork = bed.refused.filter(([, message]) => /address|loopback name|resolves to/.test(message));
    expect(byNetwork.length).to.be.greaterThan(10);
    const created = await bed.create(bed.body());
    for (const [url] of byNetwork) {
      for (const res of [
        await bed.api('POST', bed.base(), { body: bed.body({ url }) }),
        await bed.api('PUT', `${bed.base()}/${created.id}`, { body: { url } }),
      ]) {
        expect(res.status, String(url)).to.equal(400);
        expect(res.body.message, String(url)).to.match(/; such targets are refused unless the operator lists their network in webhooks\.allow_networks$/);
      }
    }
    // A refusal that no network setting lifts does not point there.
    const scheme = await bed.api('POST', bed.base(), { body: bed.body({ url: 'ftp://hooks.example.com/' }) });
    expect(scheme.body.message).to.not.include('allow_networks');
  });

  it('accepts a URL whose host does not resolve yet (no such name, no address, no answer) at create and update', async () => {
    const dns = bed.dns();
    dns.zone.set('txt-only.example.com', 'TXT', ['v=spf1 -all']);
    dns.failingNames.add('servfail.example.com');
    try {
      const created = await bed.create(bed.body());
      for (const url of ['http://nowhere.example.com/hook', 'https://txt-only.example.com/a?b=c', 'https://servfail.example.com:8443/x']) {
        const res = await bed.api('POST', bed.base(), { body: bed.body({ url }) });
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
        expect(res.body.url).to.equal(url);
        const updated = await bed.api('PUT', `${bed.base()}/${created.id}`, { body: { url } });
        expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
        expect((await bed.api('GET', `${bed.base()}/${created.id}`)).body.url).to.equal(url);
      }
    } finally {
      dns.zone.delete('txt-only.example.com');
      dns.failingNames.delete('servfail.example.com');
    }
  });
}
