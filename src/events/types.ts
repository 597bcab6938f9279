import type { WriteOp } from '../store/group-commit.ts';
import type { EventRecord, MessageRecord } from '../store/records.ts';

/**
 * The closed set of event types. Each is one variant with its own data; `events/` is the only
 * place where an outcome becomes a stored event.
 */
export interface DomainDnsErrorData {
  domain: string;
  account_id: string;
  spf_valid: boolean;
  dkim_valid: boolean;
  dmarc_valid: boolean;
  dns_last_checked_at: string;
}

/** The core of every message event, in the order the reference producer writes it. */
export interface MessageEventData {
  account_id: string;
  event: MessageEventName;
  from: string;
  recipient: string;
  subject: string;
  message_id_header: string;
  is_bot: boolean;
  id: string;
  /** On delivered, bounced and transient_error when an SMTP attempt was recorded (§5.2). */
  delivery_attempt?: DeliveryAttemptData;
}

/** `message.opened`: the core fields with who opened it (reference-api §5.2). */
export interface MessageOpenedData {
  account_id: string;
  event: 'on_opened';
  from: string;
  recipient: string;
  subject: string;
  message_id_header: string;
  id: string;
  user_agent: string;
  ip: string;
  is_bot: boolean;
}

/** `message.clicked` (MessageClickedWebhookData): the opened fields and the link's URL. */
export interface MessageClickedData {
  account_id: string;
  event: 'on_clicked';
  from: string;
  recipient: string;
  subject: string;
  message_id_header: string;
  url: string;
  user_agent: string;
  ip: string;
  id: string;
  is_bot: boolean;
}

/** `suppression.created` (reference-api §5.2). */
export interface SuppressionCreatedData {
  account_id: string;
  recipient: string;
  created_at: string;
  expires_at: string;
  reason: string;
  sending_domain: string;
}

export type MessageEventName = 'on_reception' | 'on_delivered' | 'on_transient_error' | 'on_bounced' | 'on_failed' | 'on_suppressed';

/** What one SMTP attempt answered: reference-api §5.2 `delivery_attempt`. */
export interface DeliveryAttemptData {
  /** 0 when there was no SMTP reply (connection, DNS or internal errors). */
  smtp_code: number;
  enhanced_status_code?: string;
  response?: string;
  command?: string;
  /** Absent on success. */
  classification?: string;
  /** Postilion's addition: the delivery source the attempt went out from (delivery.sources). */
  source?: string;
  /** Postilion's addition: the TLS the session had and the policy that governed it. */
  tls?: { policy: string; mode?: string; version: string | null; verified: boolean };
}

export type Event =
  | { type: 'domain.dns_error'; accountId: string; data: DomainDnsErrorData }
  | { type: 'message.reception'; accountId: string; data: MessageEventData }
  | { type: 'message.delivered'; accountId: string; data: MessageEventData }
  | { type: 'message.transient_error'; accountId: string; data: MessageEventData }
  | { type: 'message.bounced'; accountId: string; data: MessageEventData }
  | { type: 'message.failed'; accountId: string; data: MessageEventData }
  | { type: 'message.suppressed'; accountId: string; data: MessageEventData }
  | { type: 'message.opened'; accountId: string; data: MessageOpenedData }
  | { type: 'message.clicked'; accountId: string; data: MessageClickedData }
  | { type: 'suppression.created'; accountId: string; data: SuppressionCreatedData };

export type EventType = Event['type'];

/**
 * The message an event is about, as it is after the change the event reports: what the event's
 * observers (the statistics counters) count it by. `first`: an open or click that is the
 * message's first one by a person (not a bot).
 */
export interface EventSubject {
  message: MessageRecord;
  first?: boolean;
}

/** Adds its own ops to the batch of each recorded event (statistics counters). */
export type EventObserver = (event: EventRecord, subject: EventSubject | undefined) => WriteOp[];
