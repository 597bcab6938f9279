import { expect } from 'chai';
import { cancellable, disabledReason, dkimView, signingSelector } from '../../../src/dashboard/activity.ts';
import { loginUrl } from '../../../src/dashboard/login-links.ts';
import type { HttpAttempt } from '../../../src/queue/attempt-log.ts';
import { AUTO_DISABLE_AFTER } from '../../../src/queue/http-jobs.ts';
import type { DomainRecord, MessageRecord, WebhookRecord } from '../../../src/store/records.ts';
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

  it('names the selector of the key that was active when the message was attempted, from the key history', () => {
    const key = (selector: string, algorithm: 'rsa' | 'ed25519' = 'rsa') => ({ selector, algorithm, publicKey: 'MIIB', createdAt: '2026-08-01T00:00:00.000Z' });
    const domain = {
      dkim: {
        active: { keys: [key('s2e', 'ed25519'), key('s2')], activatedAt: '2026-11-02T00:00:00.000Z', publishUntil: null },
        standby: { keys: [key('s3')], activatedAt: null, publishUntil: null },
        retired: [
          { keys: [key('s0')], activatedAt: '2026-08-01T00:00:00.000Z', publishUntil: '2026-09-15T00:00:00.000Z' },
          { keys: [key('s1')], activatedAt: '2026-09-01T00:00:00.000Z', publishUntil: '2026-11-09T00:00:00.000Z' },
        ],
      },
    } as unknown as DomainRecord;
    expect(signingSelector(domain, '2026-08-20T00:00:00.000Z')).to.equal('s0');
    expect(signingSelector(domain, '2026-09-01T00:00:00.000Z')).to.equal('s1');
    expect(signingSelector(domain, '2026-11-01T23:59:59.999Z')).to.equal('s1');
    // The RSA key's selector, whatever the order of the slot's keys.
    expect(signingSelector(domain, '2026-11-02T00:00:00.000Z')).to.equal('s2');
    expect(signingSelector(domain, '2027-01-01T00:00:00.000Z')).to.equal('s2');
    // Before the oldest slot still kept: not known (never the standby, never a guess).
    expect(signingSelector(domain, '2026-07-31T00:00:00.000Z')).to.equal(null);
    expect(signingSelector(domain, 'not a time')).to.equal(null);
  });

  it('says a message is cancellable exactly while it is scheduled, not due, unattempted and Received', () => {
    const now = Date.parse('2026-11-28T01:00:00.000Z');
    const later = '2026-11-28T03:00:00.000Z';
    const scheduled = {
      status: 'Received',
      schedule: { firstAttempt: later, expires: null },
      dueAt: later,
      attempts: [],
      heldAt: null,
    } as unknown as MessageRecord;
    expect(cancellable(scheduled, now)).to.equal(true);
    expect(cancellable({ ...scheduled, schedule: null, dueAt: '2026-11-28T01:00:00.000Z' }, now)).to.equal(false);
    expect(cancellable({ ...scheduled, schedule: { firstAttempt: null, expires: later } }, now)).to.equal(false);
    expect(cancellable({ ...scheduled, status: 'Cancelled' }, now)).to.equal(false);
    expect(cancellable({ ...scheduled, status: 'Deferred' }, now)).to.equal(false);
    expect(cancellable({ ...scheduled, attempts: [{ time: later, log: '451', status: 'Deferred' }] }, now)).to.equal(false);
    expect(cancellable({ ...scheduled, dueAt: '2026-11-28T00:59:59.000Z' }, now)).to.equal(false);
    expect(cancellable({ ...scheduled, heldAt: '2026-11-28T00:30:00.000Z' }, now)).to.equal(false);
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
