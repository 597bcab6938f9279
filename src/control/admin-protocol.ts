import { z } from 'zod';
import { RESOURCE_INPUTS, type AccountInput, type ResourceOperations } from './resource-protocol.ts';

/**
 * The operator's administration of accounts, API keys and domains: what the `postilion
 * accounts|keys|domains` commands ask. One implementation (CoreAdmin, over the store's domain
 * services) answers, reached in-process when the CLI opens a stopped daemon's store, or over
 * the control socket when the daemon runs. Every argument and result is plain JSON (snake_case,
 * like the queue's), so both ways give the CLI the same values. Ids and names arrive as the
 * operator typed them: the implementation checks them, so both ways refuse them alike.
 */
export interface AdminOperations extends ResourceOperations {
  createAccount(input: NewAccountInput): Promise<AccountView>;
  listAccounts(input: Record<string, never>): Promise<{ accounts: AccountView[] }>;
  /** Any account (a top-level one takes its active sub accounts with it); its mail is held. */
  suspendAccount(input: SuspendAccountInput): Promise<AccountView>;
  /** Back to active (sub accounts suspended with it too); its held mail goes out. */
  unsuspendAccount(input: AccountInput): Promise<AccountView>;
  /** Whether the header From of the account's SMTP mail must be at its credential's domains (`own`) or may be anywhere (`any`). */
  setSmtpHeaderFrom(input: SmtpHeaderFromInput): Promise<SmtpHeaderFromView>;
  /** The delivery pool (delivery.pools) the account's mail leaves from; null: the configured one. Stored, not an API field. */
  setAccountPool(input: AccountPoolInput): Promise<AccountView>;
  /** The one answer that holds a secret: the CLI prints it once; nobody logs it. */
  createKey(input: NewKeyInput): Promise<CreatedKey>;
  listKeys(input: AccountInput): Promise<{ keys: KeyView[] }>;
  deleteKey(input: KeyInput): Promise<KeyView>;
  addDomain(input: NewDomainInput): Promise<DomainView>;
  listDomains(input: AccountInput): Promise<{ domains: DomainSummary[] }>;
  /** Looks the domain's records up now (400 when no lookup was answered). */
  checkDomain(input: DomainInput): Promise<DomainView>;
  /** Makes the standby DKIM key active; the outcome says whether it did, and why not. */
  rotateDkim(input: DomainInput): Promise<RotationView>;
  /** Marks the domain's DNS verified by hand (or clears the mark): logged, shown in the domain. */
  verifyDomain(input: VerifyDomainInput): Promise<DomainView>;
}

export interface VerifyDomainInput {
  name: string;
  /** true: take the mark away; the domain is invalid until its records are found. */
  clear: boolean;
}

export type AdminOperation = keyof AdminOperations;

export interface AccountView {
  id: string;
  name: string;
  status: string;
  /** null: a top-level account. */
  parent_account_id: string | null;
  /** Why it is suspended, and by whom (null when it is not suspended in its own right). */
  suspension: { reason: string; at: string; by: string } | null;
  /** The delivery pool set for it (`accounts pool`); null: the configured one. */
  delivery_pool: string | null;
}

export interface AccountPoolInput {
  account: string;
  pool: string | null;
}

export interface SmtpHeaderFromInput {
  account: string;
  /** `own` or `any`. */
  smtp_header_from: string;
}

export interface SmtpHeaderFromView {
  id: string;
  smtp_header_from: 'own' | 'any';
}

export interface SuspendAccountInput {
  account: string;
  reason: string;
}

export interface KeyView {
  id: string;
  account_id: string;
  label: string;
  kind: 'v1' | 'v2';
  scopes: string[];
  ip_allow_list: string[];
}

export interface CreatedKey {
  key: KeyView;
  /** Shown once: only its hash is stored. */
  secret: string;
}

export interface RecordView {
  /** The record's name in the domain's DNS state ("spf", "dkim:<selector>", …). */
  key: string;
  type: string;
  host: string;
  content: string;
  required: boolean;
  label: string;
  /** Found published by the last check. */
  published: boolean;
}

export interface DomainSummary {
  id: string;
  name: string;
  dns_valid: boolean;
  /** dns_valid was set by the operator's hand (`domains verify`), not by a check. */
  by_hand: boolean;
}

export interface DomainView extends DomainSummary {
  account_id: string;
  /** Set when the operator marked the DNS verified by hand. */
  verified_by_hand: { at: string; by: string } | null;
  dns_checked_at: string | null;
  /** The records to publish, with what the last check found. */
  records: RecordView[];
}

export interface RotationView {
  /**
   * `rotated`; or not, because no standby key existed (one was made: publish it first), the
   * standby's record is not published yet, rotation is off, or it is not due.
   */
  outcome: 'rotated' | 'no_standby' | 'standby_not_published' | 'not_enabled' | 'wait';
  domain: DomainView;
  active_selectors: string[];
  /** Rotated: until when the previous key stays published. */
  previous_published_until: string | null;
  /** The standby key's records, to publish before it can take over. */
  standby_records: RecordView[];
}

/**
 * Each operation's argument as the daemon checks it on the socket: types only (and no unknown
 * fields); values are the implementation's to judge, the same way in-process.
 */
const text = z.string();
const accountInput = z.strictObject({ account: text });
const domainInput = z.strictObject({ name: text });
export const ADMIN_INPUTS = {
  createAccount: z.strictObject({ name: text, owner_email: text, website: text }),
  listAccounts: z.strictObject({}),
  suspendAccount: z.strictObject({ account: text, reason: text }),
  unsuspendAccount: accountInput,
  setSmtpHeaderFrom: z.strictObject({ account: text, smtp_header_from: text }),
  setAccountPool: z.strictObject({ account: text, pool: text.max(100).nullable() }),
  createKey: z.strictObject({
    account: text,
    label: text,
    /** Empty: the default set (every scope that names no domain; a v1 key: messages:send:all). */
    scopes: z.array(text),
    ip_allow_list: z.array(text),
    v1: z.boolean(),
  }),
  listKeys: accountInput,
  deleteKey: z.strictObject({ account: text, key: text }),
  addDomain: z.strictObject({ account: text, name: text, rotation_days: z.number().optional(), selector: text.optional() }),
  listDomains: accountInput,
  checkDomain: domainInput,
  rotateDkim: domainInput,
  verifyDomain: z.strictObject({ name: text, clear: z.boolean() }),
  ...RESOURCE_INPUTS,
} satisfies { [K in AdminOperation]: z.ZodType<Parameters<AdminOperations[K]>[0]> };

export interface NewAccountInput {
  name: string;
  owner_email: string;
  website: string;
}

export interface NewKeyInput {
  account: string;
  label: string;
  scopes: string[];
  ip_allow_list: string[];
  v1: boolean;
}

export interface NewDomainInput {
  account: string;
  name: string;
  rotation_days?: number | undefined;
  selector?: string | undefined;
}

export interface KeyInput {
  account: string;
  key: string;
}

export interface DomainInput {
  name: string;
}
