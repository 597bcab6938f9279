/**
 * The store's vocabulary: its families and the ops a batch is made of. A leaf (it imports
 * nothing), so that the store, its committer and the counters import it without a circle.
 */

/** The families of records, one sublevel each. Only store/ knows their keys. */
export const FAMILIES = [
  'meta',
  'accounts',
  'accountsByParent',
  'users',
  'usersByEmail',
  'members',
  'apiKeys',
  'apiKeysByHash',
  'idempotency',
  'idempotencyByExpiry',
  'domains',
  'domainsByName',
  'domainsByAccount',
  'events',
  // Written by earlier releases (an index nothing read); emptied by the events' purge.
  'eventsByAccount',
  'messages',
  'messageIndex',
  'messageExpiry',
  'bodies',
  'bodyRefs',
  'schedule',
  'messagesHeld',
  'suppressions',
  'suppressionIndex',
  'smtpCredentials',
  'smtpCredentialsByAccount',
  'smtpCredentialsByUsername',
  'smtpCredentialsByDomain',
  'webhooks',
  'webhooksByAccount',
  'webhookCounters',
  'routes',
  'routesByAccount',
  'routeCounters',
  'inbound',
  'jobs',
  'jobsHeld',
  'jobsParked',
  'jobsFailed',
  'counters',
  'counterLog',
  'links',
  'messageHits',
  // TLS reporting (RFC 8460): each node's counts of the sessions it made, by day and policy.
  'tlsReports',
  // MTA-STS policies of recipient domains, as fetched (each node fetches and keeps its own).
  'mtaStsPolicies',
  // Web dashboard sessions and the operator's one-time sign-in links, by the SHA-256 of their tokens.
  'dashboardSessions',
] as const;
export type Family = (typeof FAMILIES)[number];

/**
 * Cluster mode (DESIGN.md §10): the families every node shares, kept in PostgreSQL. The others
 * (the spool, the job engine, the events outbox, the counters, cursors) stay in each node's
 * LevelDB.
 */
export const SHARED_FAMILIES: ReadonlySet<Family> = new Set<Family>([
  'accounts',
  'accountsByParent',
  'users',
  'usersByEmail',
  'members',
  'apiKeys',
  'apiKeysByHash',
  'idempotency',
  'idempotencyByExpiry',
  'domains',
  'domainsByName',
  'domainsByAccount',
  'suppressions',
  'suppressionIndex',
  'smtpCredentials',
  'smtpCredentialsByAccount',
  'smtpCredentialsByUsername',
  'smtpCredentialsByDomain',
  'webhooks',
  'webhooksByAccount',
  'routes',
  'routesByAccount',
  'dashboardSessions',
]);

/** A tree of counts: numbers, or named counts nested (see store/counter-cache.ts). */
export interface Counts {
  [name: string]: number | Counts;
}

export type WriteOp =
  /**
   * `latest`: the value is the whole current state of the key (a counter row written at each
   * change), so a later put of the same key in the same batch supersedes it and only that one
   * is written.
   *
   * `keyAtCommit`: the key is made when the batch is handed to the committer (Store.commit), so
   * that keys made this way sort in the order their batches land, whenever the op was built.
   *
   * `expected`: the put lands only if the key holds this value now (null: the key is absent),
   * else the whole commit fails with WriteConflictError. Needed where two writers could race: in
   * cluster mode two nodes (PostgreSQL checks it under a row lock); one node's LevelDB has one
   * writer, whose callers serialize under their own locks, and does not check it.
   */
  | { type: 'put'; family: Family; key: string; value: unknown; latest?: true; keyAtCommit?: () => string; expected?: unknown }
  | { type: 'del'; family: Family; key: string }
  /**
   * Adds `value` to the counts stored under `key` (absent: zero): logged in its batch, and added
   * to the row when the counters' log is folded (store/counter-log.ts), so that concurrent
   * writers never lose an increment.
   */
  | { type: 'add'; family: 'counters'; key: string; value: Counts }
  /**
   * A counted event: `key` names what it is attributed to (its account, hour, dimensions), and
   * it becomes the adds of every counter row it belongs to (store/counter-keys.ts `expandCount`)
   * when the counters' log is folded (store/counter-log.ts): one small entry per event on the
   * hot path. Only a store opened with the counters (store/counters-repo.ts) takes `add` and
   * `count` ops.
   */
  | { type: 'count'; family: 'counters'; key: string; value: Counts };
