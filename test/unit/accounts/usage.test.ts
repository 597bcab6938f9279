import { expect } from 'chai';
import { allocate, billingPeriod, CreditExhausted, CreditGate } from '../../../src/accounts/usage.ts';
import type { AccountRecord } from '../../../src/store/records.ts';

describe('usage arithmetic', () => {
  it('splits an amount in proportion, the parts adding up to it exactly', () => {
    expect(allocate(10_000, [2, 3, 1, 4])).to.deep.equal([2000, 3000, 1000, 4000]);
    // 100.00 in three equal parts: the first remainder gets the odd cent.
    expect(allocate(10_000, [1, 1, 1])).to.deep.equal([3334, 3333, 3333]);
    // Largest remainders first.
    expect(allocate(100, [1, 2, 4])).to.deep.equal([14, 29, 57]);
    for (const volumes of [
      [7, 13, 0, 29],
      [1, 1_000_000],
      [3, 3, 3, 3, 3, 3, 3],
    ]) {
      expect(allocate(12_345, volumes).reduce((a, b) => a + b, 0)).to.equal(12_345);
    }
  });

  it('leaves the whole amount with the parent when nothing was received, and 0 when there is no amount', () => {
    expect(allocate(5000, [0, 0, 0])).to.deep.equal([5000, 0, 0]);
    expect(allocate(0, [3, 4])).to.deep.equal([0, 0]);
  });

  it('takes the calendar month in UTC as the billing period', () => {
    expect(billingPeriod(Date.parse('2026-12-31T23:59:59.999Z'))).to.deep.equal({
      start: Date.parse('2026-12-01T00:00:00Z'),
      end: Date.parse('2027-01-01T00:00:00Z'),
    });
    expect(billingPeriod(Date.parse('2027-02-01T00:00:00Z'))).to.deep.equal({
      start: Date.parse('2027-02-01T00:00:00Z'),
      end: Date.parse('2027-03-01T00:00:00Z'),
    });
  });
});

describe('CreditGate', () => {
  const account = (monthlyCredit: number) => ({ id: 'a', monthlyCredit }) as AccountRecord;

  it("reads the period's count once for concurrent sends and never lets them past the credit together", async () => {
    let reads = 0;
    let release!: () => void;
    const gate = new CreditGate(
      () => {
        reads += 1;
        return new Promise<number>((resolve) => (release = () => resolve(2)));
      },
      { now: () => Date.parse('2026-11-15T00:00:00Z') },
    );
    const sends = [gate.reserve(account(5), 2), gate.reserve(account(5), 2), gate.reserve(account(5), 1)];
    await new Promise((r) => setImmediate(r));
    release();
    const results = await Promise.allSettled(sends);
    expect(reads).to.equal(1);
    // 2 already used: 2 more fit, then 1; the second 2 would make 6.
    expect(results.map((r) => r.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).to.be.instanceOf(CreditExhausted);
  });

  it('gives a reservation back when its commit fails', async () => {
    const gate = new CreditGate(async () => 0, { now: () => 0 });
    const undo = await gate.reserve(account(1), 1);
    undo();
    await gate.reserve(account(1), 1);
    let refused: unknown = null;
    await gate.reserve(account(1), 1).catch((err: unknown) => (refused = err));
    expect(refused).to.be.instanceOf(CreditExhausted);
    expect((refused as CreditExhausted).status).to.equal(403);
  });

  it('does not read the counters for an account without a credit', async () => {
    let reads = 0;
    const gate = new CreditGate(async () => (reads += 1), { now: () => 0 });
    for (let i = 0; i < 10; i++) await gate.reserve(account(0), 1000);
    expect(reads).to.equal(0);
  });
});
