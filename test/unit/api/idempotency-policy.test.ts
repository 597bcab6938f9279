import { expect } from 'chai';
import { decide, fingerprint, MAX_KEY_LENGTH, scopesDigest, settle, validKey } from '../../../src/api/idempotency-policy.ts';
import type { IdempotencyRecord, StoredResponse } from '../../../src/store/records.ts';

const NOW = 1_700_000_000_000;
const PRINT = fingerprint('POST', '/v2/accounts/a/api-keys', Buffer.from('{"label":"x"}'));
const RESPONSE: StoredResponse = { status: 201, body: '{"id":"k1"}', encrypted: false };
/** The key that made the stored request, asking again with the same scopes. */
const OWNER = { keyId: 'key-id-1', scopes: scopesDigest(['api-keys:write']) };

function record(overrides: Partial<IdempotencyRecord>): IdempotencyRecord {
  return {
    v: 1,
    accountId: 'acc-1',
    key: 'key-1',
    fingerprint: PRINT,
    state: 'completed',
    expiresAt: NOW + 60_000,
    response: RESPONSE,
    owner: OWNER,
    ...overrides,
  };
}

describe('fingerprint', () => {
  const base = () => fingerprint('POST', '/v2/x', Buffer.from('{"a":1}'));

  it('is stable for the same request', () => {
    expect(base()).to.equal(base());
    expect(base()).to.match(/^[0-9a-f]{64}$/);
  });

  it('differs when the method differs', () => {
    expect(fingerprint('PUT', '/v2/x', Buffer.from('{"a":1}'))).to.not.equal(base());
  });

  it('ignores the case of the method', () => {
    expect(fingerprint('post', '/v2/x', Buffer.from('{"a":1}'))).to.equal(base());
  });

  it('differs when the path differs', () => {
    expect(fingerprint('POST', '/v2/y', Buffer.from('{"a":1}'))).to.not.equal(base());
  });

  it('differs when the body bytes differ, even for equal JSON', () => {
    expect(fingerprint('POST', '/v2/x', Buffer.from('{"a":2}'))).to.not.equal(base());
    expect(fingerprint('POST', '/v2/x', Buffer.from('{ "a": 1 }'))).to.not.equal(base());
  });

  it('cannot be forged by moving text between path and body', () => {
    expect(fingerprint('POST', '/v2/x\n', Buffer.from('body'))).to.not.equal(fingerprint('POST', '/v2/x', Buffer.from('\nbody')));
  });
});

describe('decide', () => {
  it('executes when there is no record', () => {
    expect(decide(undefined, PRINT, NOW, OWNER)).to.deep.equal({ kind: 'execute' });
  });

  it('executes when an in-progress lease has run out', () => {
    expect(decide(record({ state: 'in_progress', response: null, expiresAt: NOW }), PRINT, NOW, OWNER)).to.deep.equal({ kind: 'execute' });
    expect(decide(record({ state: 'in_progress', response: null, expiresAt: NOW - 1 }), PRINT, NOW, OWNER)).to.deep.equal({ kind: 'execute' });
  });

  it('executes when a completed record is past its replay window', () => {
    expect(decide(record({ expiresAt: NOW - 1 }), PRINT, NOW, OWNER)).to.deep.equal({ kind: 'execute' });
  });

  it('executes on an expired record even with another fingerprint', () => {
    expect(decide(record({ expiresAt: NOW - 1, fingerprint: 'other' }), PRINT, NOW, OWNER)).to.deep.equal({ kind: 'execute' });
  });

  it('reports a mismatch when a completed record has another fingerprint', () => {
    expect(decide(record({ fingerprint: 'other' }), PRINT, NOW, OWNER)).to.deep.equal({ kind: 'mismatch' });
  });

  it('reports a mismatch when an in-progress record has another fingerprint', () => {
    expect(decide(record({ state: 'in_progress', response: null, fingerprint: 'other' }), PRINT, NOW, OWNER)).to.deep.equal({
      kind: 'mismatch',
    });
  });

  it('says in progress with the seconds left on the lease, rounded up', () => {
    const decision = decide(record({ state: 'in_progress', response: null, expiresAt: NOW + 2_001 }), PRINT, NOW, OWNER);
    expect(decision).to.deep.equal({ kind: 'in_progress', retryAfterSeconds: 3 });
  });

  it('says in progress with at least one second when the lease ends within the second', () => {
    const decision = decide(record({ state: 'in_progress', response: null, expiresAt: NOW + 1 }), PRINT, NOW, OWNER);
    expect(decision).to.deep.equal({ kind: 'in_progress', retryAfterSeconds: 1 });
  });

  it('gives a whole number of seconds for an exact multiple', () => {
    const decision = decide(record({ state: 'in_progress', response: null, expiresAt: NOW + 300_000 }), PRINT, NOW, OWNER);
    expect(decision).to.deep.equal({ kind: 'in_progress', retryAfterSeconds: 300 });
  });

  it('replays the stored response of a completed record', () => {
    expect(decide(record({}), PRINT, NOW, OWNER)).to.deep.equal({ kind: 'replay', response: RESPONSE });
  });
});

