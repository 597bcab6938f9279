/** Control characters (C0, DEL, C1) and bidirectional overrides have no place in names and labels. */
const UNPRINTABLE = /[\p{Cc}\u202A-\u202E\u2066-\u2069]/u;

export function isPrintable(text: string): boolean {
  return !UNPRINTABLE.test(text);
}
