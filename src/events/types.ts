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
}

export type Event =
  | { type: 'domain.dns_error'; accountId: string; data: DomainDnsErrorData }
  | { type: 'message.reception'; accountId: string; data: MessageEventData }
  | { type: 'message.delivered'; accountId: string; data: MessageEventData }
  | { type: 'message.transient_error'; accountId: string; data: MessageEventData }
  | { type: 'message.bounced'; accountId: string; data: MessageEventData }
  | { type: 'message.failed'; accountId: string; data: MessageEventData }
  | { type: 'message.suppressed'; accountId: string; data: MessageEventData }
  | { type: 'suppression.created'; accountId: string; data: SuppressionCreatedData };

export type EventType = Event['type'];
