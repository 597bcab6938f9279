// Small shared pieces every screen uses: loading a resource, showing an error, a page frame,
// dates. Screens stay plain functions of what they load.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, type SessionInfo } from './api.ts';

export interface Loaded<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
  /** Loads again (after a change the screen made). */
  reload: () => void;
}

/** Runs `load` when the screen opens and whenever one of `deps` changes. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: string | null; loading: boolean }>({ data: null, error: null, loading: true });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true, error: null }));
    load().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (err: unknown) => live && setState({ data: null, error: messageOf(err), loading: false }),
    );
    return () => {
      live = false;
    };
  }, [...deps, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, reload };
}

export function messageOf(err: unknown): string {
  if (err instanceof ApiError) return err.status === 403 ? `Not allowed: ${err.message}` : err.message;
  return err instanceof Error ? err.message : String(err);
}

/** A page: its heading (the one h1) and its content. */
export function Page(props: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · Postilion`;
  }, [props.title]);
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-head">
        <h1 id="page-title" tabIndex={-1}>
          {props.title}
        </h1>
        {props.actions ? <div class="actions">{props.actions}</div> : null}
      </header>
      {props.children}
    </section>
  );
}

export function ErrorBox(props: { error: string | null }) {
  if (!props.error) return null;
  return (
    <p class="error" role="alert">
      {props.error}
    </p>
  );
}

/** Loading, error, or the content made from the data. */
export function Show<T>(props: { loaded: Loaded<T>; children: (data: T) => ComponentChildren }) {
  const { loaded } = props;
  if (loaded.error) return <ErrorBox error={loaded.error} />;
  if (loaded.loading && loaded.data === null)
    return (
      <p class="muted" aria-busy="true">
        Loading…
      </p>
    );
  if (loaded.data === null) return null;
  return <>{props.children(loaded.data)}</>;
}

/** A timestamp as the person's local date and time, the exact value on hover. */
export function When(props: { at: string | null | undefined }) {
  if (!props.at) return <span class="muted">—</span>;
  const date = new Date(props.at);
  if (Number.isNaN(date.getTime())) return <span>{props.at}</span>;
  return (
    <time dateTime={props.at} title={props.at}>
      {date.toLocaleString()}
    </time>
  );
}

/** A status as a coloured badge with its word (colour is never the only sign). */
export function Badge(props: { value: string; tone?: 'good' | 'bad' | 'warn' | 'neutral' }) {
  return <span class={`badge ${props.tone ?? toneOf(props.value)}`}>{props.value}</span>;
}

const GOOD = /^(delivered|sent|active|enabled|ok|propagated|verified|valid|true|succeeded|success)$/i;
const BAD = /^(bounced|failed|rejected|suspended|disabled|missing|wrong|invalid|complained|dropped|error|false|deleted)$/i;
const WARN = /^(deferred|scheduled|held|pending|queued|received|due|retrying|standby|unverified)$/i;

export function toneOf(value: string): 'good' | 'bad' | 'warn' | 'neutral' {
  if (GOOD.test(value)) return 'good';
  if (BAD.test(value)) return 'bad';
  if (WARN.test(value)) return 'warn';
  return 'neutral';
}

/**
 * A table that may be wider than a phone: it scrolls sideways, and the scrolling area takes
 * focus so the keyboard can scroll it too.
 */
export function TableWrap(props: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={props.label}>
      {props.children}
    </div>
  );
}

/** A value to copy (a DNS record, a secret shown once): selectable text and a Copy button. */
export function Copyable(props: { value: string; label: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setCopied(true);
      setTimeout(() => setCopied(false), 1500);
    } catch {
      // No clipboard (plain HTTP on another host): the text is selectable.
    }
  };
  return (
    <span class="copyable">
      <code>{props.value}</code>
      <button type="button" class="small" onClick={() => void copy()} aria-label={`Copy ${props.label}`}>
        Copy
      </button>
      {/* Said, not shown on the button: its name stays what it reads (WCAG 2.5.3). */}
      <span class="muted" role="status">
        {copied ? 'Copied' : ''}
      </span>
    </span>
  );
}

/** Navigates to a hash route (`#/messages/…`), with an optional query (`#/messages?status=Bounced`). */
export function go(path: string, query?: Record<string, string | null | undefined>): void {
  location.hash = `#${path}${queryText(query)}`;
}

/** A hash route's href with its query, empty values left out. */
export function href(path: string, query?: Record<string, string | null | undefined>): string {
  return `#${path}${queryText(query)}`;
}

function queryText(query?: Record<string, string | null | undefined>): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value) params.set(name, value);
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** The query part of the current hash route (`#/messages?recipient=…`), so a search survives back and reload. */
export function hashQuery(): URLSearchParams {
  const at = location.hash.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : location.hash.slice(at + 1));
}

/**
 * Whether the session's key holds a scope for this: a static scope (`domains:write`), or a
 * domain family (`messages:cancel`) as `:all` or for `domain`. The server decides; this only
 * keeps buttons away that could not work.
 */
export function mayDo(session: SessionInfo, scope: string, domain?: string): boolean {
  const scopes = session.scopes;
  if (scopes.includes('*') || scopes.includes(scope) || scopes.includes(`${scope}:all`)) return true;
  return domain !== undefined && scopes.includes(`${scope}:{${domain.toLowerCase()}}`);
}

/** A button's action: busy while it runs, its error for an ErrorBox. */
export function useAction(): { busy: boolean; error: string | null; run: (action: () => Promise<void>) => Promise<boolean>; clear: () => void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async (action: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
      return true;
    } catch (err) {
      setError(messageOf(err));
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  const clear = useCallback(() => setError(null), []);
  return { busy, error, run, clear };
}
