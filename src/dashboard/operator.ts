import type { Logger } from 'pino';
import { z } from 'zod';
import { parseBody, parseQuery } from '../api/validate.ts';
import type { ClusterStatus } from '../cluster/status.ts';
import type { ControlHandlers } from '../control/server.ts';
import { AppError, forbidden } from '../util/errors.ts';
import { isPrintable } from '../util/text.ts';
import type { DashboardContext, DashboardRoute } from './contract.ts';

/** One line of the daemon's readiness (/readyz). */
export interface ReadinessLine {
  name: string;
  ok: boolean;
}

/** A node of the cluster as the operator's page shows it. */
export interface NodeLine {
  id: string;
  /** A heartbeat younger than 10 s, and not stopped. */
  live: boolean;
  state: 'live' | 'lost' | 'stopped';
  leader: boolean;
  last_seen: string;
  version: string | null;
  hostname: string | null;
  api_url: string | null;
  queue: { queued: number | null; ready: number; in_flight: number } | null;
}

export interface ClusterView {
  /** This node. */
  node_id: string;
  nodes: NodeLine[];
}

/**
 * What the operator's page reads and acts through: the control socket's own implementations
 * (the same answers `postilion queue` and `postilion accounts` get), the daemon's readiness, and
 * in cluster mode its nodes.
 */
export interface OperatorDeps {
  /** The control socket's handlers; null until the control assembly has started (503 meanwhile). */
  control: () => ControlHandlers | null;
  readiness: () => ReadinessLine[];
  /** The cluster's nodes as its database tells them; null on a node on its own. */
  nodes: () => Promise<ClusterView> | null;
}

/** Ids named at once by a retry from the page (the CLI, over the socket, may name more). */
export const MAX_RETRY_IDS = 1000;
const MAX_NAME = 255;
const MAX_REASON = 500;
const MAX_LIST = 1000;

const name = (what: string) =>
  z
    .string()
    .min(1, `${what} must not be empty`)
    .max(MAX_NAME, `${what} must be at most ${MAX_NAME} characters`)
    .refine(isPrintable, `${what} must not contain control characters`);

const listQuery = z.strictObject({
  domain: name('domain').optional(),
  account: name('account').optional(),
  state: z.enum(['due', 'deferred', 'scheduled', 'held']).optional(),
  limit: z
    .string()
    .regex(/^[0-9]{1,4}$/, `limit must be a whole number from 1 to ${MAX_LIST}`)
    .transform(Number)
    .refine((n) => n >= 1 && n <= MAX_LIST, `limit must be a whole number from 1 to ${MAX_LIST}`)
    .optional(),
});

const retryBody = z
  .strictObject({
    ids: z
      .array(z.string().max(100, 'ids must be message ids'))
      .min(1, 'ids must name at least one message')
      .max(MAX_RETRY_IDS, `ids may name at most ${MAX_RETRY_IDS} messages`)
      .optional(),
    domain: name('domain').optional(),
    account: name('account').optional(),
  })
  .refine((b) => b.ids !== undefined || b.domain !== undefined || b.account !== undefined, 'name the messages to retry: ids, domain or account');

const destinationBody = z.strictObject({ destination: name('destination') });
const suspendBody = z.strictObject({
  account: name('account'),
  reason: z
    .string()
    .trim()
    .min(1, 'reason must not be empty')
    .max(MAX_REASON, `reason must be at most ${MAX_REASON} characters`)
    .refine(isPrintable, 'reason must not contain control characters'),
});
const accountBody = z.strictObject({ account: name('account') });

/**
 * The operator's page (`/ui/api/operator/...`): the queue by destination with suspend, resume and
 * retry, held mail, the accounts with suspend and unsuspend, the listeners and readiness, and
 * the cluster's nodes. Each action goes through the same implementation as the control socket
 * and is logged as the socket logs it; an account session never gets here.
 */
export function operatorRoutes(deps: OperatorDeps): DashboardRoute[] {
  const handlers = (ctx: DashboardContext): ControlHandlers => {
    if (ctx.state.dashboard?.session.kind !== 'operator') throw forbidden("the operator's page");
    const found = deps.control();
    if (!found) throw new AppError(503, 'the daemon is still starting: try again in a moment');
    return found;
  };
  const log = (ctx: DashboardContext): Logger => ctx.state.log.child({ via: 'dashboard' });
  const route = (method: DashboardRoute['method'], path: string, handler: DashboardRoute['handler'], writes = false): DashboardRoute => ({
    area: 'operator',
    method,
    path,
    ...(writes ? { writes } : {}),
    handler,
  });

  return [
    route('GET', '/queue/status', async (ctx) => {
      ctx.body = await handlers(ctx).queue.status();
    }),
    route('GET', '/queue/messages', async (ctx) => {
      const { queue } = handlers(ctx);
      ctx.body = await queue.list(parseQuery(ctx, listQuery));
    }),
    route(
      'POST',
      '/queue/retry',
      async (ctx) => {
        const { queue } = handlers(ctx);
        const body = parseBody(ctx, retryBody);
        const result = await queue.retry(body);
        log(ctx).info({ op: 'queue retry', retried: result.retried, already_due: result.already_due }, 'operator retried queued messages');
        ctx.body = result;
      },
      true,
    ),
    ...(['suspend', 'resume'] as const).map((verb) =>
      route(
        'POST',
        `/queue/${verb}`,
        async (ctx) => {
          const { queue } = handlers(ctx);
          const { destination } = parseBody(ctx, destinationBody);
          const result = await queue[verb](destination);
          log(ctx).info({ op: `queue ${verb}`, destination: result.destination, changed: result.changed }, 'operator changed a destination');
          ctx.body = result;
        },
        true,
      ),
    ),
    route('GET', '/accounts', async (ctx) => {
      ctx.body = await handlers(ctx).admin.listAccounts({});
    }),
    route(
      'POST',
      '/accounts/suspend',
      async (ctx) => {
        const { admin } = handlers(ctx);
        const body = parseBody(ctx, suspendBody);
        const result = await admin.suspendAccount(body);
        log(ctx).info({ op: 'suspendAccount', account_id: result.id }, 'operator suspended an account');
        ctx.body = result;
      },
      true,
    ),
    route(
      'POST',
      '/accounts/unsuspend',
      async (ctx) => {
        const { admin } = handlers(ctx);
        const body = parseBody(ctx, accountBody);
        const result = await admin.unsuspendAccount(body);
        log(ctx).info({ op: 'unsuspendAccount', account_id: result.id }, 'operator unsuspended an account');
        ctx.body = result;
      },
      true,
    ),
    route('GET', '/system', async (ctx) => {
      const { doctor } = handlers(ctx);
      const [{ listeners }, cluster] = await Promise.all([doctor.listeners(), deps.nodes() ?? Promise.resolve(null)]);
      ctx.body = { readiness: deps.readiness(), listeners, cluster };
    }),
  ];
}

/** The cluster's status (cluster/status.ts readClusterStatus) as the operator's page shows it. */
export function clusterView(nodeId: string, status: ClusterStatus): ClusterView {
  return {
    node_id: nodeId,
    nodes: status.nodes.map((n) => ({
      id: n.id,
      live: n.state === 'live',
      state: n.state,
      leader: n.leader,
      last_seen: n.heartbeat_at,
      version: n.info.version ?? null,
      hostname: n.info.hostname ?? null,
      api_url: n.info.api_url ?? null,
      queue: n.info.queue ?? null,
    })),
  };
}
