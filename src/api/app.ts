import Koa from 'koa';
import Router from '@koa/router';
import type { Logger } from 'pino';
import type { Accounts } from '../accounts/accounts.ts';
import type { ApiKeys } from '../accounts/api-keys.ts';
import type { Cidr } from '../util/cidr.ts';
import type { ApiContext, ApiState } from './context.ts';
import { authenticate, limitRefusals, requireScopes } from './middleware/auth.ts';
import { BodyBudget, rawBody } from './middleware/body.ts';
import { errorResponses } from './middleware/errors.ts';
import type { Idempotency } from './middleware/idempotency.ts';
import { rateLimit, type AnyRateLimiter, type AnyRefusalLimiter } from './middleware/rate-limit.ts';
import { requestContext, transport } from './middleware/request-context.ts';
import { operation } from './operations.ts';
import { V1_SEND } from './allowed-methods.ts';
import type { DnsChecker } from '../domains/dns-checker.ts';
import type { Domains } from '../domains/domains.ts';
import { accountRoutes } from './routes/account/index.ts';
import { domainRoutes } from './routes/domains/index.ts';
import { apiKeyRoutes } from './routes/api-keys/index.ts';
import { memberRoutes } from './routes/members/index.ts';
import { pingRoutes } from './routes/ping/index.ts';
import { messageRoutes } from './routes/messages/index.ts';
import { suppressionRoutes } from './routes/suppressions/index.ts';
import { smtpCredentialRoutes } from './routes/smtp-credentials/index.ts';
import { webhookRoutes } from './routes/webhooks/index.ts';
import { routeRoutes } from './routes/routes/index.ts';
import { statisticsRoutes } from './routes/statistics/index.ts';
import { subAccountRoutes } from './routes/sub-accounts/index.ts';
import type { SubAccounts } from '../accounts/sub-accounts.ts';
import type { Usage } from '../accounts/usage.ts';
import type { Statistics } from '../stats/statistics.ts';
import type { Routes } from '../inbound/routes.ts';
import type { Webhooks } from '../webhooks/webhooks.ts';
import type { SmtpCredentials } from '../accounts/smtp-credentials.ts';
import type { Suppressions } from '../accounts/suppressions.ts';
import { v1Authenticate, v1Send } from './routes/v1/index.ts';
import type { MessagesElsewhere } from '../cluster/remote-messages.ts';
import type { MessageReads, Messages } from '../message/messages.ts';
import type { Sender } from '../message/send.ts';
import type { Route } from './routes/route.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { requestMetrics } from './middleware/metrics.ts';
import { refuseWithoutStorage, type StorageState } from './middleware/storage.ts';
import { mtaStsPolicy } from './middleware/mta-sts.ts';
import { chainOf, type Layer } from './chain.ts';
import { rememberMatches, routedBy } from './routing.ts';

export interface ApiSettings {
  trustedProxies: Cidr[];
  bodyLimitBytes: number;
  /** Request-body bytes held by all requests together; beyond it, 503. */
  bodyMemoryBytes: number;
  /** The MTA-STS policy files served, by host (`mta-sts.<domain>`): mta_sts_policy. */
  mtaStsPolicies?: Readonly<Record<string, string>>;
}

export interface ApiDeps {
  log: Logger;
  accounts: Accounts;
  apiKeys: ApiKeys;
  domains: Domains;
  dnsChecker: DnsChecker;
  sender: Sender;
  messages: Messages;
  /** Cluster mode: messages other nodes hold (a cancel goes to its owner). */
  messagesElsewhere?: MessagesElsewhere | null;
  /** What the message list and get answer from (cluster mode: the published records); `messages` when absent. */
  messageReads?: MessageReads;
  suppressions: Suppressions;
  smtpCredentials: SmtpCredentials;
  webhooks: Webhooks;
  routes: Routes;
  statistics: Statistics;
  subAccounts: SubAccounts;
  usage: Usage;
  /** The time now, in ms (statistics windows default to the 30 days before it). */
  now: () => number;
  idempotency: Idempotency;
  rateLimiter: AnyRateLimiter;
  /** Refused authentications per client address (v2 and v1). */
  refusalLimiter: AnyRefusalLimiter;
  /** Requests are counted and timed here when given. */
  metrics?: Metrics;
  /** Read per request, so a reload takes effect at once. */
  settings: () => ApiSettings;
  /** The storage guard: writes are refused with 507 while the store cannot take them. */
  storage?: StorageState;
  /** The web dashboard's hooks (src/dashboard, wired by the assembly); no /ui paths without them. */
  dashboard?: DashboardHooks;
}

/**
 * What the web dashboard plugs into the app, so that api/ never imports it: its own middleware,
 * and the session authentication that stands in for the bearer on the `/ui/api/v2` mirror.
 */
