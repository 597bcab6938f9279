import { expect } from 'chai';
import { expiredRetired, rotationDecision, rotationReady } from '../../../src/domains/rotation.ts';
import type { DomainRecord } from '../../../src/store/records.ts';

const DAY = 86_400_000;
const t0 = Date.parse('2026-01-01T00:00:00Z');

function domain(over: Partial<DomainRecord> = {}, propagated: Record<string, boolean> = {}): DomainRecord {
  const key = (selector: string) => ({ selector, algorithm: 'rsa' as const, publicKey: 'p', createdAt: '' });
  return {
    v: 1,
    id: 'd',
    accountId: 'a',
    name: 'example.com',
    trackingSubdomain: 'track',
    returnPathSubdomain: 'rp',
    subscriptionSubdomain: 'unsub',
    mediaSubdomain: 'media',
    dkimRotationIntervalDays: 7,
    dkimSelectorOverride: null,
    dsnRecipient: null,
    dkim: {
      active: { keys: [key('old')], activatedAt: new Date(t0).toISOString(), publishUntil: null },
      standby: { keys: [key('new'), { ...key('newe'), algorithm: 'ed25519' }], activatedAt: null, publishUntil: null },
      retired: [],
    },
    dns: { checkedAt: null, propagated, valid: true, everValid: true },
    createdAt: new Date(t0).toISOString(),
    updatedAt: new Date(t0).toISOString(),
    ...over,
  };
}

const published = { 'dkim:new': true, 'dkim:newe': true };

describe('rotationDecision', () => {
  it('does nothing when rotation is not enabled', () => {
    expect(rotationDecision(domain({ dkimRotationIntervalDays: null }, published), t0 + 100 * DAY).kind).to.equal('not_enabled');
  });

  it('waits until the interval since activation has passed', () => {
    const decision = rotationDecision(domain({}, published), t0 + 7 * DAY - 1);
    expect(decision).to.deep.equal({ kind: 'wait', until: t0 + 7 * DAY });
    expect(rotationDecision(domain({}, published), t0 + 7 * DAY).kind).to.equal('rotate');
  });

  it('never rotates to a standby whose records are not all published', () => {
    expect(rotationDecision(domain({}, { 'dkim:new': true }), t0 + 30 * DAY).kind).to.equal('standby_not_published');
    expect(rotationDecision(domain({}, {}), t0 + 30 * DAY, true).kind).to.equal('standby_not_published');
  });

  it('skips the interval when forced, and says when there is no standby', () => {
    expect(rotationDecision(domain({}, published), t0 + DAY, true).kind).to.equal('rotate');
    const bare = domain({}, published);
    bare.dkim.standby = null;
    expect(rotationDecision(bare, t0 + 30 * DAY).kind).to.equal('no_standby');
  });
});

describe('rotationReady / expiredRetired', () => {
  it('is ready only when every standby key is published', () => {
    expect(rotationReady(domain({}, published))).to.equal(true);
    expect(rotationReady(domain({}, { 'dkim:new': true, 'dkim:newe': false }))).to.equal(false);
  });

  it('lists retired slots whose publication period is over', () => {
    const d = domain();
    d.dkim.retired = [
      { keys: [], activatedAt: null, publishUntil: new Date(t0 + DAY).toISOString() },
      { keys: [], activatedAt: null, publishUntil: new Date(t0 + 3 * DAY).toISOString() },
    ];
    expect(expiredRetired(d, t0 + 2 * DAY)).to.have.length(1);
    expect(expiredRetired(d, t0 + 3 * DAY)).to.have.length(2);
  });
});
