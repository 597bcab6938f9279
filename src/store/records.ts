/**
 * Stored record formats. Each carries a version so that the format can migrate.
 * Timestamps are RFC 3339 strings; ids are UUIDv7.
 */

import type { Counts } from './types.ts';

export interface AccountRecord {
  v: 1;
  id: string;
  parentAccountId: string | null;
  name: string;
  website: string;
  about: string;
  trackOpens: boolean;
  trackClicks: boolean;
  rejectBadRecipients: boolean;
  rejectMistypedRecipients: boolean;
  messageMetadataRetention: number;
  messageDataRetention: number;
  ownerId: string;
  status: AccountStatus;
  /** Why the account was suspended (by its parent or the operator); absent or null when it is not. */
  suspension?: { reason: string; at: string; by: 'parent' | 'operator' } | null;
  /** A sub account's cap on receptions per calendar month (UTC); absent or 0: no cap. */
  monthlyCredit?: number;
  /** When a sub account was soft-deleted. */
  deletedAt?: string | null;
  /**
   * The header From of its mail submitted over SMTP: `own` (absent: the default) must be at a
   * domain the credential may send from; `any` lets it be anywhere (forwarding set-ups: the
   * message is signed with the MAIL FROM domain and may not align for DMARC). Set by the operator
   * (`postilion accounts smtp-header-from`), not by the API.
   */
  smtpHeaderFrom?: 'own' | 'any';
  /** The delivery pool (delivery.pools) its mail leaves from, set by the operator; absent or null: the configured one. */
  deliveryPool?: string | null;
  createdAt: string;
  updatedAt: string;
}

/**
 * `active`; `suspended` directly (operator, or a parent for its sub account); `parent-suspended`
 * while its parent is suspended; `deleted` (a soft-deleted sub account). Only `active` sends.
 */
export const ACCOUNT_STATUSES = ['active', 'suspended', 'parent-suspended', 'deleted'] as const;
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];

export interface UserRecord {
  v: 1;
  id: string;
  email: string;
  name: string;
  createdAt: string;
}

