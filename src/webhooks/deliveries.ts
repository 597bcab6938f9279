import { HTTP_SCHEDULES } from '../queue/retry-policy.ts';
import type { HttpTargets } from '../queue/http-jobs.ts';
import type { EventsRepo } from '../store/events-repo.ts';
import type { EventRecord, WebhookRecord } from '../store/records.ts';
import type { WebhooksRepo } from '../store/webhooks-repo.ts';
import type { TargetCounters } from '../queue/target-counters.ts';
import { envelope } from './payload.ts';
import type { RecentEvents } from './recent-events.ts';
import { isTestDelivery, testEnvelope } from './test-event.ts';

/**
 * Webhooks as the targets of the engine's `webhook` HTTP jobs: 6 attempts over ≈16 minutes, the
 * body built from the stored event when the request is made.
 */
export function webhookTargets(d: {
  events: Pick<EventsRepo, 'getMany'>;
  webhooks: WebhooksRepo;
  counters: TargetCounters;
  secretOf: (webhook: WebhookRecord) => string;
  disable: (id: string) => Promise<boolean>;
  /** Events just fanned out (read from memory, else from the store). */
  recent?: RecentEvents;
}): HttpTargets {
  const bodies: NonNullable<HttpTargets['bodies']> = async (items) => {
    // The events kept in memory are taken now, once per job (the last job's take forgets it);
    // the others are read at once, each once (both webhooks of an event share it).
    const found = new Map<string, EventRecord | undefined>();
    for (const { job } of items) {
      if (isTestDelivery(job)) continue;
      const kept = d.recent?.take(job.eventId);
      if (kept) found.set(job.eventId, kept);
      else if (!found.has(job.eventId)) found.set(job.eventId, undefined);
    }
    const unread = [...found].filter(([, event]) => event === undefined).map(([id]) => id);
    const read = await d.events.getMany(unread);
    for (const [i, id] of unread.entries()) found.set(id, read[i]);
    return items.map(({ job, target }) => {
      if (isTestDelivery(job)) return testEnvelope(job, target.id);
      const event = found.get(job.eventId);
      return event ? envelope(event, target.id) : null;
    });
  };
  return {
    kind: 'webhook',
    schedule: HTTP_SCHEDULES.webhook,
    // A webhook body is small: read with the job, the origin's slot waits only for the request.
    prefetchBody: true,
    get: (id) => d.webhooks.get(id),
    body: async (job, target) => (await bodies([{ job, target }]))[0]!,
    bodies,
    secretOf: (target) => d.secretOf(target as WebhookRecord),
    counters: d.counters,
    disable: (id) => d.disable(id),
  };
}
