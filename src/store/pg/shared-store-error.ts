import pg from 'pg';

/**
 * The shared database did not take a write or answer a read (it is down or unreachable): nothing
 * of the commit was written. Ingress answers 503 (HTTP) or 451 4.3.0 (SMTP): try again later.
 */
export class SharedStoreError extends Error {
  override name = 'SharedStoreError';
  constructor(cause: unknown) {
    super(`the cluster database could not be reached: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

/**
 * SQLSTATE classes of a database that is away or cannot serve for now, as opposed to a statement
 * it refused (a bug, kept as it is): connection exceptions (08), transaction rollbacks such as
 * serialization failures (40), insufficient resources (53), operator intervention: shutdown,
 * restart, cancel (57), system errors (58).
 */
const AWAY_CLASSES = new Set(['08', '40', '53', '57', '58']);
/** A read-only transaction: a standby that has not been promoted yet (during a failover). */
const READ_ONLY = '25006';

/**
 * Whether an error of node-postgres says the database could not be reached or could not serve:
 * one of the SQLSTATEs above, a socket error, or a connection lost, timed out or never made, or
 * a pool ended (the node stopping). Anything else (a statement refused, an error of ours) is not.
 */
export function isUnreachable(err: unknown): boolean {
  if (err instanceof SharedStoreError) return true;
  if (err instanceof pg.DatabaseError) return err.code !== undefined && (AWAY_CLASSES.has(err.code.slice(0, 2)) || err.code === READ_ONLY);
  if (!(err instanceof Error)) return false;
  // Node's socket errors: ECONNREFUSED, ECONNRESET, ETIMEDOUT, EPIPE, EHOSTUNREACH, ENOTFOUND…
  if (typeof (err as NodeJS.ErrnoException).syscall === 'string') return true;
  return CONNECTION_LOST.test(err.message);
}

/** node-postgres's words for a connection lost, timed out or refused use, and for an ended pool. */
const CONNECTION_LOST =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|not queryable|Cannot use a pool after calling end/i;

/** Runs a call to the shared database; its failure to reach it becomes a SharedStoreError. */
export async function reaching<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof SharedStoreError || !isUnreachable(err)) throw err;
    throw new SharedStoreError(err);
  }
}
