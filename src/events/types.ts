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
  event: 'on_reception';
  from: string;
  recipient: string;
  subject: string;
  message_id_header: string;
  is_bot: boolean;
  id: string;
}

export type Event =
  | { type: 'domain.dns_error'; accountId: string; data: DomainDnsErrorData }
  | { type: 'message.reception'; accountId: string; data: MessageEventData };

export type EventType = Event['type'];
