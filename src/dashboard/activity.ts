import { satisfies, type Grants, type Security } from '../accounts/scopes.ts';
import { authOf } from '../api/context.ts';
import { operation } from '../api/operations.ts';
import { uuidParam } from '../api/validate.ts';
import { tlsText } from '../control/queue-admin.ts';
import { trace } from '../control/resource-admin.ts';
import { dkimTxt } from '../domains/dkim-keys.ts';
import type { DnsChecker } from '../domains/dns-checker.ts';
import type { Domains } from '../domains/domains.ts';
import { rotationReady } from '../domains/rotation.ts';
import type { Routes } from '../inbound/routes.ts';
import type { Messages } from '../message/messages.ts';
import type { AttemptLog, HttpAttempt } from '../queue/attempt-log.ts';
import { AUTO_DISABLE_AFTER } from '../queue/http-jobs.ts';
import type { EventsRepo } from '../store/events-repo.ts';
import type { DkimSlotRecord, DomainRecord, EventRecord, MessageRecord, WebhookRecord } from '../store/records.ts';
import { badRequest, forbidden } from '../util/errors.ts';
import { systemClock, type Clock } from '../util/time.ts';
import { TEST_EVENT_TYPE, isTestDelivery } from '../webhooks/test-event.ts';
import type { Webhooks } from '../webhooks/webhooks.ts';
import type { DashboardContext, DashboardRoute } from './contract.ts';

/** What the dashboard's own reads and actions of an account are answered from. */
export interface ActivityDeps {
  messages: Pick<Messages, 'get'>;
  events: Pick<EventsRepo, 'ofMessage' | 'getMany'>;
  domains: Pick<Domains, 'find' | 'get'>;
  /** Looks a domain's records up through the daemon's resolver (core.dnsChecker). */
  dnsChecker: Pick<DnsChecker, 'inspect'>;
  webhooks: Pick<Webhooks, 'get' | 'ofAccount' | 'domainsOf'>;
  routes: Pick<Routes, 'get'>;
  /** The last requests of each webhook and route (JobsAssembly.attempts); null: none are kept. */
  attempts: Pick<AttemptLog, 'ofTarget'> | null;
  /** One test delivery to the account's webhook (webhooks/test-event.ts sendTestEvent). */
  sendTestEvent: (accountId: string, webhookId: string) => Promise<{ delivery_id: string }>;
  /** The time a scheduled message's first attempt is compared with (cancellable); the system's by default. */
  clock?: Clock;
}

/** A webhook delivery or route POST attempt as the dashboard shows it. */
export interface DeliveryView {
  delivery_id: string;
  webhook_id?: string;
  route_id?: string;
  /** The event a webhook delivery sent (null: no longer stored); a route POST's inbound message id. */
  event_type?: string | null;
  message_id?: string;
  /** delivered, retry (refused: tried again later), failed (the last attempt), unreachable (no answer: waits for the endpoint). */
  status: HttpAttempt['outcome'];
  attempts: number;
  response_status: number | null;
  response_ms: number;
  error: string | null;
  at: string;
}

/** Events of a message are looked for from this long before its creation (clocks of a batch's commit). */
const EVENT_SLACK_MS = 1000;
const MAX_DOMAIN = 253;
/** A Message-ID header is at most a line of 998 characters. */
const MAX_MESSAGE_REF = 998;

const A = '/accounts/:account_id';

/**
 * The dashboard's reads and actions that no API operation answers (`/ui/api/dashboard/...`): a
 * message's whole activity, a webhook's and a route's recent deliveries, a test event, a domain's
 * DKIM keys and what DNS holds for each of its records. Each is the session's account's only (another account's id is not found, as the
 * API answers), and within the key's domains where its scopes name domains.
 */
