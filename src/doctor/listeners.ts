import ipaddr from 'ipaddr.js';
import { createServer } from 'node:net';
import type { Config } from '../config/schema.ts';
import type { HeldListener, ListenerName } from '../control/doctor-protocol.ts';
import { codeOf, fail, ok, warn, type Check } from './check.ts';

/** A socket the daemon listens on, as the configuration names it. */
export interface ListenerSpec {
  name: ListenerName;
  /** The option that sets it, for the operator to find. */
  option: string;
  host: string;
  port: number;
}

/**
 * Whether a running daemon was found on the control socket. A running one says which sockets it
 * holds (`held`), or null when it does not (a release before the doctor asked).
 */
export type DaemonState = { kind: 'running'; held: HeldListener[] | null } | { kind: 'stopped' } | { kind: 'unknown'; reason: string };

/** What binding an address now gave: free, or the error code (EADDRINUSE, EACCES, …). */
export type BindResult = { free: true } | { free: false; code: string };

/** The TCP listeners the daemon opens with this configuration (the control socket is control-socket.ts's). */
export function configuredListeners(config: Config): ListenerSpec[] {
  const listeners: ListenerSpec[] = [];
  const s = config.smtp.submission;
  if (s.enabled && s.starttls_port !== null) {
    listeners.push({ name: 'smtp-starttls', option: 'smtp.submission.starttls_port', host: s.host, port: s.starttls_port });
  }
  if (s.enabled && s.tls_port !== null) {
    listeners.push({ name: 'smtp-tls', option: 'smtp.submission.tls_port', host: s.host, port: s.tls_port });
  }
  const i = config.smtp.inbound;
  if (i.enabled) listeners.push({ name: 'inbound', option: 'smtp.inbound.port', host: i.host, port: i.port });
  listeners.push({ name: 'api', option: 'api.port', host: config.api.host, port: config.api.port });
  if (config.api.tls.enabled) listeners.push({ name: 'api-tls', option: 'api.tls.port', host: config.api.tls.host, port: config.api.tls.port });
  const t = config.tracking;
  if (t.enabled) listeners.push({ name: 'tracking', option: 'tracking.port', host: t.host, port: t.port });
  // Absent from older configuration schemas: then there is no metrics listener to check.
  const metrics = (config as Partial<Config>).metrics;
  if (metrics?.enabled) listeners.push({ name: 'metrics', option: 'metrics.port', host: metrics.host, port: metrics.port });
  return listeners;
}

/** Binds host:port exclusively and lets it go at once. */
export function tryBind(host: string, port: number): Promise<BindResult> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err) => resolve({ free: false, code: codeOf(err) }));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve({ free: true })));
  });
}

/** host:port, an IPv6 host in brackets. */
function addressOf(spec: { host: string; port: number }): string {
  return `${spec.host.includes(':') && !spec.host.startsWith('[') ? `[${spec.host}]` : spec.host}:${spec.port}`;
}

const WILDCARDS = new Set(['0.0.0.0', '::', '[::]']);

/** Two listeners that would want the same socket (a wildcard host overlaps every address). */
function clash(a: ListenerSpec, b: ListenerSpec): boolean {
  if (a.port === 0 || a.port !== b.port) return false;
  return a.host === b.host || WILDCARDS.has(a.host) || WILDCARDS.has(b.host);
}

/** Why an address could not be bound, for a reason other than another socket on it. */
function bindFailure(spec: ListenerSpec, code: string): Check {
  const name = `listener ${spec.name}`;
  const at = addressOf(spec);
  switch (code) {
    case 'EACCES':
      return fail(
        name,
        `${at}: permission denied${spec.port < 1024 ? ': ports below 1024 need root or CAP_NET_BIND_SERVICE (the systemd unit grants it)' : ''}`,
      );
    case 'EADDRNOTAVAIL':
      return fail(name, `${at}: ${spec.host} is not an address of this machine (EADDRNOTAVAIL)`);
    default:
      return fail(name, `${at} cannot be bound: ${code}`);
  }
}

/**
 * The verdict on one listener when the daemon does not say which sockets it holds (it is stopped,
 * cannot be asked, or is of an older release), a pure function of what binding it gave:
 * free → OK (WARN when a daemon runs: it does not listen there, so it runs another configuration);
 * in use → FAIL when no daemon runs, WARN when that is unknown, OK when one runs (it is taken to
 * hold it); any other bind error → FAIL.
 */
