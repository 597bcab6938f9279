import { expect } from 'chai';
import { RateLimiter } from '../../../src/api/middleware/rate-limit.ts';
import { AppError } from '../../../src/util/errors.ts';

const limits = { general: { per_second: 100, burst: 200 }, statistics: { per_second: 1, burst: 1 } };

function refused(fn: () => void): AppError {
  try {
    fn();
  } catch (err) {
    return err as AppError;
  }
  throw new Error('expected a refusal');
}

describe('RateLimiter', () => {
  it('allows one statistics request per second per account, apart from the general budget', () => {
    let now = 1_000_000;
    const limiter = new RateLimiter(limits, { now: () => now });
    limiter.consume('a', 'statistics');
    const err = refused(() => limiter.consume('a', 'statistics'));
    expect(err.status).to.equal(429);
    expect(err.headers['Retry-After']).to.equal('1');
    limiter.consume('a', 'general');
    limiter.consume('b', 'statistics');
    now += 1000;
    limiter.consume('a', 'statistics');
  });

  it('takes new limits on configure', () => {
    const limiter = new RateLimiter(limits, { now: () => 0 });
    limiter.configure({ ...limits, general: { per_second: 1, burst: 1 } });
    limiter.consume('a', 'general');
    expect(refused(() => limiter.consume('a', 'general')).status).to.equal(429);
  });
});