export function dashboardRoutes(deps: ActivityDeps): DashboardRoute[] {
  const route = (method: DashboardRoute['method'], path: string, security: Security, handler: DashboardRoute['handler'], writes = false): DashboardRoute => ({
    area: 'dashboard',
    method,
    path: `${A}${path}`,
    security,
    ...(writes ? { writes } : {}),
    handler,
  });
  const account = (ctx: DashboardContext): { id: string; grants: Grants } => {
    // An operator session holds no key: these are an account's pages.
    if (!ctx.state.auth) throw forbidden('these are the pages of an account: sign in with its API key');
    const auth = authOf(ctx);
    // The session layer checked the path's account against the session's; the session's is the one read.
    return { id: auth.account.id, grants: auth.grants };
  };
  const mayReadWebhook = async (grants: Grants, webhook: WebhookRecord) =>
    grants.holdsAll('webhooks:read') || (await deps.webhooks.domainsOf(webhook)).some((d) => satisfies(grants, operation('getWebhook').security, d));
  const deliveries = (targetId: string): HttpAttempt[] => deps.attempts?.ofTarget(targetId) ?? [];
  const eventTypes = async (attempts: HttpAttempt[]): Promise<Map<string, string>> => {
    const ids = [...new Set(attempts.filter((a) => !isTestDelivery({ eventId: a.event_id })).map((a) => a.event_id))];
    const found = await deps.events.getMany(ids);
    return new Map(found.filter((e): e is EventRecord => e !== undefined).map((e) => [e.id, e.type]));
  };
  const webhookDelivery = (a: HttpAttempt, types: Map<string, string>): DeliveryView => ({
    delivery_id: a.job_id,
    webhook_id: a.target_id,
    event_type: isTestDelivery({ eventId: a.event_id }) ? TEST_EVENT_TYPE : (types.get(a.event_id) ?? null),
    status: a.outcome,
    attempts: a.attempts,
    response_status: a.status,
    response_ms: a.response_ms,
    error: a.error,
    at: a.at,
  });

  return [
    route('GET', '/messages/:message_id/activity', operation('getMessage').security, async (ctx) => {
      const { id: accountId, grants } = account(ctx);
      const ref = ctx.params.message_id ?? '';
      if (ref.length > MAX_MESSAGE_REF) throw badRequest('invalid message_id: give the Message-ID (<id@domain>) or its UUID');
      const message = await deps.messages.get(accountId, ref, await readableMessages(deps, accountId, grants));
      const events = await deps.events.ofMessage(message.id, Date.parse(message.createdAt) - EVENT_SLACK_MS);
      const types = new Map(events.map((e) => [e.id, e.type]));
      const eventOrder = new Map(events.map((e, i) => [e.id, i]));
      const attempts: HttpAttempt[] = [];
      for (const webhook of await deps.webhooks.ofAccount(accountId)) {
        if (await mayReadWebhook(grants, webhook)) attempts.push(...deliveries(webhook.id).filter((a) => types.has(a.event_id)));
      }
      // Oldest first, as the trace reads; at one time, in the order of the events they carried
      // (two deliveries finish in either order).
      attempts.sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || eventOrder.get(a.event_id)! - eventOrder.get(b.event_id)!);
      const caused: DeliveryView[] = attempts.map((a) => webhookDelivery(a, types));
      ctx.body = {
        message_id: message.id,
        ...delivery(message, await deps.domains.find(accountId, message.domain), (deps.clock ?? systemClock).now()),
        trace: traceOf(message, events),
        opens: events.filter((e) => e.type === 'message.opened').map((e) => ({ at: e.createdAt, user_agent: text(e.data.user_agent), ip: text(e.data.ip) })),
        clicks: events
          .filter((e) => e.type === 'message.clicked')
          .map((e) => ({ at: e.createdAt, url: text(e.data.url), user_agent: text(e.data.user_agent), ip: text(e.data.ip) })),
        webhook_deliveries: caused,
      };
    }),
    route('GET', '/webhooks/:webhook_id/deliveries', operation('getWebhook').security, async (ctx) => {
      const { id: accountId, grants } = account(ctx);
      const webhook = await deps.webhooks.get(accountId, uuidParam(ctx, 'webhook_id'));
      if (!(await mayReadWebhook(grants, webhook))) throw forbidden('api key does not have sufficient permissions to read webhooks of these domains');
      const attempts = deliveries(webhook.id);
      const types = await eventTypes(attempts);
      ctx.body = { deliveries: attempts.map((a) => webhookDelivery(a, types)), disabled_reason: disabledReason(webhook, attempts[0]) };
    }),
    route(
      'POST',
      '/webhooks/:webhook_id/test',
      operation('updateWebhook').security,
      async (ctx) => {
        const { id: accountId, grants } = account(ctx);
        const id = uuidParam(ctx, 'webhook_id');
        const webhook = await deps.webhooks.get(accountId, id);
        const domains = await deps.webhooks.domainsOf(webhook);
        const may = (d: string | null) => (d === null ? grants.holdsAll('webhooks:write') : satisfies(grants, operation('updateWebhook').security, d));
        if (webhook.scope === 'global' || domains.length === 0 ? !may(null) : domains.some((d) => !may(d))) {
          throw forbidden('this API key may not send test events to this webhook');
        }
        const sent = await deps.sendTestEvent(accountId, id);
        ctx.state.log.info({ account_id: accountId, webhook_id: id, job_id: sent.delivery_id }, 'test event queued for a webhook');
        ctx.status = 202;
        ctx.body = sent;
      },
      true,
    ),
    route('GET', '/routes/:route_id/deliveries', operation('getRoute').security, async (ctx) => {
      const { id: accountId, grants } = account(ctx);
      const may = grants.holdsAll('routes:read') ? undefined : (d: string) => satisfies(grants, operation('getRoute').security, d);
      const found = await deps.routes.get(accountId, uuidParam(ctx, 'route_id'), may);
      ctx.body = {
        deliveries: deliveries(found.id).map((a): DeliveryView => ({
          delivery_id: a.job_id,
          route_id: a.target_id,
          message_id: a.event_id,
          status: a.outcome,
          attempts: a.attempts,
          response_status: a.status,
          response_ms: a.response_ms,
          error: a.error,
          at: a.at,
        })),
      };
    }),
    route('GET', '/domains/:domain/dkim', operation('getDomain').security, async (ctx) => {
      const { id: accountId } = account(ctx);
      const name = ctx.params.domain ?? '';
      if (name.length > MAX_DOMAIN) throw badRequest('invalid domain name');
      ctx.body = dkimView(await deps.domains.get(accountId, name));
    }),
    route('GET', '/domains/:domain/records', operation('getDomain').security, async (ctx) => {
      const { id: accountId } = account(ctx);
      const name = ctx.params.domain ?? '';
      if (name.length > MAX_DOMAIN) throw badRequest('invalid domain name');
      const domain = await deps.domains.get(accountId, name);
      const inspected = await deps.dnsChecker.inspect(domain);
      ctx.body = {
        domain: domain.name,
        checked_at: inspected.checkedAt,
        records: inspected.records.map((r) => ({
          key: r.key,
          type: r.type,
          host: r.host,
          value: r.content,
          required: r.required,
          status: r.status,
          found: r.status === 'unknown' ? null : r.found,
        })),
      };
    }),
  ];
}

