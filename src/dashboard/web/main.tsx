// The dashboard's shell: who is signed in, the navigation, and the screen at the hash route.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { currentSession, signIn, signInOperator, signOut, whenSignedOut, type SessionInfo } from './api.ts';
import { match, ROUTES } from './routes.ts';
import { ErrorBox, messageOf, Page } from './ui.tsx';
import './styles.css';

/** The hash route without its query (`#/messages?status=Bounced` → `/messages`). */
function currentPath(): string {
  if (!location.hash.startsWith('#/')) return '/';
  const route = location.hash.slice(1);
  const at = route.indexOf('?');
  return at < 0 ? route : route.slice(0, at);
}

function App() {
  const [session, setSession] = useState<SessionInfo | null | undefined>(undefined);
  const [path, setPath] = useState(currentPath());
  // The whole hash: a screen reads its query from it (a search), so a change of query redraws it.
  const [, setHash] = useState(location.hash);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    const onHash = () => {
      setPath(currentPath());
      setHash(location.hash);
    };
    window.addEventListener('hashchange', onHash);
    whenSignedOut(() => {
      setError('Your session has ended (expired, signed out elsewhere, or its key changed). Sign in again.');
      setSession(null);
    });
    // The operator's one-time link: #operator-login=<token>. Taken off the address at once.
    const login = /^#operator-login=([A-Za-z0-9_-]{16,128})$/.exec(location.hash);
    if (login) {
      history.replaceState(null, '', `${location.pathname}#/`);
      signInOperator(login[1]!).then(
        (s) => {
          setSession(s);
          setPath('/');
        },
        (err: unknown) => {
          setError(`The sign-in link did not work: ${messageOf(err)}. Ask for a new one with \`postilion ui login\`.`);
          setSession(null);
        },
      );
    } else {
      currentSession().then(setSession, (err: unknown) => {
        setError(messageOf(err));
        setSession(null);
      });
    }
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  // Focus the new page's heading after a navigation (not after a search on the same page), for
  // keyboard and screen-reader users.
  useEffect(() => {
    document.getElementById('page-title')?.focus();
  }, [path, session?.kind]);

  if (session === undefined) return <p class="muted">Loading…</p>;
  if (session === null) return <SignIn error={error} onSignedIn={setSession} />;

  const found = match(path, session.kind);
  const home = session.kind === 'operator' ? '/operator/queue' : '/messages';
  if (!found && (path === '/' || path === '')) {
    location.replace(`#${home}`);
    return null;
  }
  const nav = ROUTES.filter((r) => r.for === session.kind && r.nav).sort((a, b) => a.nav!.order - b.nav!.order);
  return (
    <>
      <a
        class="skip"
        href="#main"
        onClick={(e) => {
          // The hash is the route: focus the content instead of following the link.
          e.preventDefault();
          document.getElementById('page-title')?.focus();
        }}
      >
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={`#${home}`}>
          Postilion
        </a>
        <span class="who">
          <span class="visually-hidden">Signed in as </span>
          {session.kind === 'operator' ? 'Operator' : (session.account_name ?? session.account_id)}
        </span>
        <button
          type="button"
          class="secondary"
          onClick={() => {
            setError(null);
            void signOut()
              .catch(() => undefined) // Signed out here either way; the server forgets the session when it expires.
              .finally(() => setSession(null));
          }}
        >
          Sign out
        </button>
      </header>
      <div class="layout">
        <nav aria-label="Main">
          <ul>
            {nav.map((r) => {
              const current = path === r.path || path.startsWith(`${r.path}/`);
              return (
                <li key={r.path}>
                  <a href={`#${r.path}`} aria-current={current ? 'page' : undefined}>
                    {r.nav!.label}
                  </a>
                </li>
              );
            })}
          </ul>
        </nav>
        <main id="main">
          {found ? (
            found.route.render(found.params, session)
          ) : (
            <Page title="Not found">
              <p>There is no such page.</p>
            </Page>
          )}
        </main>
      </div>
    </>
  );
}

function SignIn(props: { error: string | null; onSignedIn: (s: SessionInfo) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(props.error);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const apiKey = key.trim();
    if (apiKey.length > 512) {
      setError('That is not an API key (too long).');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const session = await signIn(apiKey);
      setKey('');
      props.onSignedIn(session);
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="signin">
      <h1 id="page-title" tabIndex={-1}>
        Sign in
      </h1>
      <p>Sign in with an API key of your account. The dashboard can do what the key can do, nothing more; the key is not kept in the browser.</p>
      <form onSubmit={(e) => void submit(e)}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api_key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          maxLength={512}
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      <ErrorBox error={error} />
      <p class="muted">The operator signs in with the link that `postilion ui login` prints.</p>
    </main>
  );
}

render(<App />, document.getElementById('app')!);
