import { expect } from 'chai';
import { RefusalLimiter } from '../../../src/api/middleware/rate-limit.ts';
import { addressBucket, peek, take, type RateLimit } from '../../../src/api/rate-limit-policy.ts';
import { parseClientIp } from '../../../src/util/cidr.ts';
import { AppError } from '../../../src/util/errors.ts';

const ip = (text: string) => parseClientIp(text)!;
const T0 = 1_700_000_000_000;
/** The addresses a limiter remembers: its memory, which the sweep keeps bounded (read from its private map). */
const remembered = (limiter: RefusalLimiter) => (limiter as unknown as { buckets: Map<string, unknown> }).buckets.size;

describe('refused-authentication limit', () => {
  const limit: RateLimit = { per_second: 1, burst: 3 };

  it('peeks without taking: a fresh bucket has room, an empty one says how many whole seconds to wait', () => {
    expect(peek(undefined, T0, limit)).to.deep.equal({ allowed: true });
    let bucket = take(undefined, T0, limit).bucket;
    bucket = take(bucket, T0, limit).bucket;
    expect(peek(bucket, T0, limit)).to.deep.equal({ allowed: true });
    bucket = take(bucket, T0, limit).bucket;
    expect(peek(bucket, T0, limit)).to.deep.equal({ allowed: false, retryAfterSeconds: 1 });
    expect(peek(bucket, T0 + 999, limit).allowed).to.equal(false);
    expect(peek(bucket, T0 + 1000, limit)).to.deep.equal({ allowed: true });
    expect(peek({ tokens: 0, at: T0 }, T0, { per_second: 0.1, burst: 1 })).to.deep.equal({ allowed: false, retryAfterSeconds: 10 });
  });

  it('names an IPv4 client by its address and an IPv6 client by its /64', () => {
    expect(addressBucket(ip('192.0.2.7'))).to.equal('192.0.2.7');
    expect(addressBucket(ip('::ffff:192.0.2.7'))).to.equal('192.0.2.7');
    expect(addressBucket(ip('2001:db8:1:2:aaaa::1'))).to.equal(addressBucket(ip('2001:db8:1:2:ffff:ffff:ffff:ffff')));
    expect(addressBucket(ip('2001:db8:1:2::1'))).to.not.equal(addressBucket(ip('2001:db8:1:3::1')));
  });

  it('lets an address be refused `burst` times, then answers 429 with Retry-After until a refusal is regained', () => {
    let now = T0;
    const limiter = new RefusalLimiter(limit, { now: () => now });
    const client = ip('198.51.100.1');
    for (let i = 0; i < 3; i++) {
      limiter.check(client);
      limiter.refused(client);
    }
    let caught: unknown;
    try {
      limiter.check(client);
    } catch (err) {
      caught = err;
    }
    expect(caught).to.be.instanceOf(AppError);
    expect((caught as AppError).status).to.equal(429);
    expect((caught as AppError).headers['Retry-After']).to.equal('1');
    limiter.check(ip('198.51.100.2'));
    now += 1000;
    limiter.check(client);
  });

  it('forgets addresses whose buckets have refilled, so memory follows the recent refusals only', () => {
    let now = T0;
    const limiter = new RefusalLimiter({ per_second: 1, burst: 30 }, { now: () => now });
    const refuse = (base: number, n: number) => {
      for (let i = 0; i < n; i++) limiter.refused(ip(`10.${(base >> 8) & 255}.${i >> 8}.${i & 255}`));
    };
    refuse(0, 10_000);
    expect(remembered(limiter)).to.equal(10_000);
    now += 60_000;
    refuse(1 << 8, 10_000);
    expect(remembered(limiter)).to.equal(10_000);
  });
});
