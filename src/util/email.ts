/**
 * A mailbox address as Postilion accepts it from operators and API clients: a local part and a
 * domain without spaces, at most 254 characters. Dotless domains (postmaster@localhost) pass.
 */
export function isEmailAddress(text: string): boolean {
  return text.length <= 254 && /^[^\s@]+@[^\s@]+$/.test(text);
}
