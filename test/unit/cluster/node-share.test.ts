import { expect } from 'chai';
import { RateLimiter } from '../../../src/api/middleware/rate-limit.ts';
import { shareBuckets } from '../../../src/cluster/buckets.ts';
import { ShareGate } from '../../../src/cluster/destination-gate.ts';
import { countShare, nodeCount, rateShare } from '../../../src/cluster/node-share.ts';
import { AuthThrottle } from '../../../src/smtp/auth-throttle.ts';
import { AppError } from '../../../src/util/errors.ts';

const T0 = 1_700_000_000_000;

/** How many of `n` calls went through (a 429 counts as refused). */
function admitted(n: number, call: () => unknown): number {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    try {
      call();
      ok += 1;
    } catch (err) {
      if (!(err instanceof AppError) || err.status !== 429) throw err;
    }
  }
  return ok;
}

describe("a node's share of a cluster-wide limit (no Redis)", () => {
  it('divides rates, bursts and counts by the live nodes, never below one of each', () => {
    expect(nodeCount(3)).to.equal(3);
    expect(nodeCount(0)).to.equal(1);
    expect(nodeCount(Number.NaN)).to.equal(1);
    expect(nodeCount(2.7)).to.equal(2);
    expect(rateShare({ per_second: 100, burst: 200 }, 4)).to.deep.equal({ per_second: 25, burst: 50 });
    expect(rateShare({ per_second: 1, burst: 1 }, 3)).to.deep.equal({ per_second: 1 / 3, burst: 1 });
    expect(rateShare({ per_second: 5, burst: 10 }, 1)).to.deep.equal({ per_second: 5, burst: 10 });
    expect(countShare(5, 2)).to.equal(2);
    expect(countShare(5, 1)).to.equal(5);
    expect(countShare(2, 5)).to.equal(1);
  });

  it('gives each API node limit ÷ live nodes, and the whole limit back when the others are gone', () => {
    let now = T0;
    let live = 2;
    const limits = { general: { per_second: 10, burst: 10 }, statistics: { per_second: 1, burst: 1 } };
    const node1 = new RateLimiter(
      limits,
      { now: () => now },
      shareBuckets({ now: () => now }, () => live),
    );
    const node2 = new RateLimiter(
      limits,
      { now: () => now },
      shareBuckets({ now: () => now }, () => live),
    );
    // A burst of 10 cluster-wide: 5 on each node.
    expect(admitted(20, () => node1.consume('acct', 'general'))).to.equal(5);
    expect(admitted(20, () => node2.consume('acct', 'general'))).to.equal(5);
    // One second later each has regained 10 ÷ 2 tokens.
    now += 1000;
    expect(admitted(20, () => node1.consume('acct', 'general'))).to.equal(5);
    // The other node is gone: after a second this one may take the whole limit.
    live = 1;
    now += 1000;
    expect(admitted(20, () => node1.consume('acct', 'general'))).to.equal(10);
  });

  it('says how long to wait from the share, not the whole limit', () => {
    const limits = { general: { per_second: 100, burst: 200 }, statistics: { per_second: 1, burst: 1 } };
    const limiter = new RateLimiter(
      limits,
      { now: () => T0 },
      shareBuckets({ now: () => T0 }, () => 4),
    );
    limiter.consume('acct', 'statistics');
    try {
      limiter.consume('acct', 'statistics');
      expect.fail('expected a 429');
    } catch (err) {
      // 1 per second cluster-wide is one every 4 s on each of 4 nodes.
      expect((err as AppError).headers['Retry-After']).to.equal('4');
    }
  });

  it("limits a destination's connections and rate on each node to its share", () => {
    let now = T0;
    let live = 3;
    const gate = new ShareGate(() => live, { now: () => now });
    const first = gate.enter('mx.example', 7);
    const second = gate.enter('mx.example', 7);
    expect(first).to.be.a('function');
    expect(second).to.be.a('function');
    // 7 ÷ 3 = 2 slots here.
    expect(gate.enter('mx.example', 7)).to.be.a('number').above(0);
    expect(gate.slotsInUse).to.equal(2);
    (first as () => void)();
    (first as () => void)();
    expect(gate.slotsInUse).to.equal(1);
    expect(gate.enter('mx.example', 7)).to.be.a('function');
    // Another destination has its own slots.
    expect(gate.enter('mx.other', 7)).to.be.a('function');
    // 30 per second cluster-wide: 10 here, with a burst of 10.
    let started = 0;
    while (gate.take('mx.example', 30) === 0) started += 1;
    expect(started).to.equal(10);
    now += 100;
    expect(gate.take('mx.example', 30)).to.equal(0);
    expect(gate.take('mx.example', 30)).to.be.above(0);
    live = 1;
    expect(gate.enter('mx.example', 7)).to.be.a('function');
  });

  it("blocks SMTP AUTH on each node after its share of the cluster's failures", () => {
    let live = 2;
    const throttle = new AuthThrottle(5, 60_000, { now: () => T0 }, () => live);
    throttle.fail('192.0.2.1');
    expect(throttle.blocked('192.0.2.1')).to.equal(false);
    throttle.fail('192.0.2.1');
    expect(throttle.blocked('192.0.2.1')).to.equal(true);
    live = 1;
    expect(throttle.blocked('192.0.2.1')).to.equal(false);
  });
});
