import type { Logger } from 'pino';
import type { BoundListeners } from '../bind-phase.ts';
import type { SharedLimits } from '../cluster/shared-limits.ts';
import type { Config } from '../config/schema.ts';
import type { HeldListener } from '../control/doctor-protocol.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { StorageGuard } from '../store/storage-guard.ts';
import type { Signals } from '../util/signals.ts';
import type { Core, CoreSignals } from './core.ts';

/** One line of /readyz. */
export interface Readiness {
  name: string;
  ok: boolean;
}

/**
 * A feature as the daemon runs it: built with its collaborators (ports and signals passed at
 * construction), then started, asked whether it is ready, reloaded and stopped, all in the order
 * of the daemon's list (stops in reverse). The listeners were bound before anything was built
 * (bind-phase.ts); each assembly takes its own over when it starts.
 *
 * A stop has three steps, each run over the whole list before the next: `stopListening` (every
 * listener at once: nothing new comes in), `drain` (in reverse order: in-flight work ends, within
 * the grace period) and `close` (in reverse order: connections, threads and at last the store).
 */
export interface Assembly {
  readonly name: string;
  /**
   * The configuration it owns (dotted prefixes of keys: "delivery", "smtp.inbound"): a reload
   * gives it their new values, and each key of the schema is owned by exactly one assembly.
   */
  readonly sections: readonly string[];
  start?(): Promise<void>;
  ready?(): Readiness[];
  /**
   * Reads what the new configuration needs (certificate files): a read that fails throws before
   * any assembly applied anything. The function returned applies it and names the listeners
   * whose TLS material was reloaded.
   */
  reload?(config: Config): () => string[];
  /** The sockets it holds now, for `postilion doctor`. */
  held?(): HeldListener[];
  stopListening?(graceMs: number): Promise<void>;
  drain?(graceMs: number): Promise<void>;
  close?(): Promise<void>;
}

/** What every assembly is built with. */
export interface Context {
  config: Config;
  core: Core;
  log: Logger;
  signals: Signals<DaemonSignals>;
  metrics: Metrics;
  storage: StorageGuard;
  bound: BoundListeners;
  /** In a cluster, the limits shared with the other nodes (cluster/shared-limits.ts); absent on one node. */
  limits?: SharedLimits | undefined;
}

/** Every signal of the daemon: the services' (CoreSignals) and the storage guard's. */
export interface DaemonSignals extends CoreSignals {
  /** The data directory can be written again (true), or writes are refused (false). */
  'storage.writable': boolean;
}

/** Starts the assemblies in order. */
export async function startAll(assemblies: readonly Assembly[]): Promise<void> {
  for (const assembly of assemblies) await assembly.start?.();
}

/** Stops them: listeners at once, then drains and closes in reverse order; a step that fails does not keep the rest from stopping. */
export async function stopAll(assemblies: readonly Assembly[], graceMs: number, log: Logger): Promise<void> {
  const tried = (name: string, step: string) => (err: unknown) =>
    log.warn({ err, step: `${name} ${step}` }, 'could not finish a step of the stop; stopping all the same');
  await Promise.all(assemblies.map((a) => (a.stopListening?.(graceMs) ?? Promise.resolve()).catch(tried(a.name, 'listeners'))));
  const reversed = [...assemblies].reverse();
  for (const a of reversed) await a.drain?.(graceMs).catch(tried(a.name, 'drain'));
  for (const a of reversed) await a.close?.().catch(tried(a.name, 'close'));
}

/** Reloads them: every read first, then every apply. */
export function reloadAll(assemblies: readonly Assembly[], config: Config): string[] {
  const applies = assemblies.map((a) => a.reload?.(config));
  return applies.flatMap((apply) => apply?.() ?? []);
}
