import { createServer } from 'node:net';
import type { Config } from '../config/schema.ts';
import { codeOf, fail, ok, warn, type Check } from './check.ts';

/** A socket the daemon listens on, as the configuration names it. */
export interface ListenerSpec {
  name: string;
  /** The option that sets it, for the operator to find. */
  option: string;
  host: string;
  port: number;
}

/** Whether a running daemon was found on the control socket. */
export type DaemonState = { kind: 'running' } | { kind: 'stopped' } | { kind: 'unknown'; reason: string };

/** What binding an address now gave: free, or the error code (EADDRINUSE, EACCES, …). */
export type BindResult = { free: true } | { free: false; code: string };

/** The listeners the daemon opens with this configuration, in the order it opens them. */
export function configuredListeners(config: Config): ListenerSpec[] {
  const listeners: ListenerSpec[] = [];
  const s = config.smtp.submission;
  if (s.enabled && s.starttls_port !== null) {
    listeners.push({ name: 'smtp-starttls', option: 'smtp.submission.starttls_port', host: s.host, port: s.starttls_port });
  }
  if (s.enabled && s.tls_port !== null) {
    listeners.push({ name: 'smtp-tls', option: 'smtp.submission.tls_port', host: s.host, port: s.tls_port });
  }
  listeners.push({ name: 'api', option: 'api.port', host: config.api.host, port: config.api.port });
  if (config.api.tls.enabled) listeners.push({ name: 'api-tls', option: 'api.tls.port', host: config.api.tls.host, port: config.api.tls.port });
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
function addressOf(spec: ListenerSpec): string {
  return `${spec.host.includes(':') && !spec.host.startsWith('[') ? `[${spec.host}]` : spec.host}:${spec.port}`;
}

const WILDCARDS = new Set(['0.0.0.0', '::', '[::]']);

/** Two listeners that would want the same socket (a wildcard host overlaps every address). */
function clash(a: ListenerSpec, b: ListenerSpec): boolean {
  if (a.port === 0 || a.port !== b.port) return false;
  return a.host === b.host || WILDCARDS.has(a.host) || WILDCARDS.has(b.host);
}

/**
 * The verdict on one listener, a pure function of what binding it gave and whether a daemon runs:
 * free → OK (WARN when a daemon runs: it does not listen there, so it runs another configuration);
 * in use → OK when a daemon runs (it holds it), FAIL when none does, WARN when that is unknown;
 * any other bind error → FAIL.
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
  switch (bound.code) {
    case 'EADDRINUSE':
      if (daemon.kind === 'running') return ok(name, `${at} is in use by the running daemon`);
      if (daemon.kind === 'unknown') return warn(name, `${at} is in use, maybe by the daemon (${daemon.reason})`);
      return fail(name, `${at} is in use by another process (no Postilion daemon answers on the control socket): the daemon could not start (${spec.option})`);
    case 'EACCES':
      return fail(name, `${at}: permission denied${spec.port < 1024 ? ': ports below 1024 need root or CAP_NET_BIND_SERVICE (the systemd unit grants it)' : ''}`);
    case 'EADDRNOTAVAIL':
      return fail(name, `${at}: ${spec.host} is not an address of this machine (EADDRNOTAVAIL)`);
    default:
      return fail(name, `${at} cannot be bound: ${bound.code}`);
  }
}

/** Checks every configured listener: clashes within the configuration first, then a bind now. */
export async function checkListeners(config: Config, daemon: DaemonState): Promise<Check[]> {
  const listeners = configuredListeners(config);
  const checks: Check[] = [];
  for (const [i, spec] of listeners.entries()) {
    const earlier = listeners.slice(0, i).find((other) => clash(other, spec));
    if (earlier) {
      checks.push(fail(`listener ${spec.name}`, `${addressOf(spec)} is also the address of ${earlier.name} (${earlier.option}): the daemon could not start`));
    } else if (spec.port === 0) {
      checks.push(ok(`listener ${spec.name}`, `${spec.option} is 0: a free port is picked at start`));
    } else {
      checks.push(judgeListener(spec, await tryBind(spec.host, spec.port), daemon));
    }
  }
  return checks;
}
