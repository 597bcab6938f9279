import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { validateConfig } from '../../../src/config/load.ts';
import type { Config } from '../../../src/config/schema.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';

const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), '../../../config/postilion.example.yaml');

/** Every key of the example file, dotted; a list, a record ({}) or null is one key. */
function exampleKeys(node: unknown, path = ''): string[] {
  if (node === null || typeof node !== 'object' || Array.isArray(node) || Object.keys(node).length === 0) return [path];
  return Object.entries(node as Record<string, unknown>).flatMap(([name, inner]) => exampleKeys(inner, path ? `${path}.${name}` : name));
}

/** Changed values where "the value, a little different" is not a valid one. */
const CHANGED: Record<string, unknown> = {
  'server.hostname': 'mail.example.org',
  'server.sending_ips': ['192.0.2.10'],
  'dns.servers': ['192.0.2.53'],
  'domains.check_schedule': '*/7 * * * *',
  'domains.dmarc_record': 'v=DMARC1; p=none;',
  'dkim.rotation_schedule': '5 4 * * *',
  'messages.retention_purge_schedule': '1 1 * * *',
  'delivery.tls': 'required',
  'delivery.transport': { 'example.org': { host: 'relay.example.net' } },
  'delivery.smarthost': { host: 'relay.example.net', port: 2525 },
  'delivery.destinations': { 'example.org': { concurrency: 2 } },
  'log.level': 'fatal',
  'api.trusted_proxies': ['10.0.0.0/8'],
  'api.idempotency.purge_schedule': '*/7 * * * *',
  'smtp.submission.plain_auth_from': ['10.0.0.0/8'],
  'smtp.inbound.spamd': '127.0.0.1:783',
  'smtp.inbound.dmarc_policy': 'enforce',
  'webhooks.allow_networks': ['10.0.0.0/8'],
  'tracking.link_scheme': 'http',
  'billing.currency': 'eur',
  'tls_reporting.from': 'tls-reports@example.org',
  'tls_reporting.schedule': '5 4 * * *',
  'tls_reporting.allow_networks': ['10.0.0.0/8'],
  'tls_reporting.ca_file': 'ca.pem',
  'mta_sts_policy.domains': { 'example.org': { mode: 'testing', mx: ['mx.example.org'], max_age_seconds: 86400 } },
  'mta_sts_policy.check_ca_file': 'ca.pem',
  'cluster.database_url': 'postgres://db.example.org/postilion',
  'cluster.redis_url': 'redis://cache.example.org:6379',
  'dashboard.public_url': 'https://mail.example.org',
  'delivery.sources': { mta1: { address: '192.0.2.10', ehlo: 'mta1.example.org' } },
  'delivery.pools': { bulk: { mta1: 1 } },
  'delivery.default_pool': 'bulk',
  'delivery.account_pools': { '0190a6c4-0000-7000-8000-000000000001': 'bulk' },
};

/** Keys whose changed value is valid only with others changed too (a pool names sources): those change along. */
const ALONG: Record<string, string[]> = {
  'delivery.pools': ['delivery.sources'],
  'delivery.default_pool': ['delivery.sources', 'delivery.pools'],
  'delivery.account_pools': ['delivery.sources', 'delivery.pools'],
};

function valueAt(config: unknown, key: string): unknown {
  return key
    .split('.')
    .reduce<unknown>((node, part) => (node === null || typeof node !== 'object' ? undefined : (node as Record<string, unknown>)[part]), config);
}

function withValue(config: Config, key: string, value: unknown): unknown {
  const copy = structuredClone(config) as unknown as Record<string, unknown>;
  const parts = key.split('.');
  let node = copy;
  for (const part of parts.slice(0, -1)) node = node[part] as Record<string, unknown>;
  node[parts.at(-1)!] = value;
  return copy;
}

/** The running configuration with `key` changed to a valid other value. */
function changed(config: Config, key: string): Config {
  const now = valueAt(config, key);
  const candidates: unknown[] =
    key in CHANGED
      ? [CHANGED[key]]
      : typeof now === 'number'
        ? [now + 1, now - 1, now / 2]
        : typeof now === 'boolean'
          ? [!now]
          : typeof now === 'string'
            ? [`${now}x`, 'x']
            : [];
  const along = (ALONG[key] ?? []).reduce<Config>((c, k) => withValue(c, k, CHANGED[k]) as Config, config);
  for (const candidate of candidates) {
    try {
      return validateConfig(withValue(along, key, candidate), 'test');
    } catch {
      // Not valid for this key: the next candidate.
    }
  }
  throw new Error(`no changed value for ${key} (${JSON.stringify(now)}): add one to CHANGED`);
}

describe('SIGHUP reload: every key of the example configuration is applied or named', function () {
  this.timeout(60_000);
  let server: TestServer;

  before(async () => {
    // With the tracking listener (the test harness leaves it off unless asked): it must stay where it is.
    server = await startServer({ config: { tracking: {} } });
  });
  after(async () => {
    await server?.stop();
  });

  const keys = exampleKeys(parse(readFileSync(EXAMPLE, 'utf8')));

  it('walks the example file (every section of it)', () => {
    expect(keys.length).to.be.greaterThan(90);
    for (const section of ['tracking', 'statistics', 'billing', 'api', 'smtp', 'delivery', 'metrics']) {
      expect(
        keys.some((k) => k.startsWith(`${section}.`)),
        section,
      ).to.equal(true);
    }
  });

  it('a changed key is applied (the running configuration takes it) or named in restart_needed_for (the running value stays), never neither', () => {
    const base = server.daemon.runningConfig;
    const silent: string[] = [];
    for (const key of keys) {
      const next = changed(base, key);
      const report = server.daemon.reload(next);
      const running = server.daemon.runningConfig;
      const named = [...report.applied, ...report.restartNeededFor];
      const mine = (k: string) => [key, ...(ALONG[key] ?? [])].some((m) => k === m || k.startsWith(`${m}.`));
      // Only this key (or the keys under it) changed, and each is reported once.
      expect(
        named.filter((k) => !mine(k)),
        key,
      ).to.deep.equal([]);
      if (named.length === 0) silent.push(key);
      for (const k of report.applied) expect(valueAt(running, k), `${k} applied`).to.deep.equal(valueAt(next, k));
      for (const k of report.restartNeededFor) expect(valueAt(running, k), `${k} waits for a restart`).to.deep.equal(valueAt(base, k));
      // Back to where it was, for the next key.
      server.daemon.reload(base);
      expect(server.daemon.runningConfig).to.deep.equal(base);
    }
    expect(silent, 'keys changed without being applied or named').to.deep.equal([]);
  });

  it('names tracking, statistics and billing keys for a restart, and the tracking listener stays where it is', () => {
    const base = server.daemon.runningConfig;
    const url = server.daemon.parts.tracking.url;
    const next = validateConfig(
      {
        ...base,
        tracking: { ...base.tracking, port: 1, scanner_seconds: 99 },
        statistics: { counters: false },
        billing: { monthly_amount: 12, currency: 'eur' },
      },
      'test',
    );
    const report = server.daemon.reload(next);
    expect(report.restartNeededFor).to.deep.equal([
      'tracking.port',
      'tracking.scanner_seconds',
      'statistics.counters',
      'billing.monthly_amount',
      'billing.currency',
    ]);
    expect(report.applied).to.deep.equal([]);
    expect(server.daemon.parts.tracking.url).to.equal(url);
    server.daemon.reload(base);
  });
});
