/** `--json`: the value as the daemon answered it, indented. */
export const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** One resource for a human: `field: value` per line; lists joined with commas, null and empty as -. */
export function fields(record: Record<string, unknown>): string {
  const width = Math.max(...Object.keys(record).map((k) => k.length));
  return Object.entries(record)
    .filter(([key]) => key !== 'object')
    .map(([key, value]) => `${`${key}:`.padEnd(width + 2)}${shown(value)}\n`)
    .join('');
}

function shown(value: unknown): string {
  if (value === null || value === undefined || value === '') return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.map(shown).join(',');
  if (typeof value === 'object') return JSON.stringify(value);
  const primitive = value as string | number | boolean | bigint;
  return String(primitive);
}
