import { expect } from 'chai';
import { isFull, take, type Bucket, type RateLimit } from '../../../src/api/rate-limit-policy.ts';

const T0 = 1_700_000_000_000;

/** Takes n times at `now`, threading the bucket; returns the results. */
function takeMany(bucket: Bucket | undefined, n: number, now: number, limit: RateLimit) {
  const results = [];
  let current = bucket;
  for (let i = 0; i < n; i++) {
    const result = take(current, now, limit);
    results.push(result);
    current = result.bucket;
  }
  return { results, bucket: current! };
}

describe('rate limit token bucket', () => {
  const limit: RateLimit = { per_second: 100, burst: 5 };

  it('allows a fresh bucket burst takes in the same millisecond and refuses the next', () => {
    const { results, bucket } = takeMany(undefined, limit.burst, T0, limit);
    expect(results.map((r) => r.allowed)).to.deep.equal([true, true, true, true, true]);
    const next = take(bucket, T0, limit);
    expect(next.allowed).to.equal(false);
    if (next.allowed) return;
    expect(next.retryAfterSeconds).to.be.at.least(1);
    expect(Number.isInteger(next.retryAfterSeconds)).to.equal(true);
  });

  it('refills at per_second: 10 ms at 100/s gives back one token', () => {
    const { bucket } = takeMany(undefined, limit.burst, T0, limit);
    expect(take(bucket, T0 + 9, limit).allowed).to.equal(false);
    const after = take(bucket, T0 + 10, limit);
    expect(after.allowed).to.equal(true);
    expect(take(after.bucket, T0 + 10, limit).allowed).to.equal(false);
  });

  it('never refills above the burst, however long the bucket rests', () => {
    const { bucket } = takeMany(undefined, limit.burst, T0, limit);
    const later = T0 + 3_600_000;
    const { results, bucket: drained } = takeMany(bucket, limit.burst, later, limit);
    expect(results.every((r) => r.allowed)).to.equal(true);
    expect(take(drained, later, limit).allowed).to.equal(false);
  });

  it('does not refill when the clock goes backwards', () => {
    const { bucket } = takeMany(undefined, limit.burst, T0, limit);
    expect(take(bucket, T0 - 1_000, limit).allowed).to.equal(false);
  });

  it('at 1/s with a burst of 1 refuses an immediate second take with Retry-After 1', () => {
    const oneps: RateLimit = { per_second: 1, burst: 1 };
    const first = take(undefined, T0, oneps);
    expect(first.allowed).to.equal(true);
    const second = take(first.bucket, T0, oneps);
    expect(second).to.deep.include({ allowed: false, retryAfterSeconds: 1 });
    expect(take(second.bucket, T0 + 1_000, oneps).allowed).to.equal(true);
  });

  it('rounds the wait up to whole seconds at slow rates', () => {
    const slow: RateLimit = { per_second: 0.25, burst: 1 };
    const first = take(undefined, T0, slow);
    const second = take(first.bucket, T0, slow);
    expect(second).to.deep.include({ allowed: false, retryAfterSeconds: 4 });
    const third = take(second.bucket, T0 + 500, slow);
    expect(third).to.deep.include({ allowed: false, retryAfterSeconds: 4 });
    const fourth = take(third.bucket, T0 + 1_000, slow);
    expect(fourth).to.deep.include({ allowed: false, retryAfterSeconds: 3 });
  });
});

describe('isFull', () => {
  const limit: RateLimit = { per_second: 10, burst: 2 };

  it('says a bucket at its burst is full', () => {
    expect(isFull({ tokens: 2, at: T0 }, T0, limit)).to.equal(true);
  });

  it('says a drained bucket is not full until it has refilled', () => {
    const drained: Bucket = { tokens: 0, at: T0 };
    expect(isFull(drained, T0, limit)).to.equal(false);
    expect(isFull(drained, T0 + 199, limit)).to.equal(false);
    expect(isFull(drained, T0 + 200, limit)).to.equal(true);
  });
});
