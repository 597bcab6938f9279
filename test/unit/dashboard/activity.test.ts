import { expect } from 'chai';
import { disabledReason, dkimView } from '../../../src/dashboard/activity.ts';
import { loginUrl } from '../../../src/dashboard/login-links.ts';
import type { HttpAttempt } from '../../../src/queue/attempt-log.ts';
import { AUTO_DISABLE_AFTER } from '../../../src/queue/http-jobs.ts';
import type { DomainRecord, WebhookRecord } from '../../../src/store/records.ts';
import { isTestDelivery, testEnvelope } from '../../../src/webhooks/test-event.ts';

const webhook = (fields: Partial<WebhookRecord>): WebhookRecord => ({
  v: 1,
  id: 'w',
  accountId: 'a',
  name: 'hook',
  url: 'https://hooks.example.com/',
  enabled: true,
  flags: {} as WebhookRecord['flags'],
  scope: 'global',
  domains: [],
  secret: 'sealed',
  successCount: 0,
  errorCount: 0,
  errorsSinceLastSuccess: 0,
  lastRequestAt: null,
  createdAt: '2026-11-28T00:00:00.000Z',
  updatedAt: '2026-11-28T00:00:00.000Z',
  ...fields,
});

const failed: HttpAttempt = {
  job_id: 'j',
  kind: 'webhook',
  target_id: 'w',
  account_id: 'a',
  event_id: 'e',
  at: '2026-11-28T00:00:00.000Z',
  status: 503,
  response_ms: 12,
  error: 'HTTP 503',
  outcome: 'retry',
  attempts: 3,
};

describe('dashboard activity', () => {
  it('says a webhook disabled after 100 failures in a row was disabled by the delivery rules, with the last answer', () => {
    const off = webhook({ enabled: false, errorsSinceLastSuccess: AUTO_DISABLE_AFTER });
    expect(disabledReason(off, failed)).to.equal(`disabled automatically after ${AUTO_DISABLE_AFTER} failed deliveries in a row; the last: HTTP 503`);
    expect(disabledReason(off, { ...failed, status: null, error: 'connect ECONNREFUSED' })).to.match(/the last: connect ECONNREFUSED$/);
    expect(disabledReason(off, undefined)).to.equal(`disabled automatically after ${AUTO_DISABLE_AFTER} failed deliveries in a row`);
  });

  it('says a webhook disabled with fewer failures was disabled by hand, and an enabled one has no reason', () => {
    expect(disabledReason(webhook({ enabled: false, errorsSinceLastSuccess: 5 }), failed)).to.match(/^disabled by hand/);
    expect(disabledReason(webhook({ enabled: true, errorsSinceLastSuccess: 500 }), failed)).to.equal(null);
  });

  it("lists a domain's DKIM keys by state with whether each was found published", () => {
    const key = (selector: string) => ({ selector, algorithm: 'rsa' as const, publicKey: 'MIIB', createdAt: '2026-11-01T00:00:00.000Z' });
    const domain = {
      name: 'example.com',
      dkimRotationIntervalDays: 90,
      dkim: {
        active: { keys: [key('s1')], activatedAt: '2026-11-02T00:00:00.000Z', publishUntil: null },
        standby: { keys: [key('s2')], activatedAt: null, publishUntil: null },
        retired: [{ keys: [key('s0')], activatedAt: '2026-08-01T00:00:00.000Z', publishUntil: '2026-12-01T00:00:00.000Z' }],
      },
      dns: { checkedAt: null, propagated: { 'dkim:s1': true, 'dkim:s2': false }, valid: true, everValid: true },
    } as unknown as DomainRecord;
    const view = dkimView(domain);
    expect(view.keys.map((k) => [k.selector, k.state, k.published])).to.deep.equal([
      ['s1', 'active', true],
      ['s2', 'standby', false],
      ['s0', 'retired', false],
    ]);
    expect(view.keys[0]!.record).to.deep.include({ type: 'TXT', host: 's1._domainkey.example.com' });
    expect(view.rotation).to.deep.equal({ interval_days: 90, enabled: true, last_rotated_at: '2026-11-02T00:00:00.000Z', ready: false });
  });

  it('a test delivery is told by its job, and its body is an envelope of type webhook.test', () => {
    expect(isTestDelivery({ eventId: 'test:w' })).to.equal(true);
    expect(isTestDelivery({ eventId: '01900000-0000-7000-8000-000000000000' })).to.equal(false);
    const body = JSON.parse(testEnvelope({ createdAt: '2026-11-28T00:00:00.123Z' }, 'w')) as Record<string, unknown>;
    expect(Object.keys(body)).to.deep.equal(['type', 'timestamp', 'webhook_id', 'data']);
    expect(body).to.include({ type: 'webhook.test', timestamp: '2026-11-28T00:00:00.123000000Z', webhook_id: 'w' });
  });

  it("puts the operator's one-time token in the link's fragment, under the base given", () => {
    expect(loginUrl('https://mail.example.com/', 'abc')).to.equal('https://mail.example.com/ui/#operator-login=abc');
    expect(loginUrl('http://127.0.0.1:8080', 'a+b')).to.equal('http://127.0.0.1:8080/ui/#operator-login=a%2Bb');
  });
});
