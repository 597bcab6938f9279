import { join, resolve } from 'node:path';
import type { Config } from '../config/schema.ts';
import type { AdminOperation } from './admin-protocol.ts';

/**
 * The operator's view of the queue: what the `postilion queue` commands ask, answered the same
 * way by a running daemon (over its control socket) and by the store opened directly. Field
 * names are snake_case because `--json` prints these objects as they are.
 */
export interface QueueOperations {
  status(): Promise<QueueStatus>;
  list(query: ListQuery): Promise<QueueList>;
  retry(selection: Selection): Promise<RetryResult>;
  purge(selection: Selection): Promise<PurgeResult>;
  /** Stops starting jobs for the engine destination a name stands for (an MX set, a transport or smarthost host, a URL origin) until resumed; kept across restarts. */
  suspend(destination: string): Promise<SuspendResult>;
  resume(destination: string): Promise<SuspendResult>;
}

export interface SuspendResult {
  /** The engine destination suspended or resumed: an MX set, a transport or smarthost host, a URL origin. */
  destination: string;
  /** The name as the operator gave it (lower case). */
  name: string;
  /** How the name led to the destination (see queue/destination-name.ts). */
  via: 'destination' | 'mx' | 'transport' | 'smarthost' | 'origin';
  suspended: boolean;
  /** false: it already was (or was not) suspended. */
  changed: boolean;
}

/** Stored HTTP jobs (webhook deliveries, route POSTs) of one kind and destination (URL origin). */
export interface JobFigures {
  kind: string;
  destination: string;
  /** On the due-time index: waiting for their first or next attempt. */
  pending: number;
  /** Of those, due now. */
  due: number;
  /** Held while their webhook is disabled. */
  held: number;
  /** Waiting, off the index, for an origin that answers nothing (probed; no attempt used up). */
  parked: number;
  /** Attempts used up; kept until the retention purge. */
  failed: number;
  next_attempt_at: string | null;
}

/** A destination of the running engine: what it has in memory and its limits. */
export interface EngineFigures {
  destination: string;
  dispatcher: 'smtp' | 'http';
  kinds: string[];
  ready: number;
  running: number;
  concurrency: number;
  rate: number | null;
  suspended: boolean;
  /** Found down (connections refused or timed out), or suspended by a throttling reply: no job starts before this time. */
  paused_until: string | null;
  /** Traffic shaping: the provider whose rules apply to it, and a throttle a reply put on it (null: no provider's rules apply). */
  shaping: ShapingFigures | null;
}

/** Traffic shaping of an engine destination (a lane): its provider, and the throttle in force. */
export interface ShapingFigures {
  provider: string;
  throttle: {
    /** The reply rule of the provider (config/shaping.yaml or delivery.shaping_file). */
    rule: string;
    action: 'slow' | 'suspend';
    /** The reply that started it, or held it longer last. */
    reply: string;
    since: string;
    /** Slowed, or suspended, until then… */
    until: string;
    /** …then back to its own limits by then. */
    ramp_until: string;
  } | null;
}

/**
 * Where a queued message stands: `due` (its time has come: being delivered, waiting for a
 * connection, or waiting for the daemon to run), `deferred` (attempted, waiting for its next
 * attempt), `scheduled` (never attempted, held until the first_attempt its sender asked for),
 * `held` (its account is suspended or deleted: kept, not sent, until the account is active).
 */
export const QUEUE_STATES = ['due', 'deferred', 'scheduled', 'held'] as const;
export type QueueState = (typeof QUEUE_STATES)[number];

export interface QueueTotals {
  queued: number;
  due: number;
  deferred: number;
  scheduled: number;
  held: number;
}

export interface DestinationFigures extends QueueTotals {
  /** The recipient domain. */
  destination: string;
  oldest_created_at: string;
  /** The earliest due time of its messages (in the past when some are due). */
  next_attempt_at: string;
}

/** The scheduler's in-memory figures: only a running daemon with delivery on has them. */
export interface SchedulerFigures {
  running: number;
  ready: number;
  next_wake_at: string | null;
  limits: { concurrency: number; per_destination: number; ready_limit: number };
  destinations: Array<{ destination: string; ready: number; running: number }>;
}

