import type { DomainRecord } from '../store/records.ts';

/**
 * What `postilion doctor` reads from a running daemon over the control socket, since the daemon
 * holds the store's lock and the listeners' ports: read-only, nothing in the daemon changes.
 *
 *   GET /v1/doctor/listeners   the sockets the daemon holds
 *   GET /v1/doctor/domains     every domain record (names, selectors, public keys: no secret)
 */
export interface DoctorReads {
  listeners(): Promise<{ listeners: HeldListener[] }>;
  domains(): Promise<{ domains: DomainRecord[] }>;
}

/** The TCP listeners of the daemon, named as doctor's `listener <name>` lines name them. */
export const LISTENER_NAMES = ['smtp-starttls', 'smtp-tls', 'api', 'api-tls', 'inbound', 'tracking', 'metrics'] as const;
export type ListenerName = (typeof LISTENER_NAMES)[number];

/** A socket the running daemon listens on: the host it was asked for (or bound), the bound port. */
export interface HeldListener {
  name: ListenerName;
  host: string;
  port: number;
}

export const DOCTOR_PATHS = { listeners: '/v1/doctor/listeners', domains: '/v1/doctor/domains' } as const;

/** A listener known by its URL (`http://127.0.0.1:8080`, `https://[::1]:8443`). */
export function heldAt(name: ListenerName, url: string): HeldListener {
  const u = new URL(url);
  const port = u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port);
  return { name, host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port };
}
