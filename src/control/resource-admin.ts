import type { Accounts } from '../accounts/accounts.ts';
import type { SmtpCredentials } from '../accounts/smtp-credentials.ts';
import type { Suppressions } from '../accounts/suppressions.ts';
import { presentSummary } from '../api/routes/messages/presenter.ts';
import { presentRoute } from '../api/routes/routes/presenter.ts';
import { presentSmtpCredential } from '../api/routes/smtp-credentials/presenter.ts';
import { presentSuppression } from '../api/routes/suppressions/presenter.ts';
import { presentWebhook } from '../api/routes/webhooks/presenter.ts';
import type { Routes } from '../inbound/routes.ts';
import { parseMessageRef } from '../message/message-id.ts';
import type { Messages } from '../message/messages.ts';
import type { EventsRepo } from '../store/events-repo.ts';
import { everyItem } from '../store/page.ts';
import type { EventRecord, MessageRecord, WebhookRecord } from '../store/records.ts';
import { isEmailAddress } from '../util/email.ts';
import { badRequest, notFound } from '../util/errors.ts';
import { isUuid } from '../util/ids.ts';
import { tlsText } from './queue-admin.ts';
import { attemptText } from './protocol.ts';
import type { Webhooks } from '../webhooks/webhooks.ts';
import type {
  AccountInput,
  AddressInput,
  CredentialView,
  EnableInput,
  MessageInput,
  MessageTrace,
  ResourceInput,
  ResourceOperations,
  RouteView,
  SuppressionsInput,
  SuppressionView,
  TraceEntry,
  WebhookView,
} from './resource-protocol.ts';

/** The domain services behind the API's resources (a Core has them all). */
export interface ResourceAdminServices {
  accounts: Accounts;
  smtpCredentials: SmtpCredentials;
  webhooks: Webhooks;
  routes: Routes;
  suppressions: Suppressions;
  messages: Messages;
  eventsRepo: EventsRepo;
}

/** Events are looked for from this long before the message's creation (clocks of a batch's commit). */
const EVENT_SLACK_MS = 1000;

/**
 * The operator's administration of the API's resources, over the same domain functions the API
 * calls (as the operator: no scope checks), shown as the API shows them.
 */
export class ResourceAdmin implements ResourceOperations {
  constructor(private readonly r: ResourceAdminServices) {}

  async listCredentials(input: AccountInput): Promise<{ credentials: CredentialView[] }> {
    const account = await this.account(input.account);
    const credentials: CredentialView[] = [];
    for await (const c of everyItem((req) => this.r.smtpCredentials.list(account, null, req))) {
      credentials.push(presentSmtpCredential(c, await this.r.smtpCredentials.domainsOf(c)));
    }
    return { credentials };
  }

  async showCredential(input: ResourceInput): Promise<CredentialView> {
    const c = await this.r.smtpCredentials.get(await this.account(input.account), uuid(input.id, 'an SMTP credential id'));
    return presentSmtpCredential(c, await this.r.smtpCredentials.domainsOf(c));
  }

  async deleteCredential(input: ResourceInput): Promise<CredentialView> {
    const c = await this.r.smtpCredentials.delete(await this.account(input.account), uuid(input.id, 'an SMTP credential id'));
    return presentSmtpCredential(c, []);
  }

  async listWebhooks(input: AccountInput): Promise<{ webhooks: WebhookView[] }> {
    const account = await this.account(input.account);
    const webhooks: WebhookView[] = [];
    for await (const w of everyItem((req) => this.r.webhooks.list(account, null, {}, req))) webhooks.push(await this.webhook(w));
    return { webhooks };
  }

  async showWebhook(input: ResourceInput): Promise<WebhookView> {
    return this.webhook(await this.r.webhooks.get(await this.account(input.account), uuid(input.id, 'a webhook id')));
  }

  async enableWebhook(input: EnableInput): Promise<WebhookView> {
    return this.webhook(await this.r.webhooks.update(await this.account(input.account), uuid(input.id, 'a webhook id'), { enabled: input.enabled }));
  }

  async deleteWebhook(input: ResourceInput): Promise<WebhookView> {
    return this.webhook(await this.r.webhooks.delete(await this.account(input.account), uuid(input.id, 'a webhook id')));
  }

  async listRoutes(input: AccountInput): Promise<{ routes: RouteView[] }> {
    const account = await this.account(input.account);
    const routes: RouteView[] = [];
    for await (const route of everyItem((req) => this.r.routes.list(account, undefined, req))) routes.push(presentRoute(route));
    return { routes };
  }

  async showRoute(input: ResourceInput): Promise<RouteView> {
    return presentRoute(await this.r.routes.get(await this.account(input.account), uuid(input.id, 'a route id')));
  }

  async enableRoute(input: EnableInput): Promise<RouteView> {
    return presentRoute(await this.r.routes.update(await this.account(input.account), uuid(input.id, 'a route id'), { enabled: input.enabled }));
  }

