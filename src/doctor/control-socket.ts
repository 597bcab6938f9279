import { accessSync, constants, existsSync, lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Config } from '../config/schema.ts';
import { controlSocketPath } from '../control/protocol.ts';
import { MAX_SOCKET_PATH } from '../control/server.ts';
import { codeOf, fail, ok, warn, type Check } from './check.ts';
import type { DaemonState } from './listeners.ts';

/** What the control socket's path allows a starting daemon, found without creating anything. */
export type SocketPlace =
  | { kind: 'too-long'; bytes: number }
  | { kind: 'not-a-socket' }
  | { kind: 'not-writable'; dir: string; code: string }
  /** `stale`: a socket file left by a daemon that stopped or crashed (a starting one replaces it). */
  | { kind: 'bindable'; stale: boolean };

/** Looks at the path and its directory (or the nearest existing parent, which data.dir is made in). */
export function inspectSocketPath(path: string): SocketPlace {
  const bytes = Buffer.byteLength(path);
  if (bytes > MAX_SOCKET_PATH) return { kind: 'too-long', bytes };
  let dir = dirname(path);
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (err) {
    return { kind: 'not-writable', dir, code: codeOf(err) };
  }
  try {
    return lstatSync(path).isSocket() ? { kind: 'bindable', stale: true } : { kind: 'not-a-socket' };
  } catch {
    return { kind: 'bindable', stale: false };
  }
}

/**
 * The verdict on the control socket (the CLI's way into a running daemon): OK when the running
 * daemon answers on it, or when a starting one can create it; FAIL when the path is too long for
 * a Unix socket, is taken by something that is not a socket, or its directory is not writable.
 */
export function judgeControlSocket(path: string, place: SocketPlace, daemon: DaemonState): Check {
  const name = 'listener control';
  if (daemon.kind === 'running') return ok(name, `${path}: the running daemon answers on it`);
  if (daemon.kind === 'unknown') return warn(name, `${path}: ${daemon.reason}`);
  switch (place.kind) {
    case 'too-long':
      return fail(name, `${path} is ${place.bytes} bytes, longer than the ${MAX_SOCKET_PATH} a Unix socket path may be: use a shorter data.dir`);
    case 'not-a-socket':
      return fail(name, `${path} exists and is not a socket: the daemon could not start (move it away)`);
    case 'not-writable':
      return fail(name, `${path} cannot be created: ${place.dir} is not writable by this user (${place.code}); run as the daemon's user`);
    case 'bindable':
      return ok(name, place.stale ? `${path} can be bound (a socket file left by a stopped daemon is there: it is replaced at start)` : `${path} can be bound`);
  }
}

export function checkControlSocket(config: Config, daemon: DaemonState): Check {
  const path = controlSocketPath(config);
  return judgeControlSocket(path, inspectSocketPath(path), daemon);
}
