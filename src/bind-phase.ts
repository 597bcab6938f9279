import { mkdirSync, rmdirSync, existsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Config } from './config/schema.ts';
import { controlSocketPath } from './control/protocol.ts';
import { ControlServer } from './control/server.ts';
import { TrackingListenerThread } from './tracking/listener-thread.ts';
import { BoundSocket } from './util/bound-socket.ts';
import { readTlsFiles } from './util/tls-files.ts';

/** A listener that cannot be opened: one line and exit status 2, with nothing of the daemon started. */
export class ListenError extends Error {
  override name = 'ListenError';
}

/** Every socket the daemon listens on with its configuration, bound; null where that listener is off. */
export interface BoundListeners {
  smtpStarttls: BoundSocket | null;
  smtpTls: BoundSocket | null;
  smtpInbound: BoundSocket | null;
  api: BoundSocket;
  apiTls: BoundSocket | null;
  metrics: BoundSocket | null;
  tracking: TrackingListenerThread | null;
  control: ControlServer;
  /** Lets go of what no component has taken (a start that failed after this phase). */
  close(): Promise<void>;
}

/**
 * The daemon's first step: binds every listener its configuration names, in this order, before
 * the store is opened or any key, certificate or data file is made. The first that cannot be
 * bound stops it with a ListenError naming the listener and its address; what was bound by then
 * is let go, and nothing else has happened. Two listeners on one address clash here as they
 * would later. The components take their sockets over as they start (BoundSocket.handTo; the
 * tracking thread and the control socket are told to serve).
 */
export async function bindListeners(config: Config): Promise<BoundListeners> {
  const sockets: BoundSocket[] = [];
  let tracking: TrackingListenerThread | null = null;
  const release = async () => {
    await Promise.all(sockets.map((socket) => socket.close()));
    await tracking?.close(0);
  };
  const tcp = async (name: string, host: string, port: number): Promise<BoundSocket> => {
    try {
      const socket = await BoundSocket.bind(host, port);
      sockets.push(socket);
      return socket;
    } catch (err) {
      throw listenError(name, hostPort(host, port), err, port);
    }
  };
  try {
    const s = config.smtp.submission;
    const i = config.smtp.inbound;
    const smtpStarttls = s.enabled && s.starttls_port !== null ? await tcp('smtp-starttls', s.host, s.starttls_port) : null;
    const smtpTls = s.enabled && s.tls_port !== null ? await tcp('smtp-tls', s.host, s.tls_port) : null;
    const smtpInbound = i.enabled ? await tcp('smtp-inbound', i.host, i.port) : null;
    const api = await tcp('api', config.api.host, config.api.port);
    const apiTls = config.api.tls.enabled ? await tcp('api-tls', config.api.tls.host, config.api.tls.port) : null;
    const metrics = config.metrics.enabled ? await tcp('metrics', config.metrics.host, config.metrics.port) : null;
    if (config.tracking.enabled) {
      const t = config.tracking;
      // A thread of its own, which binds its socket itself: a listening socket cannot cross to a thread.
      const tls = t.tls.enabled ? readTlsFiles(config.keys.dir, t.tls, 'tracking.tls') : null;
      try {
        tracking = await TrackingListenerThread.bind({ host: t.host, port: t.port, tls });
      } catch (err) {
        throw listenError('tracking', hostPort(t.host, t.port), err, t.port);
      }
    }
    const control = await bindControl(controlSocketPath(config));
    return {
      smtpStarttls,
      smtpTls,
      smtpInbound,
      api,
      apiTls,
      metrics,
      tracking,
      control,
      close: async () => {
        await release();
        await control.close(0);
      },
    };
  } catch (err) {
    await release();
    throw err;
  }
}

/**
 * The control socket, last: it lives in the data directory, made here when it is missing (and
 * removed again when the socket cannot be bound in it).
 */
async function bindControl(path: string): Promise<ControlServer> {
  const dir = dirname(path);
  const made = !existsSync(dir);
  try {
    if (made) mkdirSync(dir, { recursive: true });
    return await ControlServer.bind(path);
  } catch (err) {
    if (made) {
      try {
        rmdirSync(dir);
      } catch {
        // Not empty after all: then it is not ours to remove.
      }
    }
    throw listenError('control', path, err, 0);
  }
}

function listenError(name: string, at: string, err: unknown, port: number): ListenError {
  const e = err as NodeJS.ErrnoException;
  if (e.code === undefined) return new ListenError(`cannot listen on ${at} (${name}): ${e.message}`);
  return new ListenError(`cannot listen on ${at} (${name}): ${reason(name, at, e, port)}`);
}

function reason(name: string, at: string, err: NodeJS.ErrnoException, port: number): string {
  switch (err.code) {
    case 'EADDRINUSE':
      // The control socket answers: another daemon holds this data directory (as the store's lock would say next).
      return name === 'control'
        ? `address already in use: data directory ${dirname(at)} is in use by another process (a postilion daemon answers on its control socket)`
        : 'address already in use';
    case 'EACCES':
      return port > 0 && port < 1024
        ? 'permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE, which the systemd unit grants)'
        : 'permission denied';
    case 'EADDRNOTAVAIL':
      return 'not an address of this machine';
    default:
      return err.code ?? err.message;
  }
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
