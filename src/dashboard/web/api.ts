// The dashboard's one way to the daemon: same-origin fetches with the session cookie (HttpOnly,
// never seen here) and the session's CSRF token in a header. The API key is sent once, to sign
// in, and never kept.

/** What GET /ui/session answers (and the sign-ins). */
export interface SessionInfo {
  kind: 'account' | 'operator';
  /** null for the operator. */
  account_id: string | null;
  account_name: string | null;
  key_id: string | null;
  /** The key's scopes (empty for the operator). */
  scopes: string[];
  expires_at: string;
  csrf_token: string;
}

/** A refused or failed request: the status and the server's message, for the person to read. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

let csrf: string | null = null;

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (csrf) headers['x-csrf-token'] = csrf;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  } catch {
    throw new ApiError(0, 'The server did not answer. Is the daemon running?');
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: the status line says enough.
  }
  if (!res.ok) {
    const message = (json as { message?: unknown } | null)?.message;
    // A refused sign-in is not a session that ended.
    if (res.status === 401 && !path.startsWith('/ui/session')) onSignedOut?.();
    throw new ApiError(res.status, typeof message === 'string' ? message : `${res.status} ${res.statusText}`);
  }
  return json as T;
}

let onSignedOut: (() => void) | null = null;

/** Called when a request finds the session gone (expired, revoked, its key deleted). */
export function whenSignedOut(callback: () => void): void {
  onSignedOut = callback;
}

export async function currentSession(): Promise<SessionInfo | null> {
  try {
    const session = await call<SessionInfo>('GET', '/ui/session');
    csrf = session.csrf_token;
    return session;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return null;
    throw err;
  }
}

export async function signIn(apiKey: string): Promise<SessionInfo> {
  const session = await call<SessionInfo>('POST', '/ui/session', { api_key: apiKey });
  csrf = session.csrf_token;
  return session;
}

export async function signInOperator(token: string): Promise<SessionInfo> {
  const session = await call<SessionInfo>('POST', '/ui/session/operator', { token });
  csrf = session.csrf_token;
  return session;
}

export async function signOut(): Promise<void> {
  try {
    await call<void>('DELETE', '/ui/session');
  } finally {
    csrf = null;
  }
}

type Query = Record<string, string | number | boolean | undefined | null | Array<string | number>>;

function withQuery(path: string, query?: Query): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === '') continue;
    if (Array.isArray(value)) for (const v of value) params.append(name, String(v));
    else params.append(name, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/**
 * The v2 API as the signed-in key may call it: `v2.get('/accounts/<id>/messages', {...})` is
 * GET /v2/accounts/<id>/messages with the key's rights, nothing more.
 */
export const v2 = {
  get: <T>(path: string, query?: Query) => call<T>('GET', withQuery(`/ui/api/v2${path}`, query)),
  post: <T>(path: string, body?: unknown) => call<T>('POST', `/ui/api/v2${path}`, body ?? {}),
  put: <T>(path: string, body: unknown) => call<T>('PUT', `/ui/api/v2${path}`, body),
  delete: <T>(path: string, body?: unknown, query?: Query) => call<T>('DELETE', withQuery(`/ui/api/v2${path}`, query), body),
};

/** What the dashboard reads beyond the API (message activity, webhook deliveries, test events): same rules. */
export const extra = {
  get: <T>(path: string, query?: Query) => call<T>('GET', withQuery(`/ui/api/dashboard${path}`, query)),
  post: <T>(path: string, body?: unknown) => call<T>('POST', `/ui/api/dashboard${path}`, body ?? {}),
};

/** The operator's operations (an operator session only). */
export const operator = {
  get: <T>(path: string, query?: Query) => call<T>('GET', withQuery(`/ui/api/operator${path}`, query)),
  post: <T>(path: string, body?: unknown) => call<T>('POST', `/ui/api/operator${path}`, body ?? {}),
};
