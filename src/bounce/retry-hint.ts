/**
 * A wait an SMTP reply asks for ("4.7.0 try again in 5 minutes"): part of reading replies, so
 * the delivery dispatcher and the retry policy both use it.
 */
const HINT = /(?:try|retry|come back)(?: again)?(?: in| after)? (\d{1,5}) ?(s|sec|second|m|min|minute|h|hour)s?\b/i;
const UNIT_MS: Record<string, number> = { s: 1000, sec: 1000, second: 1000, m: 60_000, min: 60_000, minute: 60_000, h: 3_600_000, hour: 3_600_000 };

/** The wait a reply asks for ("4.7.0 try again in 5 minutes"), capped at a day; undefined if none. */
export function retryHintMs(text: string): number | undefined {
  const m = HINT.exec(text);
  if (!m) return undefined;
  return Math.min(Number(m[1]) * UNIT_MS[m[2]!.toLowerCase()]!, 24 * 3_600_000);
}