/** Which of the account's messages the key may read: all, or those of the domains its scopes name. */
async function readableMessages(deps: ActivityDeps, accountId: string, grants: Grants): Promise<(domainId: string) => boolean> {
  if (grants.holdsAll('messages:read')) return () => true;
  const found = await Promise.all(grants.domainsFor('messages:read').map((name) => deps.domains.find(accountId, name)));
  const ids = new Set(found.filter((d): d is DomainRecord => d !== undefined).map((d) => d.id));
  return (id) => ids.has(id);
}

/** Events and attempts in order, each attempt with its remote reply, TLS and source. */
function traceOf(message: MessageRecord, events: EventRecord[]) {
  const byTime = trace(message, events);
  const attempts = [...message.attempts];
  return byTime.map((entry) => {
    if (entry.kind === 'attempt') {
      const a = attempts.shift()!;
      return { ...entry, remote_reply: a.log, tls: a.tls ? tlsText(a.tls) : null, source: a.source ?? null };
    }
    return { ...entry, remote_reply: null, tls: null, source: null };
  });
}

/**
 * The message's last reply and its TLS; the DKIM selector that signed it; its schedule, and
 * whether the API's cancel would take it now.
 */
function delivery(message: MessageRecord, domain: DomainRecord | undefined, now: number) {
  const last = message.attempts.at(-1);
  return {
    remote_reply: last?.log ?? null,
    tls: last?.tls ? tlsText(last.tls) : null,
    dkim_selector: last && domain ? signingSelector(domain, last.time) : null,
    schedule: message.schedule ? { first_attempt: message.schedule.firstAttempt, expires: message.schedule.expires } : null,
    cancellable: cancellable(message, now),
  };
}

