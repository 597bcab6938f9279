import { expect } from 'chai';
import pino from 'pino';
import type { Deliverer } from '../../../src/delivery/deliverer.ts';
import { DeliveryQueue } from '../../../src/queue/delivery-queue.ts';
import type { Outcomes } from '../../../src/queue/outcomes.ts';
import type { MessageRecord } from '../../../src/store/records.ts';

const taken = {
  id: '01900000-0000-7000-8000-000000000001',
  accountId: 'a',
  domain: 'example.com',
  recipient: 'r@example.org',
  status: 'Received',
  dueAt: '2026-11-21T10:00:00.000Z',
  sandbox: null,
  schedule: null,
} as unknown as MessageRecord;

describe('DeliveryQueue.process', () => {
  function queueWith(stored: MessageRecord | undefined) {
    const calls: string[] = [];
    const deliverer = { attempt: async () => (calls.push('attempt'), { outcome: 'delivered', smtpCode: 250, enhanced: '', response: '250 ok', command: 'DATA', host: 'mx' }) } as unknown as Deliverer;
    const outcomes = { apply: async () => (calls.push('apply'), null) } as unknown as Outcomes;
    const queue = new DeliveryQueue(deliverer, outcomes, { active: async () => undefined }, { get: async () => stored }, { now: () => Date.parse(taken.dueAt) }, pino({ level: 'silent' }));
    return { queue, calls };
  }

  it('sends the message when the stored record is still the one taken', async () => {
    const { queue, calls } = queueWith(taken);
    await queue.process(taken);
    expect(calls).to.deep.equal(['attempt', 'apply']);
  });

  it('does not send a message cancelled, purged or gone since it was taken, and frees its slot', async () => {
    for (const stored of [{ ...taken, status: 'Cancelled' } as MessageRecord, { ...taken, status: 'Failed' } as MessageRecord, undefined]) {
      const { queue, calls } = queueWith(stored);
      let freed = false;
      await queue.process(taken, () => (freed = true));
      expect(calls).to.deep.equal([]);
      expect(freed).to.equal(true);
    }
  });
});
