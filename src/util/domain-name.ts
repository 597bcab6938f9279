/** Domain names everywhere (bodies, paths, scopes) are lower-cased, trimmed and lose a trailing dot. */
export function normalizeDomain(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, '');
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** One DNS label: lower-case letters, digits and hyphens, not at either end, at most 63. */
export function isLabel(text: string): boolean {
  return LABEL.test(text);
}

/** A fully qualified name: at least two labels, LDH rules, alphabetic-ish TLD, ≤ 253 chars. */
export function isValidDomain(name: string): boolean {
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  if (labels.length < 2) return false;
  if (!labels.every(isLabel)) return false;
  return !/^[0-9]+$/.test(labels[labels.length - 1]!);
}