export interface QueueStatus {
  generated_at: string;
  /** null: no daemon runs, the figures were read from the store. */
  daemon: { delivery_enabled: boolean; scheduler: SchedulerFigures | null; engine: EngineFigures[] } | null;
  totals: QueueTotals;
  /** Queued mail by recipient domain, most queued first. */
  destinations: DestinationFigures[];
  /** HTTP jobs by kind and URL origin, most first. */
  jobs: JobFigures[];
  /** Destinations the operator suspended, with when. */
  suspended: Array<{ destination: string; since: string }>;
}

export interface QueuedMessage {
  id: string;
  account_id: string;
  sender: string;
  recipient: string;
  destination: string;
  /** The message status (Received or Deferred). */
  status: string;
  state: QueueState;
  attempts: number;
  created_at: string;
  next_attempt_at: string;
  /**
   * The last attempt's log line: why it waits; `tls`: its session's TLS and policy ("TLSv1.3
   * mta-sts enforce verified"); `source`: the delivery source it went out from.
   */
  last_attempt: { time: string; status: string; log: string; tls?: string | undefined; source?: string | undefined } | null;
}

export interface ListQuery {
  /** Recipient domain. */
  domain?: string | undefined;
  account?: string | undefined;
  state?: string | undefined;
  limit?: number | undefined;
}

export interface QueueList {
  generated_at: string;
  /** In due order, at most `limit`. */
  messages: QueuedMessage[];
  /** How many more matched past the limit. */
  more: number;
}

/**
 * Which messages retry or purge acts on: named ids, or every queued message of a recipient
 * domain and/or account, or all. Exactly one of the three kinds; an empty selection is refused,
 * never read as "all".
 */
export interface Selection {
  ids?: string[] | undefined;
  domain?: string | undefined;
  account?: string | undefined;
  all?: boolean | undefined;
}

/** A named message that was not acted on because it is no longer queued. */
export interface NotQueued {
  id: string;
  status: string;
}

export interface RetryResult {
  /** Messages made due now. */
  retried: number;
  ids: string[];
  /** Already due: being delivered, or waiting for a connection or for the daemon. */
  already_due: number;
  /** Selected by domain/account/all but scheduled by their sender: they keep their time. */
  kept_scheduled: number;
  /** Held for an account that is not active: they go when it is active again. */
  held: number;
  not_queued: NotQueued[];
}

export interface PurgeResult {
  purged: number;
  ids: string[];
  /** Held by the scheduler (ready or in flight) at the time: left to their attempt's outcome. */
  in_delivery: number;
  not_queued: NotQueued[];
}

/** A step of `postilion queue drain` (cluster mode): after each batch of messages the other node took. */
export interface DrainProgress {
  /** This node. */
  from: string;
  to: string;
  /** Messages handed over so far. */
  moved: number;
  /** Of those, in the last batch (0: the drain has begun). */
  batch: number;
}

export interface DrainResult {
  from: string;
  to: string;
  /** Messages handed over: the other node holds them, this one no more. */
  moved: number;
  /** Still here at the end because the delivery engine held them (the in-flight window): their attempt decides; drain again for those deferred. */
  in_delivery: number;
}

/**
 * The drain's answer on the control socket: one JSON object per line, progress lines and then a
 * result, or an error once lines have been sent (before that, an error is the HTTP answer).
 */
export type DrainLine = { progress: DrainProgress } | { result: DrainResult } | { error: { status: number; message: string } };

/** The daemon's control socket: in the data directory, which only the daemon's user can write. */
export function controlSocketPath(config: Config): string {
  return controlSocketIn(config.data.dir);
}

/** The control socket of the daemon whose data directory is `dataDir`. */
export function controlSocketIn(dataDir: string): string {
  return join(resolve(dataDir), 'control.sock');
}

/**
 * The path of an admin operation on the control socket: `POST /v1/admin/<operation>` with its
 * argument. Here, not beside the operations' argument schemas, so that the CLI's client loads
 * no validation library.
 */
export const adminPath = (operation: AdminOperation) => `/v1/admin/${operation}`;

/** An attempt's log line with the source it went out from and its TLS, as the queue view and a message's trace print it. */
export function attemptText(a: { log: string; source?: string | undefined; tls?: string | undefined }): string {
  return `${a.log}${a.source ? ` [source: ${a.source}]` : ''}${a.tls ? ` [TLS: ${a.tls}]` : ''}`;
}
