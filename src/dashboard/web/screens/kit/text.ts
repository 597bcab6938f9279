// Turning what a person typed into what the API takes.

/** The non-empty lines (or comma-separated items) of a text field, trimmed, each once. */
export function items(text: string): string[] {
  return [
    ...new Set(
      text
        .split(/[\n,]/)
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
}

/** A datetime-local value (the person's local time) as RFC 3339; null when empty or not a time. */
export function localToIso(value: string): string | null {
  if (!value) return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

/** A path segment, encoded. */
export const seg = (value: string) => encodeURIComponent(value);

/** "a.com, b.com\nc.com" → the names, trimmed, lower-cased, each once. */
export function domainList(text: string): string[] {
  return [
    ...new Set(
      text
        .split(/[\s,]+/)
        .map((s) => s.trim().toLowerCase())
        .filter((s) => s.length > 0),
    ),
  ];
}