  async deleteRoute(input: ResourceInput): Promise<RouteView> {
    const account = await this.account(input.account);
    const id = uuid(input.id, 'a route id');
    // The view with its counters, read before they go with the route.
    const route = await this.r.routes.get(account, id);
    await this.r.routes.delete(account, id);
    return presentRoute(route);
  }

  async listSuppressions(input: SuppressionsInput): Promise<{ suppressions: SuppressionView[] }> {
    const account = await this.account(input.account);
    const suppressions: SuppressionView[] = [];
    const filter = input.domain === undefined ? {} : { domain: input.domain };
    for await (const s of everyItem((req) => this.r.suppressions.list(account, filter, req))) suppressions.push(presentSuppression(s));
    return { suppressions };
  }

  async showSuppression(input: AddressInput): Promise<{ suppressions: SuppressionView[] }> {
    const account = await this.account(input.account);
    const filter = { email: address(input.email), ...(input.domain === undefined ? {} : { domain: input.domain }) };
    const suppressions: SuppressionView[] = [];
    for await (const s of everyItem((req) => this.r.suppressions.list(account, filter, req))) suppressions.push(presentSuppression(s));
    if (suppressions.length === 0) throw notFound(`${filter.email} is not suppressed${input.domain === undefined ? '' : ` for ${input.domain}`}`);
    return { suppressions };
  }

  async deleteSuppression(input: AddressInput): Promise<{ email: string; removed: number }> {
    const account = await this.account(input.account);
    const email = address(input.email);
    return { email, removed: await this.r.suppressions.remove(account, email, input.domain) };
  }

  async showMessage(input: MessageInput): Promise<MessageTrace> {
    const stored = await this.message(input);
    const [message] = await this.r.messages.shown([stored]);
    const events = await this.r.eventsRepo.ofMessage(stored.id, Date.parse(stored.createdAt) - EVENT_SLACK_MS);
    return { message: presentSummary(message!), trace: trace(stored, events) };
  }

  /**
   * A message by its id, or by its Message-ID header as the API's 202 gave it: ours end in
   * `<id@domain>`; one a client set is looked up in the account named.
   */
  private async message(input: MessageInput): Promise<MessageRecord> {
    const ref = parseMessageRef(input.id);
    if (!ref) throw badRequest(`"${input.id.slice(0, 100)}" is not a message id (a UUID) or a Message-ID (<id@domain>)`);
    if (input.account !== undefined) return this.r.messages.get(await this.account(input.account), input.id, () => true);
    const id = ref.kind === 'id' ? ref.id : ref.header.slice(1, ref.header.indexOf('@'));
    if (!isUuid(id))
      throw badRequest(`the Message-ID ${ref.kind === 'header' ? ref.header : id} was not made by Postilion: give its account (--account) to look it up`);
    const stored = await this.r.messages.current(id.toLowerCase());
    if (!stored || (ref.kind === 'header' && stored.messageId.toLowerCase() !== ref.header.toLowerCase())) throw notFound(`no such message: ${input.id}`);
    return stored;
  }

  /** The id of an existing account, from what the operator typed. */
  protected async account(value: string): Promise<string> {
    if (!isUuid(value)) throw badRequest(`--account: "${value.slice(0, 100)}" is not an account id`);
    const id = value.toLowerCase();
    await this.r.accounts.require(id);
    return id;
  }

  private async webhook(w: WebhookRecord): Promise<WebhookView> {
    return presentWebhook(w, await this.r.webhooks.domainsOf(w));
  }
}

/**
 * Attempts and events by time; at one time an attempt comes first, since the events of an
 * outcome are written with it. Sorting is stable, so each keeps its own order.
 */
export function trace(m: MessageRecord, events: EventRecord[]): TraceEntry[] {
  const entries: TraceEntry[] = [
    ...m.attempts.map((a): TraceEntry => ({
      at: a.time,
      kind: 'attempt',
      what: a.status,
      detail: attemptText({ log: a.log, source: a.source, tls: a.tls ? tlsText(a.tls) : undefined }),
    })),
    ...events.map((e): TraceEntry => ({ at: e.createdAt, kind: 'event', what: e.type, detail: eventDetail(e) })),
  ];
  return entries.sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || (a.kind === b.kind ? 0 : a.kind === 'attempt' ? -1 : 1));
}

function eventDetail(e: EventRecord): string {
  const d = e.data;
  if (typeof d.url === 'string') return d.url;
  if (typeof d.user_agent === 'string') return `${d.user_agent}${typeof d.ip === 'string' ? ` from ${d.ip}` : ''}`;
  return '';
}

function uuid(value: string, what: string): string {
  if (!isUuid(value)) throw badRequest(`"${value.slice(0, 100)}" is not ${what} (a UUID)`);
  return value.toLowerCase();
}

function address(value: string): string {
  if (!isEmailAddress(value)) throw badRequest(`"${value.slice(0, 100)}" is not an email address`);
  return value.toLowerCase();
}
