import { expect } from 'chai';
import type { EventRecord, JobRecord, WebhookRecord } from '../../../src/store/records.ts';
import { webhookTargets } from '../../../src/webhooks/deliveries.ts';
import { RecentEvents } from '../../../src/webhooks/recent-events.ts';

const event = (id: string): EventRecord =>
  ({ v: 1, id, type: 'message.reception', accountId: 'acc', createdAt: '2026-11-26T10:00:00.000Z', data: { id: 'm' } }) as unknown as EventRecord;

describe('RecentEvents', () => {
  it('keeps an event until each of its jobs has taken it, and no more than its limit', () => {
    const recent = new RecentEvents(2);
    recent.add(event('a'), 2);
    recent.add(event('b'));
    // Full, and what it holds is recent: a newcomer is not kept.
    recent.add(event('c'));
    expect(recent.take('c')).to.equal(undefined);
    expect(recent.take('a')?.id).to.equal('a');
    expect(recent.take('a')?.id).to.equal('a');
    expect(recent.take('a')).to.equal(undefined);
    expect(recent.take('b')?.id).to.equal('b');
    expect(recent.take('b')).to.equal(undefined);
  });

  it('builds a webhook body from a kept event without reading the store, and reads the store for others', async () => {
    const recent = new RecentEvents();
    recent.add(event('kept'), 2);
    const reads: string[] = [];
    const events = {
      getMany: async (keys: readonly string[]) => keys.map((key) => (reads.push(key), key === 'stored' ? event('stored') : undefined)),
    };
    const targets = webhookTargets({ events, webhooks: {} as never, counters: {} as never, secretOf: () => '', disable: async () => false, recent });
    const job = (eventId: string) => ({ eventId }) as JobRecord;
    const hook = { id: 'w' } as WebhookRecord;
    expect(JSON.parse(String(await targets.body(job('kept'), hook)))).to.include({ type: 'message.reception', webhook_id: 'w' });
    expect(reads).to.deep.equal([]);
    expect(await targets.body(job('stored'), hook)).to.be.a('string');
    expect(await targets.body(job('gone'), hook)).to.equal(null);
    expect(reads).to.deep.equal(['stored', 'gone']);
    // Jobs taken together: the events not kept are read once each, in one read.
    reads.length = 0;
    recent.add(event('kept'), 1);
    const bodies = await targets.bodies!([job('kept'), job('stored'), job('gone'), job('stored')].map((j) => ({ job: j, target: hook })));
    expect(bodies.map((b) => (b === null ? null : (JSON.parse(b) as { webhook_id: string }).webhook_id))).to.deep.equal(['w', 'w', null, 'w']);
    expect(reads).to.deep.equal(['stored', 'gone']);
  });

  it('an event taken by its last job leaves memory: a retry of that job reads it from the store', async () => {
    const recent = new RecentEvents();
    recent.add(event('kept'), 2);
    const reads: string[] = [];
    const events = {
      getMany: async (keys: readonly string[]) => keys.map((key) => (reads.push(key), key === 'kept' ? event('kept') : undefined)),
    };
    const targets = webhookTargets({ events, webhooks: {} as never, counters: {} as never, secretOf: () => '', disable: async () => false, recent });
    const hook = { id: 'w' } as WebhookRecord;
    // Both webhooks' jobs of the event, read together: neither reads the store.
    const bodies = await targets.bodies!(['kept', 'kept'].map((eventId) => ({ job: { eventId } as JobRecord, target: hook })));
    expect(bodies.map((b) => b !== null)).to.deep.equal([true, true]);
    expect(reads).to.deep.equal([]);
    expect(await targets.body({ eventId: 'kept' } as JobRecord, hook)).to.be.a('string');
    expect(reads).to.deep.equal(['kept']);
  });
});
