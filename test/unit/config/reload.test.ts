import { expect } from 'chai';
import { configKeys, RELOAD, reloadPlan, applyLive } from '../../../src/config/reload.ts';
import { configSchema } from '../../../src/config/schema.ts';

describe('the reload table (config/reload.ts)', () => {
  it('has an entry for every key of the schema, and none for a key it does not have', () => {
    const keys = configKeys();
    expect(
      keys.filter((key) => !(key in RELOAD)),
      'keys of the schema without an entry: decide live or restart',
    ).to.deep.equal([]);
    expect(
      Object.keys(RELOAD).filter((key) => !keys.includes(key)),
      'entries for keys the schema does not have',
    ).to.deep.equal([]);
  });

  it('applies every dashboard key live: the sessions and pages read them per request', () => {
    const keys = configKeys().filter((key) => key.startsWith('dashboard.'));
    expect(keys).to.deep.equal(['dashboard.enabled', 'dashboard.session_ttl_minutes', 'dashboard.login_link_ttl_seconds', 'dashboard.public_url']);
    for (const key of keys) expect(RELOAD[key], key).to.equal('live');
  });

  it('names each changed key once, live or restart, and keeps the running value of what needs a restart', () => {
    const running = configSchema.parse({});
    const next = configSchema.parse({
      log: { level: 'debug' },
      tracking: { port: 9999 },
      statistics: { counters: false },
      billing: { monthly_amount: 10 },
      delivery: { smarthost: { host: 'relay.example.net' } },
    });
    const plan = reloadPlan(running, next);
    expect(plan.live).to.deep.equal(['log.level']);
    expect(plan.restart).to.deep.equal([
      'delivery.smarthost.host',
      'delivery.smarthost.port',
      'tracking.port',
      'statistics.counters',
      'billing.monthly_amount',
    ]);
    const applied = applyLive(running, next, plan.live);
    expect(applied.log.level).to.equal('debug');
    expect(applied.tracking.port).to.equal(running.tracking.port);
    expect(applied.delivery.smarthost).to.equal(null);
    expect(reloadPlan(running, running)).to.deep.equal({ live: [], restart: [] });
  });
});