describe('settle', () => {
  it('completes 2xx outcomes', () => {
    expect(settle(200, false)).to.equal('complete');
    expect(settle(201, false)).to.equal('complete');
    expect(settle(204, false)).to.equal('complete');
  });

  it('completes deterministic 4xx outcomes', () => {
    expect(settle(400, false)).to.equal('complete');
    expect(settle(404, false)).to.equal('complete');
    expect(settle(499, false)).to.equal('complete');
  });

  it('releases the key on 5xx', () => {
    expect(settle(500, false)).to.equal('release');
    expect(settle(503, false)).to.equal('release');
  });

  it('completes a secret-bearing 201', () => {
    expect(settle(201, true)).to.equal('complete');
  });

  it('keeps the lease of a secret-bearing 4xx', () => {
    expect(settle(400, true)).to.equal('keep_lease');
    expect(settle(409, true)).to.equal('keep_lease');
  });

  it('releases a secret-bearing 5xx', () => {
    expect(settle(500, true)).to.equal('release');
  });
});

describe('validKey', () => {
  it('refuses an empty key', () => {
    expect(validKey('')).to.equal(false);
  });

  it('accepts keys of 1 and 255 characters', () => {
    expect(validKey('k')).to.equal(true);
    expect(validKey('k'.repeat(MAX_KEY_LENGTH))).to.equal(true);
    expect(MAX_KEY_LENGTH).to.equal(255);
  });

  it('refuses a key of 256 characters', () => {
    expect(validKey('k'.repeat(256))).to.equal(false);
  });
});

describe('decide, with the caller', () => {
  const NOW = 1_000_000;
  const owner = { keyId: 'k1', scopes: scopesDigest(['a', 'b']) };
  const stored = (over: Partial<IdempotencyRecord> = {}): IdempotencyRecord => ({
    v: 1,
    accountId: 'acc',
    key: 'K',
    fingerprint: 'P',
    state: 'completed',
    expiresAt: NOW + 1000,
    response: { status: 201, body: '{}', encrypted: false },
    owner,
    ...over,
  });

  it('replays to the key that made the request, holding the same scopes in any order', () => {
    expect(decide(stored(), 'P', NOW, { keyId: 'k1', scopes: scopesDigest(['b', 'a']) }).kind).to.equal('replay');
  });

  it('answers another key other_caller before comparing payloads', () => {
    expect(decide(stored(), 'P', NOW, { keyId: 'k2', scopes: owner.scopes })).to.deep.equal({ kind: 'other_caller', why: 'key' });
    expect(decide(stored(), 'other', NOW, { keyId: 'k2', scopes: owner.scopes })).to.deep.equal({ kind: 'other_caller', why: 'key' });
    expect(decide(stored({ state: 'in_progress', response: null }), 'P', NOW, { keyId: 'k2', scopes: owner.scopes }).kind).to.equal('other_caller');
  });

  it('answers the same key with other scopes other_caller', () => {
    expect(decide(stored(), 'P', NOW, { keyId: 'k1', scopes: scopesDigest(['a']) })).to.deep.equal({ kind: 'other_caller', why: 'scopes' });
  });

  it('replays a record of an earlier release, which names no owner, to no one', () => {
    expect(decide(stored({ owner: undefined }), 'P', NOW, owner).kind).to.equal('other_caller');
  });

  it('executes over an expired record whoever owned it', () => {
    expect(decide(stored({ expiresAt: NOW }), 'P', NOW, { keyId: 'k2', scopes: 'x' }).kind).to.equal('execute');
  });
});
