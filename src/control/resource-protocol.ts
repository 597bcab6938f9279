import { z } from 'zod';
import type { presentSummary } from '../api/routes/messages/presenter.ts';
import type { presentRoute } from '../api/routes/routes/presenter.ts';
import type { presentSmtpCredential } from '../api/routes/smtp-credentials/presenter.ts';
import type { presentSuppression } from '../api/routes/suppressions/presenter.ts';
import type { presentWebhook } from '../api/routes/webhooks/presenter.ts';

/**
 * The operator's view of the resources the API manages: SMTP credentials, webhooks, routes and
 * suppressions (list, show, enable/disable where they have that state, delete), and one message
 * with everything that happened to it. What `postilion smtp-credentials|webhooks|routes|
 * suppressions|messages` ask, over the control socket or on the store, like the accounts.
 * Resources are shown as the API shows them, with no secret: a credential's password and a
 * webhook's or route's signing secret are shown once, when the API creates them, never here.
 */
export interface ResourceOperations {
  listCredentials(input: AccountInput): Promise<{ credentials: CredentialView[] }>;
  showCredential(input: ResourceInput): Promise<CredentialView>;
  deleteCredential(input: ResourceInput): Promise<CredentialView>;
  listWebhooks(input: AccountInput): Promise<{ webhooks: WebhookView[] }>;
  showWebhook(input: ResourceInput): Promise<WebhookView>;
  /** Enabling one releases its held deliveries; disabling holds them. */
  enableWebhook(input: EnableInput): Promise<WebhookView>;
  deleteWebhook(input: ResourceInput): Promise<WebhookView>;
  listRoutes(input: AccountInput): Promise<{ routes: RouteView[] }>;
  showRoute(input: ResourceInput): Promise<RouteView>;
  enableRoute(input: EnableInput): Promise<RouteView>;
  deleteRoute(input: ResourceInput): Promise<RouteView>;
  /** Those in force, optionally for one sender domain. */
  listSuppressions(input: SuppressionsInput): Promise<{ suppressions: SuppressionView[] }>;
  /** The address's suppressions in force, one per sender domain. */
  showSuppression(input: AddressInput): Promise<{ suppressions: SuppressionView[] }>;
  /** Removes the address's suppressions (for one sender domain, or all): how many went. */
  deleteSuppression(input: AddressInput): Promise<{ email: string; removed: number }>;
  showMessage(input: MessageInput): Promise<MessageTrace>;
}

export type CredentialView = ReturnType<typeof presentSmtpCredential>;
export type WebhookView = ReturnType<typeof presentWebhook>;
export type RouteView = ReturnType<typeof presentRoute>;
export type SuppressionView = ReturnType<typeof presentSuppression>;

/** One thing that happened to a message: a stored event, or a delivery attempt with the server's reply. */
export interface TraceEntry {
  at: string;
  kind: 'event' | 'attempt';
  /** The event's type (`message.delivered`), or the attempt's outcome (`Deferred`). */
  what: string;
  /** The server's reply of an attempt; an open's client, a click's URL; else empty. */
  detail: string;
}

export interface MessageTrace {
  message: ReturnType<typeof presentSummary>;
  /** Events and attempts, oldest first (an attempt before the event it caused). */
  trace: TraceEntry[];
}

/** An account's id, as the operator typed it (accounts, keys and domains take it too). */
export interface AccountInput {
  account: string;
}

export interface ResourceInput {
  account: string;
  id: string;
}

export interface EnableInput extends ResourceInput {
  enabled: boolean;
}

export interface SuppressionsInput {
  account: string;
  domain?: string | undefined;
}

export interface AddressInput {
  account: string;
  email: string;
  domain?: string | undefined;
}

export interface MessageInput {
  /** The message's id, or its Message-ID header. */
  id: string;
  /** Needed only for a Message-ID a client set (ours hold the id). */
  account?: string | undefined;
}

/** Argument types as the daemon checks them on the socket; the values are the implementation's to judge. */
const text = z.string();
const account = z.strictObject({ account: text });
const resource = z.strictObject({ account: text, id: text });
const enable = z.strictObject({ account: text, id: text, enabled: z.boolean() });
const address = z.strictObject({ account: text, email: text, domain: text.optional() });
export const RESOURCE_INPUTS = {
  listCredentials: account,
  showCredential: resource,
  deleteCredential: resource,
  listWebhooks: account,
  showWebhook: resource,
  enableWebhook: enable,
  deleteWebhook: resource,
  listRoutes: account,
  showRoute: resource,
  enableRoute: enable,
  deleteRoute: resource,
  listSuppressions: z.strictObject({ account: text, domain: text.optional() }),
  showSuppression: address,
  deleteSuppression: address,
  showMessage: z.strictObject({ id: text, account: text.optional() }),
} satisfies { [K in keyof ResourceOperations]: z.ZodType<Parameters<ResourceOperations[K]>[0]> };