/**
 * The selector (the RSA key's, else the first) of the domain's key that was active at `at`: each
 * attempt signs with the key active then, and the record keeps when each slot took over. Null
 * when no slot kept in the history was active then (its grace period over, the slot dropped).
 * Retired slots are dropped oldest first, so those left follow each other without a gap.
 */
export function signingSelector(domain: DomainRecord, at: string): string | null {
  const time = Date.parse(at);
  if (Number.isNaN(time)) return null;
  let signing: DkimSlotRecord | undefined;
  for (const slot of [...domain.dkim.retired, domain.dkim.active]) {
    if (slot.activatedAt === null) continue;
    const from = Date.parse(slot.activatedAt);
    if (from <= time && (!signing || from >= Date.parse(signing.activatedAt!))) signing = slot;
  }
  const key = signing?.keys.find((k) => k.algorithm === 'rsa') ?? signing?.keys[0];
  return key?.selector ?? null;
}

/**
 * Whether the API's cancel (Messages.cancel) would take the message: scheduled, not attempted,
 * still Received, and its first attempt not yet due (a due one may be in the delivery engine's
 * hands; held ones are off the schedule).
 */
export function cancellable(message: MessageRecord, now: number): boolean {
  return (
    Boolean(message.schedule?.firstAttempt) &&
    message.attempts.length === 0 &&
    message.status === 'Received' &&
    !message.heldAt &&
    Date.parse(message.dueAt) > now
  );
}

/**
 * Why a webhook is disabled: by the delivery rules after 100 failures in a row (enabling it
 * again resets that count, and a disabled one makes no attempt, so the count tells), or by hand.
 */
export function disabledReason(webhook: WebhookRecord, last: HttpAttempt | undefined): string | null {
  if (webhook.enabled) return null;
  if (webhook.errorsSinceLastSuccess >= AUTO_DISABLE_AFTER) {
    const lastError = last && last.outcome !== 'delivered' ? `; the last: ${last.status === null ? (last.error ?? 'no answer') : `HTTP ${last.status}`}` : '';
    return `disabled automatically after ${webhook.errorsSinceLastSuccess} failed deliveries in a row${lastError}`;
  }
  return 'disabled by hand (through the API, the dashboard or the CLI)';
}

/** The domain's DKIM keys by state, whether each is found published, and its rotation. */
export function dkimView(domain: DomainRecord) {
  const keys = (slot: DkimSlotRecord, state: 'active' | 'standby' | 'retired') =>
    slot.keys.map((k) => ({
      selector: k.selector,
      algorithm: k.algorithm,
      state,
      created_at: k.createdAt,
      activated_at: slot.activatedAt,
      publish_until: slot.publishUntil,
      published: domain.dns.propagated[`dkim:${k.selector}`] === true,
      record: { type: 'TXT', host: `${k.selector}._domainkey.${domain.name}`, value: dkimTxt(k) },
    }));
  return {
    domain: domain.name,
    dns_checked_at: domain.dns.checkedAt,
    keys: [
      ...keys(domain.dkim.active, 'active'),
      ...(domain.dkim.standby ? keys(domain.dkim.standby, 'standby') : []),
      ...domain.dkim.retired.flatMap((slot) => keys(slot, 'retired')),
    ],
    rotation: {
      interval_days: domain.dkimRotationIntervalDays,
      enabled: domain.dkimRotationIntervalDays !== null,
      last_rotated_at: domain.dkim.active.activatedAt,
      /** The standby key is published: a rotation can take place. */
      ready: rotationReady(domain),
    },
  };
}

function text(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}