export function judgeListener(spec: ListenerSpec, bound: BindResult, daemon: DaemonState): Check {
  const name = `listener ${spec.name}`;
  const at = addressOf(spec);
  if (bound.free) {
    if (daemon.kind === 'running') {
      return warn(name, `${at} is free, so the running daemon does not listen on it: it runs with another configuration (restart it to apply this one)`);
    }
    return ok(name, `${at} can be bound`);
  }
  if (bound.code !== 'EADDRINUSE') return bindFailure(spec, bound.code);
  switch (daemon.kind) {
    case 'running':
      return ok(name, `${at} is in use, by the running daemon (it does not say which sockets it holds)`);
    case 'unknown':
      return warn(name, `${at} is in use, maybe by the daemon (${daemon.reason})`);
    case 'stopped':
      return fail(name, `${at} is in use by another process (no Postilion daemon answers on the control socket): the daemon could not start (${spec.option})`);
  }
}

/** An address spelled as given (`::1`, `[::1]`), or its normal form when it is an IP address. */
function normalHost(host: string): string | null {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  return ipaddr.isValid(bare) ? ipaddr.process(bare).toNormalizedString() : null;
}

/** Whether the daemon's socket is the one configured: the same port, and the same address when both are IP addresses (a host name is not resolved). */
export function sameSocket(held: HeldListener, spec: ListenerSpec): boolean {
  if (held.port !== spec.port) return false;
  const [a, b] = [normalHost(held.host), normalHost(spec.host)];
  return a === null || b === null || a === b;
}

/**
 * The verdict on one listener of a running daemon that says which sockets it holds: OK when it
 * holds this one under this name. Otherwise it runs another configuration, and the question is
 * whether a restart with this one would work: WARN when the address is free or held by another
 * of the daemon's listeners, FAIL when another process holds it (the restart fails). `bound` is
 * what binding the configured address gave (not asked when the daemon holds it).
 */
export function judgeHeldListener(spec: ListenerSpec, held: readonly HeldListener[], bound: BindResult | null): Check {
  const name = `listener ${spec.name}`;
  const at = addressOf(spec);
  const mine = held.find((h) => h.name === spec.name) ?? null;
  if (mine !== null && spec.port === 0) return ok(name, `${spec.option} is 0: the running daemon picked ${addressOf(mine)}`);
  if (mine !== null && sameSocket(mine, spec)) return ok(name, `${at} is in use by the running daemon`);
  const now = mine === null ? `the running daemon has no ${spec.name} listener` : `the running daemon listens on ${addressOf(mine)}`;
  const restart = 'restart it to apply this configuration';
  const other = held.find((h) => h.name !== spec.name && sameSocket(h, spec));
  if (other) return warn(name, `${at} is held by the running daemon's ${other.name} listener and ${now}: ${restart}`);
  if (spec.port === 0 || bound === null || bound.free) {
    const then = spec.port === 0 ? `${spec.option} is 0: a free port is picked at start` : `${at} can be bound`;
    return warn(name, `${mine === null ? now : `${now}, not ${at} (${spec.option})`}: ${restart}; ${then}`);
  }
  if (bound.code === 'EADDRINUSE') {
    return fail(name, `${at} is in use by another process, not by the running daemon (${now}): a restart with this configuration fails (${spec.option})`);
  }
  return bindFailure(spec, bound.code);
}

/** Checks every configured listener: clashes within the configuration first, then the daemon's word or a bind now. */
export async function checkListeners(config: Config, daemon: DaemonState): Promise<Check[]> {
  const listeners = configuredListeners(config);
  const checks: Check[] = [];
  for (const [i, spec] of listeners.entries()) {
    const earlier = listeners.slice(0, i).find((other) => clash(other, spec));
    if (earlier) {
      checks.push(fail(`listener ${spec.name}`, `${addressOf(spec)} is also the address of ${earlier.name} (${earlier.option}): the daemon could not start`));
    } else if (daemon.kind === 'running' && daemon.held !== null) {
      const { held } = daemon;
      const holds = held.some((h) => h.name === spec.name && (spec.port === 0 || sameSocket(h, spec)));
      checks.push(judgeHeldListener(spec, held, holds || spec.port === 0 ? null : await tryBind(spec.host, spec.port)));
    } else if (spec.port === 0) {
      checks.push(ok(`listener ${spec.name}`, `${spec.option} is 0: a free port is picked at start`));
    } else {
      checks.push(judgeListener(spec, await tryBind(spec.host, spec.port), daemon));
    }
  }
  return checks;
}
