import type { MessageRecord, MessageStatus } from '../store/records.ts';

export const DAY_MS = 24 * 60 * 60 * 1000;

/** States after which nothing more is delivered: the content may then be dropped. */
const FINAL: ReadonlySet<MessageStatus> = new Set<MessageStatus>([
  'Delivered',
  'Bounced',
  'Failed',
  'Suppressed',
  'Cancelled',
  'Sandbox Delivered',
  'Sandbox Deferred',
  'Sandbox Failed',
  'Sandbox Bounced',
  'Sandbox Suppressed',
]);

export function isFinal(status: MessageStatus): boolean {
  return FINAL.has(status);
}

/** Metadata and content purge times of a message created at `createdMs`. */
export function retentionTimes(createdMs: number, retention: MessageRecord['retention']): { retainUntil: number; dataRetainUntil: number } {
  return {
    retainUntil: createdMs + retention.metadataDays * DAY_MS,
    dataRetainUntil: createdMs + retention.dataDays * DAY_MS,
  };
}

/** Whether the content should be dropped now: retention over and delivery final. */
export function contentDue(message: MessageRecord, nowMs: number): boolean {
  return !message.contentPurged && isFinal(message.status) && Date.parse(message.dataRetainUntil) <= nowMs;
}