export interface DashboardHooks {
  /**
   * Runs for every request once the transport is checked, before the API's routes: answers the
   * /ui paths it serves itself and passes everything else on (the `/ui/api/v2` mirror included).
   */
  middleware: Layer;
  /**
   * In place of `authenticate` on `/ui/api/v2`: the session's CSRF token, then its key checked
   * as the bearer's is (auth.ts `admitKey`), setting `ctx.state.auth`; 401/403 otherwise.
   */
  sessionAuth: Layer;
}

/** Where the dashboard's mirror of the v2 API lives: `/ui/api/v2/<the path after /v2>`. */
export const DASHBOARD_V2_PREFIX = '/ui/api/v2';

/**
 * The HTTP API. Every v2 request goes: request id → errors → transport (HTTPS, client IP) →
 * refused-authentication limit → authentication and allow list → rate limit → scope gate →
 * raw body → idempotency → handler. With the dashboard's hooks, its middleware answers /ui, and
 * `/ui/api/v2/…` runs each v2 operation's chain with the session in place of the bearer.
 */
export function buildApp(deps: ApiDeps): Koa<ApiState> {
  const app = new Koa<ApiState>();
  app.silent = true;
  const router = new Router<ApiState>();
  rememberMatches(router);

  const routes: Route[] = [
    ...pingRoutes,
    ...apiKeyRoutes(deps.apiKeys),
    ...accountRoutes(deps.accounts),
    ...memberRoutes(deps.accounts),
    ...domainRoutes(deps.domains, deps.dnsChecker),
    ...messageRoutes(deps.sender, deps.messages, deps.domains, deps.messagesElsewhere ?? null, deps.messageReads),
    ...suppressionRoutes(deps.suppressions),
    ...smtpCredentialRoutes(deps.smtpCredentials, deps.domains),
    ...webhookRoutes(deps.webhooks),
    ...routeRoutes(deps.routes),
    ...statisticsRoutes(deps.statistics, deps.now),
    ...subAccountRoutes(deps.subAccounts, deps.usage),
  ];
  const refusals = limitRefusals(deps.refusalLimiter);
  const auth = authenticate(deps.apiKeys, deps.accounts);
  const bodyBudget = new BodyBudget(() => deps.settings().bodyMemoryBytes);
  const body = rawBody(() => deps.settings().bodyLimitBytes, bodyBudget);
  const storage = deps.storage ? [refuseWithoutStorage(deps.storage)] : [];
  for (const route of routes) {
    const op = operation(route.operationId);
    // The body is read only once the caller is known and within its rate: no anonymous uploads.
    // What follows authentication, the same for the bearer and (below) the dashboard's session.
    const afterAuth: Layer[] = [rateLimit(deps.rateLimiter, op.rateClass ?? 'general'), requireScopes(op.security), ...storage, body];
    if (op.idempotent) afterAuth.push(deps.idempotency.middleware(op.secretBearing ?? false, op.sealed ?? false));
    afterAuth.push(route.handler);
    const chain: Layer[] = [refusals, auth, ...afterAuth];
    // The router's context type is its own; our middleware only relies on ApiState and params.
    router.register(`/v2${op.path}`, [op.method], chainOf(chain) as never, { name: route.operationId });
    if (deps.dashboard) {
      // The same operation for the dashboard's browser: its session in place of the bearer, the rest alike.
      const mirrored = [refusals, deps.dashboard.sessionAuth, ...afterAuth];
      router.register(`${DASHBOARD_V2_PREFIX}${op.path}`, [op.method], chainOf(mirrored) as never, { name: `ui:${route.operationId}` });
    }
  }
  // Legacy v1 send: its own key type and error body ({status}), the account's general rate.
  router.register(
    V1_SEND.path,
    [V1_SEND.method],
    chainOf([refusals, v1Authenticate(deps.apiKeys, deps.accounts), rateLimit(deps.rateLimiter, 'general'), ...storage, body, v1Send(deps.sender)]) as never,
    { name: 'sendEmailV1' },
  );

  // Public, before anything that asks who the caller is: receivers fetch the policy anonymously.
  app.use(mtaStsPolicy(() => deps.settings().mtaStsPolicies ?? {}));
  if (deps.metrics) app.use(requestMetrics(deps.metrics) as unknown as Koa.Middleware<ApiState>);
  app.use(requestContext(deps.log) as Koa.Middleware<ApiState>);
  app.use(errorResponses as unknown as Koa.Middleware<ApiState>);
  app.use(transport(() => ({ trustedProxies: deps.settings().trustedProxies })) as unknown as Koa.Middleware<ApiState>);
  if (deps.dashboard) app.use(deps.dashboard.middleware as unknown as Koa.Middleware<ApiState>);
  app.use(routedBy(router));
  app.use(router.allowedMethods());
  return app;
}

export type { ApiContext };
