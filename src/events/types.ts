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

export type Event = { type: 'domain.dns_error'; accountId: string; data: DomainDnsErrorData };

export type EventType = Event['type'];
