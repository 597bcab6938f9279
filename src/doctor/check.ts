/**
 * One finding of `postilion doctor`: what was checked, how it stands and why. The statuses are a
 * closed set: OK (nothing to do), WARN (worth a look, mail still flows), FAIL (something the
 * operator must fix: mail, a listener or the daemon's start will not work).
 */
export const STATUSES = ['OK', 'WARN', 'FAIL'] as const;
export type Status = (typeof STATUSES)[number];

export interface Check {
  /** What was checked, e.g. "listener api", "dns example.com dmarc", "ptr 192.0.2.10". */
  check: string;
  status: Status;
  /** Why it stands so, in a sentence an operator can act on. */
  reason: string;
}

export const ok = (check: string, reason: string): Check => ({ check, status: 'OK', reason });
export const warn = (check: string, reason: string): Check => ({ check, status: 'WARN', reason });
export const fail = (check: string, reason: string): Check => ({ check, status: 'FAIL', reason });

/** The worst status among the checks (OK for none). */
export function worst(checks: readonly Check[]): Status {
  let rank = 0;
  for (const c of checks) rank = Math.max(rank, STATUSES.indexOf(c.status));
  return STATUSES[rank]!;
}

/** Exit status of the command: 1 when any check failed; warnings do not fail it. */
export function exitCodeOf(checks: readonly Check[]): number {
  return worst(checks) === 'FAIL' ? 1 : 0;
}

/** Days between two instants, rounded down (negative when `to` is past). */
export function daysBetween(from: number, to: number): number {
  return Math.floor((to - from) / 86_400_000);
}

/** "1 day", "5 days". */
export function days(n: number): string {
  return `${n} ${Math.abs(n) === 1 ? 'day' : 'days'}`;
}

/** An errno-style code of a thrown error, or its message when it has none. */
export function codeOf(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' && code !== '' ? code : ((err as Error)?.message ?? String(err));
}
