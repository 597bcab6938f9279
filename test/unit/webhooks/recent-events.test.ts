import { expect } from 'chai';
import type { Store } from '../../../src/store/store.ts';
import type { EventRecord, JobRecord, WebhookRecord } from '../../../src/store/records.ts';
import { webhookTargets } from '../../../src/webhooks/deliveries.ts';
import { RecentEvents } from '../../../src/webhooks/recent-events.ts';

const event = (id: string): EventRecord => ({ v: 1, id, type: 'message.reception', accountId: 'acc', createdAt: '2026-11-26T10:00:00.000Z', data: { id: 'm' } }) as unknown as EventRecord;

describe('RecentEvents', () => {
  it('keeps the newest events up to its limit, the oldest going first', () => {
    const recent = new RecentEvents(2);
    recent.add(event('a'));
    recent.add(event('b'));
    recent.add(event('a'));
    recent.add(event('c'));
    expect(recent.get('a')).to.equal(undefined);
    expect(recent.get('b')?.id).to.equal('b');
    expect(recent.get('c')?.id).to.equal('c');
  });

  it('builds a webhook body from a kept event without reading the store, and reads the store for others', async () => {
    const recent = new RecentEvents();
    recent.add(event('kept'));
    const reads: string[] = [];
    const store = {
      get: async (_family: string, key: string) => (reads.push(key), key === 'stored' ? event('stored') : undefined),
      getMany: async (_family: string, keys: string[]) => keys.map((key) => (reads.push(key), key === 'stored' ? event('stored') : undefined)),
    } as unknown as Store;
    const targets = webhookTargets({ store, webhooks: {} as never, counters: {} as never, secretOf: () => '', disable: async () => false, recent });
    const job = (eventId: string) => ({ eventId }) as JobRecord;
    const hook = { id: 'w' } as WebhookRecord;
    expect(JSON.parse(String(await targets.body(job('kept'), hook)))).to.include({ type: 'message.reception', webhook_id: 'w' });
    expect(reads).to.deep.equal([]);
    expect(await targets.body(job('stored'), hook)).to.be.a('string');
    expect(await targets.body(job('gone'), hook)).to.equal(null);
    expect(reads).to.deep.equal(['stored', 'gone']);
    // Jobs taken together: the events not kept are read once each, in one read.
    reads.length = 0;
    const bodies = await targets.bodies!([job('kept'), job('stored'), job('gone'), job('stored')].map((j) => ({ job: j, target: hook })));
    expect(bodies.map((b) => (b === null ? null : (JSON.parse(b) as { webhook_id: string }).webhook_id))).to.deep.equal(['w', 'w', null, 'w']);
    expect(reads).to.deep.equal(['stored', 'gone']);
  });

  it('keeps the events it found in memory while it reads the others, though the fan-out pushes them out meanwhile', async () => {
    const recent = new RecentEvents(1);
    recent.add(event('kept'));
    const store = {
      // While the read is under way, the fan-out adds an event: 'kept' leaves memory.
      getMany: async (_family: string, keys: string[]) => {
        recent.add(event('newer'));
        return keys.map((key) => (key === 'stored' ? event('stored') : undefined));
      },
    } as unknown as Store;
    const targets = webhookTargets({ store, webhooks: {} as never, counters: {} as never, secretOf: () => '', disable: async () => false, recent });
    const hook = { id: 'w' } as WebhookRecord;
    const bodies = await targets.bodies!(['kept', 'stored'].map((eventId) => ({ job: { eventId } as JobRecord, target: hook })));
    expect(recent.get('kept')).to.equal(undefined);
    expect(bodies.map((b) => b !== null)).to.deep.equal([true, true]);
  });
});
