import type { ApiContext } from '../api/context.ts';
import { forbidden } from '../util/errors.ts';

/** No inline script or style, nothing from elsewhere, never framed. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  // JSON answers and errors are never kept; the built files say otherwise when served.
  'Cache-Control': 'no-store',
};

/** The headers of every /ui response, set before anything can fail (an error answer keeps them). */
export function setSecurityHeaders(ctx: ApiContext): void {
  ctx.set(HEADERS);
}

/**
 * The same headers for the answers the API's listener writes before the app sees a request
 * (api/server.ts: headers too large, a malformed request line): on /ui paths only.
 */
export function rawAnswerHeaders(path: string | null): Record<string, string> {
  if (path === null) return {};
  const lower = path.toLowerCase();
  return lower === '/ui' || lower.startsWith('/ui/') ? { ...HEADERS } : {};
}

/**
 * A state change from a browser must come from our own page: when the browser names the origin
 * (it does on every cross-origin request, and on same-origin ones but GET/HEAD), it must be this
 * request's own (scheme as the client spoke it, host as it asked for).
 */
export function checkOrigin(ctx: ApiContext): void {
  const origin = ctx.get('origin');
  if (!origin) return;
  const own = `${ctx.state.https ? 'https' : 'http'}://${ctx.get('host')}`.toLowerCase();
  if (origin.toLowerCase() !== own) throw forbidden('cross-origin request refused: the Origin is not this server');
}
