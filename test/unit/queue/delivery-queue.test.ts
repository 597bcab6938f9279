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
  createdAt: '2026-11-21T10:00:00.000Z',
  attempts: [],
  sandbox: null,
  schedule: null,
  bodyId: 'b1',
} as unknown as MessageRecord;

describe('DeliveryQueue.process', () => {
  function queueWith(stored: MessageRecord | undefined, suppressed = false) {
    const calls: string[] = [];
    const deliverer = {
      attempt: async () => (calls.push('attempt'), { outcome: 'delivered', smtpCode: 250, enhanced: '', response: '250 ok', command: 'DATA', host: 'mx' }),
      done: (bodyId: string) => calls.push(`done ${bodyId}`),
    } as unknown as Deliverer;
    const outcomes = {
      apply: async () => (calls.push('apply'), null),
      suppress: async () => (calls.push('suppress'), null),
      simulate: async () => (calls.push('simulate'), null),
    } as unknown as Outcomes;
    const suppressions = { active: async () => (suppressed ? ({ id: 's' } as never) : undefined) };
    const queue = new DeliveryQueue(
      deliverer,
      outcomes,
      suppressions,
      { get: async () => stored },
      { now: () => Date.parse(taken.dueAt) },
      pino({ level: 'silent' }),
    );
    return { queue, calls };
  }

  it('sends the message when the stored record is still the one taken, then lets its body go', async () => {
    const { queue, calls } = queueWith(taken);
    await queue.process(taken);
    expect(calls).to.deep.equal(['attempt', 'apply', 'done b1']);
  });

  it('lets the body go for a message not sent (suppressed), but not for sends never announced', async () => {
    const suppressed = queueWith(taken, true);
    await suppressed.queue.process(taken);
    expect(suppressed.calls).to.deep.equal(['suppress', 'done b1']);
    const sandbox = { ...taken, sandbox: 'deliver' } as MessageRecord;
    const simulated = queueWith(sandbox);
    await simulated.queue.process(sandbox);
    expect(simulated.calls).to.deep.equal(['simulate']);
    // A retry, and mail scheduled past its acceptance, were not counted when their body was kept.
    const retry = { ...taken, attempts: [{ time: taken.dueAt, log: '451 later', status: 'Deferred' }] } as MessageRecord;
    const later = { ...taken, dueAt: '2026-11-21T11:00:00.000Z' } as MessageRecord;
    for (const message of [retry, later]) {
      const { queue, calls } = queueWith(message);
      await queue.process(message);
      expect(calls).to.deep.equal(['attempt', 'apply']);
    }
  });

  it('does not send a message cancelled, purged or gone since it was taken, and frees its slot', async () => {
    for (const stored of [{ ...taken, status: 'Cancelled' } as MessageRecord, { ...taken, status: 'Failed' } as MessageRecord, undefined]) {
      const { queue, calls } = queueWith(stored);
      let freed = false;
      await queue.process(taken, () => (freed = true));
      expect(calls).to.deep.equal(['done b1']);
      expect(freed).to.equal(true);
    }
  });

  it('makes no logger for the message when the level drops its lines, and one when a line is written', async () => {
    for (const [level, made] of [
      ['silent', 0],
      ['info', 1],
    ] as const) {
      const log = pino({ level }, { write: () => undefined });
      let children = 0;
      const child = log.child.bind(log);
      Object.assign(log, { child: (...args: Parameters<typeof child>) => (children++, child(...args)) });
      const queue = new DeliveryQueue(
        {
          attempt: async () => ({ outcome: 'delivered', smtpCode: 250, enhanced: '', response: '250 ok', command: 'DATA', host: 'mx' }),
          done: () => undefined,
        } as unknown as Deliverer,
        { apply: async () => ({ ...taken, status: 'Delivered' }) } as unknown as Outcomes,
        { active: async () => undefined },
        { get: async () => taken },
        { now: () => Date.parse(taken.dueAt) },
        log,
        { replied: () => undefined },
      );
      await queue.process(taken);
      expect(children, level).to.equal(made);
    }
  });
});
