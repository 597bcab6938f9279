import { X509Certificate } from 'node:crypto';
import { connect } from 'node:tls';
import type { Config } from '../config/schema.ts';
import type { HeldListener, ListenerName } from '../control/doctor-protocol.ts';
import { configuredCertificates, readCertificate, type CertificateFiles, type CertificateSpec } from './certificates.ts';
import { codeOf, fail, ok, warn, type Check } from './check.ts';
import type { DaemonState } from './listeners.ts';

/** How long a TLS handshake with the running daemon may take. */
const HANDSHAKE_MS = 5000;

/** The implicit-TLS listener that serves each certificate (STARTTLS ones would need an SMTP dialogue). */
const SERVED_ON: Record<string, ListenerName> = { api: 'api-tls', 'smtp-submission': 'smtp-tls', tracking: 'tracking' };

/** What the daemon answered a TLS handshake with: its certificate, or why there was none. */
export type Served = { cert: X509Certificate } | { error: string };

/** Where to connect to reach a socket bound to a wildcard address: this machine's loopback. */
function dialHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::' || host === '[::]') return '::1';
  return host;
}

/** The certificate the listener at host:port presents (not verified: this is about which one it is). */
export function fetchServed(host: string, port: number): Promise<Served> {
  return new Promise((resolve) => {
    const socket = connect({ host: dialHost(host), port, rejectUnauthorized: false, timeout: HANDSHAKE_MS });
    const done = (served: Served) => {
      socket.destroy();
      resolve(served);
    };
    socket.once('secureConnect', () => {
      const raw = socket.getPeerCertificate(false).raw;
      done(raw ? { cert: new X509Certificate(raw) } : { error: 'no certificate was presented' });
    });
    socket.once('timeout', () => done({ error: `no TLS handshake within ${HANDSHAKE_MS / 1000} s` }));
    socket.once('error', (err) => done({ error: codeOf(err) }));
  });
}

/**
 * The verdict on the certificate a running daemon serves, next to the file it was read from: OK
 * when it is the file's; otherwise the file changed since the daemon read it (renewed and not
 * reloaded): WARN, or FAIL when what it serves has expired. Null when the file itself is not
 * readable (its own check says so).
 */
export function judgeServed(spec: CertificateSpec, files: CertificateFiles, at: string, served: Served, now: number): Check | null {
  const name = `tls ${spec.name} served`;
  if ('error' in served) return warn(name, `the certificate the running daemon serves on ${at} could not be read: ${served.error}`);
  if (files.kind !== 'read') return null;
  if (served.cert.fingerprint256 === files.cert.fingerprint256) return ok(name, `the running daemon serves ${spec.certPath} on ${at}`);
  const until = new Date(Date.parse(served.cert.validTo)).toISOString();
  // The daemon re-reads the API and SMTP certificates on SIGHUP; the tracking listener's at a restart.
  const apply = spec.name === 'tracking' ? 'restart it' : 'reload it (SIGHUP) or restart it';
  const why = `the running daemon serves on ${at} another certificate than ${spec.certPath} (one valid until ${until}): ${apply} to serve the file's`;
  return now > Date.parse(served.cert.validTo) ? fail(name, `${why}; what it serves has expired`) : warn(name, why);
}

/** With a running daemon that says which sockets it holds: each certificate it serves on an implicit-TLS listener. */
export async function checkServedCertificates(config: Config, daemon: DaemonState, now: number): Promise<Check[]> {
  if (daemon.kind !== 'running' || daemon.held === null) return [];
  const held = daemon.held;
  const checks = await Promise.all(
    configuredCertificates(config).map(async (spec) => {
      const listener: HeldListener | undefined = held.find((h) => h.name === SERVED_ON[spec.name]);
      if (!listener) return null;
      const at = `${listener.host.includes(':') ? `[${listener.host}]` : listener.host}:${listener.port}`;
      return judgeServed(spec, readCertificate(spec), at, await fetchServed(listener.host, listener.port), now);
    }),
  );
  return checks.filter((c): c is Check => c !== null);
}
