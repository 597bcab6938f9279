/**
 * The messages between the daemon and its tracking listener thread (tracking/listener-thread.ts
 * and tracking/listener-worker.ts). The thread answers the requests; the daemon looks up what it
 * cannot know (domains, messages, links: the store is the daemon's alone) and records the hits.
 */

/** What the thread starts with (its workerData): where it listens, which it does at once (the bind phase). */
export interface ThreadStart {
  host: string;
  port: number;
  tls: { cert: Buffer; key: Buffer } | null;
}

/** What it answers with, sent once the store is open ('serve'); requests wait for it. */
export interface ThreadServe {
  /** The tracking tokens' key (keys/tracking.key), raw. */
  tokenKey: Buffer;
  /** api.trusted_proxies, as written in the configuration. */
  trustedProxies: string[];
  /** The MTA-STS policy files served, by host (`mta-sts.<domain>`): mta_sts_policy. */
  mtaStsPolicies: Record<string, string>;
}

/** An open or click the thread answered, for the daemon to record. */
export interface ThreadHit {
  id: string;
  kind: 'open' | 'click';
  ip: string;
  userAgent: string;
  url?: string;
}

/** Requests answered by the thread, by kind and status, since it last said (metrics). */
export type RequestCounts = Array<{ kind: 'open' | 'click' | 'other'; status: number; count: number }>;

/** Told what the listener answered and handed over (metrics); must not throw. */
export interface TrackingObserver {
  requests(kind: 'open' | 'click' | 'other', status: number, count: number): void;
  hits(kind: 'open' | 'click', count: number): void;
}

/** What a message is, as far as a request needs to know: none of it changes once it is accepted. */
export interface MessageFacts {
  domainId: string;
  open: boolean;
  click: boolean;
}

export type Lookup = { kind: 'host'; host: string } | { kind: 'message'; id: string } | { kind: 'links'; id: string };

/** Thread → daemon. */
export type FromThread =
  | { type: 'listening'; url: string }
  | { type: 'failed'; message: string; code?: string }
  | { type: 'lookup'; seq: number; lookup: Lookup }
  | { type: 'hits'; hits: ThreadHit[] }
  | { type: 'synced'; seq: number; counts: RequestCounts }
  | { type: 'log'; level: 'info' | 'error'; fields: Record<string, unknown>; message: string }
  | { type: 'closed' };

/** Daemon → thread. */
export type ToThread =
  | ({ type: 'serve' } & ThreadServe)
  | { type: 'answer'; seq: number; value: unknown; error?: string }
  | { type: 'landed'; count: number }
  | { type: 'sync'; seq: number }
  | { type: 'settings'; trustedProxies: string[]; mtaStsPolicies: Record<string, string> }
  | { type: 'close'; graceMs: number };
