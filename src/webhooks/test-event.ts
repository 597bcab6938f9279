import { newJob, type JobsRepo } from '../store/jobs-repo.ts';
import type { JobRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { conflict } from '../util/errors.ts';
import { nanoseconds, type Clock } from '../util/time.ts';
import type { Webhooks } from './webhooks.ts';

/** The type of a test event: not one of the stored events, so no webhook flag subscribes to it. */
export const TEST_EVENT_TYPE = 'webhook.test';
/** A test delivery's job names no stored event: its `eventId` starts with this. */
const TEST_EVENT_PREFIX = 'test:';

export function isTestDelivery(job: Pick<JobRecord, 'eventId'>): boolean {
  return job.eventId.startsWith(TEST_EVENT_PREFIX);
}

/** The body of a test delivery, shaped like every event's envelope (payload.ts). */
export function testEnvelope(job: Pick<JobRecord, 'createdAt'>, webhookId: string): string {
  return JSON.stringify({
    type: TEST_EVENT_TYPE,
    timestamp: nanoseconds(job.createdAt),
    webhook_id: webhookId,
    data: { message: 'a test event, sent from the dashboard: this endpoint receives and verifies signed webhooks' },
  });
}

export interface TestEventDeps {
  store: Store;
  jobs: JobsRepo;
  webhooks: Pick<Webhooks, 'get'>;
  clock: Clock;
  /** Tells the engine of a job due at `dueMs`. */
  notify: (dueMs: number) => void;
}

/**
 * "Send test event": one webhook delivery job, signed and retried like any other, whose body is
 * a `webhook.test` envelope instead of a stored event (nothing is added to the events, so no
 * statistic and no other webhook hears of it). Only an enabled webhook of the account.
 */
export async function sendTestEvent(d: TestEventDeps, accountId: string, webhookId: string): Promise<{ delivery_id: string }> {
  const webhook = await d.webhooks.get(accountId, webhookId);
  if (!webhook.enabled) throw conflict('the webhook is disabled: enable it to send it a test event');
  const now = d.clock.now();
  const job = newJob('webhook', { accountId, targetId: webhook.id, eventId: `${TEST_EVENT_PREFIX}${webhook.id}` }, now);
  await d.store.commit(d.jobs.create(job));
  d.jobs.created([job]);
  d.notify(now);
  return { delivery_id: job.id };
}
