import type { Config } from './schema.ts';
import { configSchema } from './schema.ts';

/** What a SIGHUP does with a changed key: applies it to the running daemon, or names it as waiting for a restart. */
export type ReloadRule = 'live' | 'restart';

/**
 * Every key of the configuration and its rule, in one place. Each key of the schema has an entry
 * (a test walks the schema and the example file against this table), so a key added without
 * deciding what a reload does with it fails there; at run time such a key counts as 'restart'.
 * A record (delivery.transport, delivery.destinations) or a list is one key.
 */
export const RELOAD: Readonly<Record<string, ReloadRule>> = {
  'server.hostname': 'restart',
  'server.sending_ips': 'restart',
  'dns.servers': 'restart',
  'dns.timeout_ms': 'restart',
  'dns.tries': 'restart',
  'dns.dnssec': 'restart',
  'domains.check_schedule': 'restart',
  'domains.check_cache_seconds': 'restart',
  'domains.tracking_subdomain': 'restart',
  'domains.return_path_subdomain': 'restart',
  'domains.subscription_subdomain': 'restart',
  'domains.media_subdomain': 'restart',
  'domains.dmarc_record': 'restart',
  'dkim.ed25519': 'restart',
  'dkim.rotation_schedule': 'restart',
  'dkim.retired_grace_days': 'restart',
  'messages.retention_purge_schedule': 'restart',
  'delivery.enabled': 'restart',
  'delivery.concurrency': 'restart',
  'delivery.per_destination': 'restart',
  'delivery.ready_limit': 'restart',
  'delivery.messages_per_connection': 'restart',
  'delivery.idle_timeout_ms': 'restart',
  'delivery.connect_timeout_ms': 'restart',
  'delivery.command_timeout_ms': 'restart',
  'delivery.mx_port': 'restart',
  'delivery.tls': 'restart',
  'delivery.tls_reject_unauthorized': 'restart',
  'delivery.unreachable_seconds': 'restart',
  'delivery.transport': 'restart',
  'delivery.smarthost.host': 'restart',
  'delivery.smarthost.port': 'restart',
  'delivery.smarthost.tls': 'restart',
  'delivery.destinations': 'restart',
  'delivery.mta_sts.enabled': 'restart',
  'delivery.mta_sts.ca_file': 'restart',
  'delivery.mta_sts.port': 'restart',
  'delivery.mta_sts.allow_private': 'restart',
  'delivery.mta_sts.fetch_timeout_ms': 'restart',
  'delivery.mta_sts.recheck_seconds': 'restart',
  'delivery.bounce_rules': 'restart',
  'delivery.shaping': 'restart',
  'delivery.shaping_file': 'restart',
  'delivery.retry.first_delay_seconds': 'restart',
  'delivery.retry.max_delay_seconds': 'restart',
  'delivery.retry.max_age_hours': 'restart',
  'delivery.retry.jitter': 'restart',
  'tls_reporting.enabled': 'restart',
  'tls_reporting.from': 'restart',
  'tls_reporting.organization': 'restart',
  'tls_reporting.contact': 'restart',
  'tls_reporting.schedule': 'restart',
  'tls_reporting.flush_seconds': 'restart',
  'tls_reporting.max_domains_per_day': 'restart',
  'tls_reporting.timeout_ms': 'restart',
  'tls_reporting.allow_networks': 'restart',
  'tls_reporting.ca_file': 'restart',
  // The policies served are swapped at a reload (both listeners), so a new MX goes out at once.
  'mta_sts_policy.domains': 'live',
  'mta_sts_policy.check_port': 'live',
  'mta_sts_policy.check_ca_file': 'live',
  'delivery.sources': 'restart',
  'delivery.pools': 'restart',
  'delivery.default_pool': 'restart',
  'delivery.account_pools': 'restart',
  // A node joins (or leaves) the cluster only at a start.
  'cluster.database_url': 'restart',
  'cluster.database_url_file': 'restart',
  'cluster.node_id': 'restart',
  'cluster.key_file': 'restart',
  'cluster.redis_url': 'restart',
  'cluster.pool_size': 'restart',
  'data.dir': 'restart',
  // The storage guard takes them when it is built.
  'storage.min_free_bytes': 'restart',
  'storage.min_free_percent': 'restart',
  'storage.check_interval_ms': 'restart',
  'keys.dir': 'restart',
  'log.level': 'live',
  'api.host': 'restart',
  'api.port': 'restart',
  'api.tls.enabled': 'restart',
  'api.tls.host': 'restart',
  'api.tls.port': 'restart',
  // The certificate files are re-read at every SIGHUP while the HTTPS listener runs.
  'api.tls.cert': 'live',
  'api.tls.key': 'live',
  'api.trusted_proxies': 'live',
  'api.body_limit_bytes': 'live',
  'api.body_memory_bytes': 'live',
  'api.auth_failures.per_second': 'live',
  'api.auth_failures.burst': 'live',
  'api.rate_limits.general.per_second': 'live',
  'api.rate_limits.general.burst': 'live',
  'api.rate_limits.statistics.per_second': 'live',
  'api.rate_limits.statistics.burst': 'live',
  'api.idempotency.lease_seconds': 'live',
  'api.idempotency.retention_hours': 'live',
  'api.idempotency.secret_retention_seconds': 'live',
  'api.idempotency.purge_schedule': 'restart',
  // Given to each SMTP listener when it is built.
  'smtp.command_deadline_seconds': 'restart',
  'smtp.data_deadline_seconds': 'restart',
  'smtp.submission.enabled': 'restart',
  'smtp.submission.host': 'restart',
  'smtp.submission.starttls_port': 'restart',
  'smtp.submission.tls_port': 'restart',
  // Re-read at every SIGHUP while submission runs (the inbound listener uses them too).
  'smtp.submission.cert': 'live',
  'smtp.submission.key': 'live',
  'smtp.submission.max_message_bytes': 'restart',
  'smtp.submission.max_recipients': 'restart',
  'smtp.submission.max_connections_per_address': 'restart',
  'smtp.submission.plain_auth_from': 'restart',
  'smtp.submission.auth_failures.limit': 'restart',
  'smtp.submission.auth_failures.window_seconds': 'restart',
  'smtp.inbound.enabled': 'restart',
  'smtp.inbound.host': 'restart',
  'smtp.inbound.port': 'restart',
  'smtp.inbound.max_message_bytes': 'restart',
  'smtp.inbound.max_recipients': 'restart',
  'smtp.inbound.max_connections_per_address': 'restart',
  'smtp.inbound.spamd': 'restart',
  'smtp.inbound.dmarc_policy': 'restart',
  'events.retention_days': 'restart',
  'webhooks.concurrency': 'restart',
  'webhooks.per_origin': 'restart',
  'webhooks.ready_limit': 'restart',
  'webhooks.allow_networks': 'restart',
  'tracking.enabled': 'restart',
  'tracking.host': 'restart',
  'tracking.port': 'restart',
  'tracking.tls.enabled': 'restart',
  'tracking.tls.cert': 'restart',
  'tracking.tls.key': 'restart',
  'tracking.link_scheme': 'restart',
  'tracking.scanner_seconds': 'restart',
  'statistics.counters': 'restart',
  'billing.monthly_amount': 'restart',
  'billing.currency': 'restart',
  'shutdown.grace_seconds': 'live',
  'metrics.enabled': 'restart',
  'metrics.host': 'restart',
  'metrics.port': 'restart',
  'metrics.queue_refresh_seconds': 'restart',
  'dashboard.enabled': 'live',
  'dashboard.session_ttl_minutes': 'live',
  'dashboard.login_link_ttl_seconds': 'live',
  'dashboard.public_url': 'live',
};