export const MEMBER_ROLES = ['Administrator', 'Developer', 'Analyst', 'Billing Manager'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

export interface MemberRecord {
  v: 1;
  accountId: string;
  userId: string;
  role: MemberRole;
  createdAt: string;
  updatedAt: string;
}

export interface ApiKeyScopeRecord {
  id: string;
  scope: string;
  domainId: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface ApiKeyRecord {
  v: 1;
  id: string;
  accountId: string;
  /** v2 keys authenticate with Bearer on /v2; v1 keys with X-Api-Key on /v1. */
  kind: 'v2' | 'v1';
  label: string;
  publicKey: string;
  /** Hex SHA-256 of the secret; the secret itself is never stored. */
  secretHash: string;
  scopes: ApiKeyScopeRecord[];
  ipAllowList: string[];
  createdAt: string;
  updatedAt: string;
  lastUsedAt: string | null;
}

export interface StoredResponse {
  status: number;
  /** JSON body as text, or base64 AES-GCM ciphertext when `encrypted`. */
  body: string;
  encrypted: boolean;
}

export interface IdempotencyRecord {
  v: 1;
  accountId: string;
  key: string;
  /** SHA-256 over method, resolved path and the SHA-256 of the raw body. */
  fingerprint: string;
  state: 'in_progress' | 'completed';
  /** in_progress: end of the lease; completed: end of the replay window. */
  expiresAt: number;
  response: StoredResponse | null;
  /**
   * The API key that made the request, and a digest of the scopes it held then: the outcome is
   * replayed to that key only, and only while it holds the same scopes. Absent on records of
   * earlier releases, which are then replayed to no one.
   */
  owner?: { keyId: string; scopes: string };
}

export interface DkimKeyRecord {
  selector: string;
  algorithm: 'rsa' | 'ed25519';
  /** The DNS `p=` value. */
  publicKey: string;
  createdAt: string;
}

/** One signing identity: an RSA key, and an Ed25519 key signed alongside when enabled. */
export interface DkimSlotRecord {
  keys: DkimKeyRecord[];
  /** When the slot became the active one (active and retired slots). */
  activatedAt: string | null;
  /** Retired slots: published until then, then deleted. */
  publishUntil: string | null;
}

export interface DomainRecord {
  v: 1;
  id: string;
  accountId: string;
  name: string;
  trackingSubdomain: string;
  returnPathSubdomain: string;
  subscriptionSubdomain: string;
  mediaSubdomain: string;
  dkimRotationIntervalDays: number | null;
  /** The selector the account asked for (`dkim_selector`), or null for a generated one. */
  dkimSelectorOverride: string | null;
  dsnRecipient: string | null;
  dkim: {
    active: DkimSlotRecord;
    standby: DkimSlotRecord | null;
    retired: DkimSlotRecord[];
  };
  dns: {
    checkedAt: string | null;
    /** Record key (see domains/records.ts) → whether it was found as published. */
    propagated: Record<string, boolean>;
    valid: boolean;
    /** Set the first time the domain's DNS was valid: the selector is then locked. */
    everValid: boolean;
    /**
     * The operator marked the DNS as verified by hand (`postilion domains verify`): the domain
     * counts as valid whatever the checks find, until the mark is cleared. Absent or null: never.
     */
    byHand?: { at: string; by: string } | null;
  };
  createdAt: string;
  updatedAt: string;
}

export interface EventRecord {
  v: 1;
  id: string;
  accountId: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
  /**
   * Cluster mode: what the event adds to the statistics counters (its `count` op: the key it is
   * attributed to and the counts), kept so that its publication adds it to the cluster's
   * counters (cluster/publication.ts). Absent when it counts nothing, and on a single node.
   */
  count?: { key: string; value: Counts };
}

/**
 * A recipient address not to send to from one sender domain, until `expiresAt`. The email is
 * kept lower-cased; one record per (account, email, domain).
 */
export interface SuppressionRecord {
  v: 1;
  id: string;
  accountId: string;
  email: string;
  /** The sender domain's name. */
  domain: string;
  reason: string;
  /** What made it: an API call, a hard bounce, a final delivery failure, or a complaint (protected). */
  source: 'api' | 'bounce' | 'failure' | 'complaint';
  createdAt: string;
  expiresAt: string;
}

/** How an SMTP credential's password is kept: only an scrypt hash, with its own salt and cost. */
export interface PasswordHashRecord {
  scheme: 'scrypt';
  n: number;
  r: number;
  p: number;
  /** base64 */
  salt: string;
  /** base64 */
  hash: string;
}

/**
 * A username and password for SMTP submission. `domains` are the associated domains of a
 * `scoped` credential, by id (with the name they had): a deleted domain no longer counts, even
 * when a domain of the same name is added again later.
 */
export interface SmtpCredentialRecord {
  v: 1;
  id: string;
  accountId: string;
  name: string;
  username: string;
  password: PasswordHashRecord;
  sandbox: boolean;
  scope: 'global' | 'scoped';
  domains: Array<{ id: string; name: string }>;
  createdAt: string;
  updatedAt: string;
}

/** The message states the read API reports and filters on (`Cancelled` is Postilion's own). */
export const MESSAGE_STATUSES = [
  'Received',
  'Delivered',
  'Deferred',
  'Bounced',
  'Failed',
  'Suppressed',
  'Sandbox Delivered',
  'Sandbox Deferred',
  'Sandbox Failed',
  'Sandbox Bounced',
  'Sandbox Suppressed',
  'Cancelled',
] as const;
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];

export const SANDBOX_RESULTS = ['deliver', 'bounce', 'defer', 'fail', 'suppress'] as const;
export type SandboxResult = (typeof SANDBOX_RESULTS)[number];

export interface DeliveryAttemptRecord {
  time: string;
  log: string;
  status: string;
  /** The TLS of the attempt's session and its policy (delivery/tls-outcome.ts TlsOutcome); absent without a session. */
  tls?: { policy: string; mode?: string | undefined; version: string | null; verified: boolean } | undefined;
  /** The delivery source (delivery.sources) the attempt went out from; absent when none is configured. */
  source?: string | undefined;
}

/**
 * One message to one recipient. Its content is the per-message header block `head` followed by
 * the stored body `bodyId`, which several messages may share.
 */
export interface MessageRecord {
  v: 1;
  /** UUIDv7: the API id, and the local part of the generated Message-ID. */
  id: string;
  accountId: string;
  domainId: string;
  /** The sender domain's name. */
  domain: string;
  /** The Message-ID header, with angle brackets. */
  messageId: string;
  direction: 'outbound' | 'inbound';
  /** `dsn`: a delivery status notification Postilion generated. */
  /** `tlsrpt`: a TLS report (RFC 8460) of this server's own, sent like a DSN. */
  source: 'api' | 'api-v1' | 'smtp' | 'dsn' | 'tlsrpt';
  sender: string;
  recipient: string;
  subject: string;
  tags: string[];
  status: MessageStatus;
  /** Sandbox messages are processed but never delivered; the result says what to pretend. */
  sandbox: SandboxResult | null;
  tracking: { open: boolean; click: boolean };
  retention: { metadataDays: number; dataDays: number };
  /** As requested; null when the message was sent without a schedule. */
  schedule: { firstAttempt: string | null; expires: string | null } | null;
  /** When delivery is first due. */
  dueAt: string;
  /**
   * Set while its account is not active: the message is off the due-time index and listed under
   * its account (`messagesHeld`) until the account is active again; delivery then resumes.
   */
  heldAt?: string | null;
  bodyId: string;
  head: string;
  /** The content was dropped by retention; metadata remains. */
  contentPurged: boolean;
  createdAt: string;
  updatedAt: string;
  sentAt: string | null;
  deliveredAt: string | null;
  /** When the metadata is purged. */
  retainUntil: string;
  /** When the content may be dropped (once delivery is final). */
  dataRetainUntil: string;
  attempts: DeliveryAttemptRecord[];
  /**
   * Opens and clicks recorded before they moved to their own record (MessageHitsRecord): kept
   * and added to it, never written again (0 in new messages).
   */
  openCount: number;
  clickCount: number;
  firstOpenAt?: string | null;
  firstClickAt?: string | null;
  bounceClassification: string;
  isBounceNotification: boolean;
  referenceMessageId: number | null;
  /**
   * Cluster mode, in the published copy only (cluster/publication.ts): the node that accepted the
   * message and keeps its content and its delivery. Never in a node's own store.
   */
  node?: string;
}

/** The ten event flags of a webhook, named as in the API (reference-api §5.1). */
export const WEBHOOK_FLAGS = [
  'on_reception',
  'on_delivered',
  'on_transient_error',
  'on_failed',
  'on_bounced',
  'on_suppressed',
  'on_opened',
  'on_clicked',
  'on_suppression_created',
  'on_dns_error',
] as const;
export type WebhookFlag = (typeof WEBHOOK_FLAGS)[number];

/**
 * An outbound event notification endpoint. `secret` is sealed (AES-256-GCM, key in keys/): it
 * must be read back to sign, so it cannot be a hash. `domains` as for SMTP credentials: by id,
 * with the name they had. The counters are written by each delivery attempt's outcome batch.
 */
export interface WebhookRecord {
  v: 1;
  id: string;
  accountId: string;
  name: string;
  url: string;
  enabled: boolean;
  flags: Record<WebhookFlag, boolean>;
  scope: 'global' | 'scoped';
  domains: Array<{ id: string; name: string }>;
  secret: string;
  successCount: number;
  errorCount: number;
  errorsSinceLastSuccess: number;
  lastRequestAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/**
 * A job of an HTTP kind: one webhook delivery (one event to one webhook) or one route POST. Its
 * id is the `webhook-id` header, the same on every attempt. The request body is built from the
 * event when it is sent; the record holds only where the job stands.
 */
export interface JobRecord {
  v: 1;
  id: string;
  kind: 'webhook' | 'route';
  accountId: string;
  /** The webhook (or route) it is for. */
  targetId: string;
  /** The event a webhook delivery sends; for a route POST, the inbound message's id. */
  eventId: string;
  /** A route POST's recipients: the one it matched, or all of them when the route groups by message. */
  recipients?: string[] | undefined;
  /**
   * pending: on the due-time index; held: its target is disabled; parked: its destination is
   * down (listed under `parkedOn` until a probe gets through); failed: attempts used up.
   */
  state: 'pending' | 'held' | 'parked' | 'failed';
  /** The destination (URL origin) a parked job waits for. */
  parkedOn?: string | undefined;
  /** Failed attempts so far. */
  attempts: number;
  dueAt: string;
  createdAt: string;
  updatedAt: string;
  lastAttempt: { at: string; status: number; error: string | null; durationMs: number } | null;
  /** Kept in its due-time entry, not under its id (a new job: store/jobs-repo.ts). */
  inEntry?: true | undefined;
}

/**
 * A message received by the inbound MX: who sent it, what each accepted recipient is (a route's
 * address, a VERP return path, a complaint address), and where its bytes are (`bodies`, chunked).
 * `pending` while a bounce or complaint in it has not been taken in yet.
 */
export interface InboundRecord {
  v: 1;
  id: string;
  receivedAt: string;
  client: { address: string; helo: string; tls: boolean };
  mailFrom: string;
  recipients: Array<
    | { kind: 'route'; address: string; accountId: string; domain: string; routeIds: string[] }
    | { kind: 'bounce'; address: string; messageId: string }
    | { kind: 'complaint'; address: string; accountId: string; domain: string }
  >;
  size: number;
  bodyId: string;
  /** A few headers, for logs and events. */
  from: string;
  subject: string;
  messageIdHeader: string;
  state: 'pending' | 'done';
  /**
   * SPF, DKIM, DMARC and ARC (and spamd's score) as checked once at arrival; route POSTs use it.
   * Absent on records stored before arrival checks (and on bounces and complaints, not checked).
   */
  authentication?: InboundAuthentication;
}

/** What the checks at arrival found, stored with the inbound message. */
export interface InboundAuthentication {
  /** The `Authentication-Results` value (RFC 8601, unfolded); null when the checks could not run. */
  results: string | null;
  /** The `Received-SPF` value (RFC 7208 §9.1, unfolded); null when SPF was not checked. */
  receivedSpf: string | null;
  /** DMARC of the header From's domain; null when not evaluated (no single From address, checks failed). */
  dmarc: DmarcVerdict | null;
  /** What `smtp.inbound.dmarc_policy` made of it: `quarantine` is marked in the route payload. */
  action: 'accept' | 'quarantine';
  /** spamd's score; 0 when no spamd is configured or it could not say. */
  spamScore: number;
}

export interface DmarcVerdict {
  /** pass, fail, none, temperror, permerror (RFC 8601 §2.7.1 values). */
  result: string;
  /** The header From's domain (its organizational domain when no record exists). */
  domain: string;
  /** The policy that applies to it (`sp` for a subdomain when published), null without a record. */
  policy: 'none' | 'quarantine' | 'reject' | null;
  /** `pct=` of the record (100 when absent). */
  pct: number;
}

/**
 * An inbound route: mail to `recipient` (an address, or a pattern with one `*` in the local part)
 * at a domain of the account is POSTed to `url`. `domain` as for webhooks: by id, with its name.
 * `secret` is sealed (it signs every POST). The counters live apart (routeCounters).
 */
export interface RouteRecord {
  v: 1;
  id: string;
  accountId: string;
  name: string;
  url: string;
  recipient: string;
  domain: { id: string; name: string };
  attachments: boolean;
  headers: boolean;
  groupByMessageId: boolean;
  stripReplies: boolean;
  enabled: boolean;
  secret: string;
  createdAt: string;
  updatedAt: string;
}

/**
 * A tracked message's opens and clicks (family `messageHits`, by message id), apart from its
 * record: a hit writes these few bytes, not the whole message, and never races the delivery
 * path's writes of the message. Added to the message's own (older) counts when it is shown.
 */
export interface MessageHitsRecord {
  v: 1;
  /** Every open and click, bots too. */
  opens: number;
  clicks: number;
  /** The first open and click by a person (not flagged is_bot), or null: none yet. */
  firstOpenAt: string | null;
  firstClickAt: string | null;
}

/**
 * One day's TLS sessions with one policy domain under one policy (family `tlsReports`), as TLS
 * reporting (RFC 8460 §4.4) counts them: successes, failures, and the failures in detail.
 */
export interface TlsPolicyCountsRecord {
  v: 1;
  /** The UTC day, YYYY-MM-DD. */
  day: string;
  policyDomain: string;
  policyType: 'sts' | 'tlsa' | 'no-policy-found';
  policyStrings: string[];
  mxHosts: string[];
  success: number;
  failure: number;
  /** Failures by result type, sending address, MX host and its address (a bounded list). */
  details: TlsFailureDetailRecord[];
}

export interface TlsFailureDetailRecord {
  resultType: string;
  sendingMtaIp: string | null;
  receivingMxHostname: string;
  receivingIp: string | null;
  count: number;
  /** The first detail text seen (RFC 8460 `failure-reason-code`). */
  reason: string | null;
}
