/** Control characters (C0, DEL, C1) and bidirectional overrides have no place in names and labels. */
const UNPRINTABLE = /[\p{Cc}\u202A-\u202E\u2066-\u2069]/u;

export function isPrintable(text: string): boolean {
  return !UNPRINTABLE.test(text);
}

/** At most `max` UTF-16 units of `text`, never cutting a surrogate pair in two. */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}
