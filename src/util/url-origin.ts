import { Lru } from './lru.ts';

/** Origins of the URLs seen last (every delivery to a target asks for the same URL's origin). */
const known = new Lru<string, string | null>(1000);

/** The URL's origin (scheme, host, port), or null when it is not a URL; kept per URL. */
export function urlOrigin(url: string): string | null {
  let origin = known.get(url);
  if (origin === undefined) {
    try {
      origin = new URL(url).origin;
    } catch {
      origin = null;
    }
    known.set(url, origin);
  }
  return origin;
}
