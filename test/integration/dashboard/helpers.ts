import type { TestServer } from '../../helpers/harness.ts';

export interface UiResult {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes, asserted by tests
  body: any;
  text: string;
}

export interface UiOptions {
  cookie?: string;
  csrf?: string;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
}

/** One request to the dashboard, as its page makes them: the cookie, the CSRF header, JSON. */
export async function ui(server: { url: string }, method: string, path: string, options: UiOptions = {}): Promise<UiResult> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.cookie) headers.cookie = `postilion_session=${options.cookie}`;
  if (options.csrf) headers['x-csrf-token'] = options.csrf;
  let body = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(server.url + path, { method, headers, redirect: 'manual', ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

export interface SignedIn {
  cookie: string;
  csrf: string;
  setCookie: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- SessionInfo, asserted by tests
  info: any;
}

/** The token of a Set-Cookie header of the session cookie. */
export function cookieOf(setCookie: string | null): string {
  const token = /^postilion_session=([^;]*)/.exec(setCookie ?? '')?.[1];
  if (token === undefined) throw new Error(`no session cookie in ${setCookie}`);
  return token;
}

/** Signs in with an API key; throws unless the dashboard answered 201. */
export async function signIn(server: TestServer | { url: string }, apiKey: string, headers: Record<string, string> = {}): Promise<SignedIn> {
  const res = await ui(server, 'POST', '/ui/session', { body: { api_key: apiKey }, headers });
  if (res.status !== 201) throw new Error(`sign-in answered ${res.status}: ${res.text}`);
  const setCookie = res.headers.get('set-cookie') ?? '';
  return { cookie: cookieOf(setCookie), csrf: res.body.csrf_token as string, setCookie, info: res.body };
}