/** The changed keys of a reload, by what happens to them. */
export interface ReloadPlan {
  live: string[];
  restart: string[];
}

/** The keys that differ between the running configuration and the one read again, by rule. */
export function reloadPlan(running: Config, next: Config): ReloadPlan {
  const plan: ReloadPlan = { live: [], restart: [] };
  for (const key of configKeys()) {
    if (JSON.stringify(valueAt(running, key)) === JSON.stringify(valueAt(next, key))) continue;
    plan[RELOAD[key] ?? 'restart'].push(key);
  }
  return plan;
}

/** The configuration the daemon runs with after the reload: the running one with the live keys of `next`. */
export function applyLive(running: Config, next: Config, live: readonly string[]): Config {
  const applied = structuredClone(running);
  for (const key of live) setAt(applied, key, structuredClone(valueAt(next, key)));
  return applied;
}

let keys: string[] | null = null;

/** Every key of the configuration schema, dotted ("api.tls.port"); records and lists are one key each. */
export function configKeys(): string[] {
  keys ??= leaves(configSchema, '');
  return keys;
}

/** What zod 4 says of a schema node: its kind and, for wrappers and objects, what is inside. */
interface Def {
  type: string;
  shape?: Record<string, unknown>;
  innerType?: unknown;
  in?: unknown;
}

function leaves(schema: unknown, path: string): string[] {
  const def = (schema as { _zod: { def: Def } })._zod.def;
  switch (def.type) {
    case 'object':
      return Object.entries(def.shape!).flatMap(([name, inner]) => leaves(inner, path ? `${path}.${name}` : name));
    case 'default':
    case 'prefault':
    case 'optional':
    case 'nullable':
      return leaves(def.innerType, path);
    case 'pipe':
      return leaves(def.in, path);
    default:
      return [path];
  }
}

function valueAt(config: unknown, key: string): unknown {
  let node = config;
  for (const part of key.split('.')) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

function setAt(config: unknown, key: string, value: unknown): void {
  const parts = key.split('.');
  let node = config as Record<string, unknown>;
  for (const part of parts.slice(0, -1)) node = node[part] as Record<string, unknown>;
  node[parts.at(-1)!] = value;
}
