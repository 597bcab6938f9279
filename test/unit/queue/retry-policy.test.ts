import { expect } from 'chai';
import { nextAttemptAt, retryHintMs, type RetryPolicy } from '../../../src/queue/retry-policy.ts';

const policy: RetryPolicy = { firstDelayMs: 300_000, maxDelayMs: 7_200_000, maxAgeMs: 86_400_000, jitter: 0.2 };
const t0 = Date.parse('2026-11-21T12:00:00Z');
const mid = () => 0.5;

describe('retry policy', () => {
  it('doubles the delay per attempt up to the maximum', () => {
    const delays = [1, 2, 3, 4, 5, 6, 7].map((attempts) => nextAttemptAt({ attempts, createdAt: t0, now: t0, expiresAt: null }, policy, mid)! - t0);
    expect(delays).to.deep.equal([300_000, 600_000, 1_200_000, 2_400_000, 4_800_000, 7_200_000, 7_200_000]);
  });

  it('spreads each delay by the jitter', () => {
    expect(nextAttemptAt({ attempts: 1, createdAt: t0, now: t0, expiresAt: null }, policy, () => 0)! - t0).to.equal(240_000);
    expect(nextAttemptAt({ attempts: 1, createdAt: t0, now: t0, expiresAt: null }, policy, () => 1)! - t0).to.equal(360_000);
  });

  it('waits at least as long as the server asked', () => {
    expect(nextAttemptAt({ attempts: 1, createdAt: t0, now: t0, expiresAt: null, hintMs: 900_000 }, policy, mid)! - t0).to.equal(900_000);
  });

  it('gives up past the maximum age or the message expiry, with one last try at the deadline', () => {
    const late = t0 + 86_400_000 - 600_000;
    expect(nextAttemptAt({ attempts: 8, createdAt: t0, now: late, expiresAt: null }, policy, mid)).to.equal(t0 + 86_400_000);
    expect(nextAttemptAt({ attempts: 9, createdAt: t0, now: t0 + 86_400_000, expiresAt: null }, policy, mid)).to.equal(null);
    expect(nextAttemptAt({ attempts: 1, createdAt: t0, now: t0, expiresAt: t0 + 60_000 }, policy, mid)).to.equal(null);
  });

  it('reads "try again in N minutes" hints', () => {
    expect(retryHintMs('4.7.0 Try again in 10 minutes')).to.equal(600_000);
    expect(retryHintMs('please retry after 30 seconds')).to.equal(30_000);
    expect(retryHintMs('4.2.1 mailbox busy')).to.equal(undefined);
  });
});
