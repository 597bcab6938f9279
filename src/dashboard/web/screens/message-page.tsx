// One message: what getMessage says about it, and its activity (every event and attempt in
// order, opens and clicks, the webhook deliveries it caused) from the dashboard's own read.
// The activity is extra: when it cannot be read the page still shows the message.
import { useEffect, useRef, useState } from 'preact/hooks';
import { extra, v2, type SessionInfo } from '../api.ts';
import { TableWrap, Badge, Copyable, ErrorBox, Page, Show, useAction, useLoad, When, mayDo, type Loaded } from '../ui.tsx';
import type { MessageSummary } from './message-summary.ts';

interface Message extends MessageSummary {
  content_parsed?: { headers?: Record<string, string[]> };
}

interface Tls {
  policy?: string;
  mode?: string;
  version?: string | null;
  verified?: boolean;
}

/** One step of the message's life (the activity contract: at, kind, what, detail, and what else exists). */
interface TraceItem {
  at: string;
  kind: 'event' | 'attempt';
  what: string;
  detail: string | null;
  smtp_code?: number | null;
  enhanced_status_code?: string | null;
  response?: string | null;
  tls?: Tls | null;
  dkim_selector?: string | null;
  url?: string | null;
}

interface WebhookDelivery {
  webhook_id: string;
  event_type: string;
  status: string;
  attempts: number | null;
  response_status: number | null;
  response_ms: number | null;
  at: string | null;
}

interface Activity {
  trace: TraceItem[];
  webhook_deliveries: WebhookDelivery[];
  /** The selector of the key that signed the message's last attempt (null: never attempted, or not known). */
  dkim_selector?: string | null;
  schedule?: { first_attempt: string | null; expires: string | null } | null;
  /** Whether the API's cancel would take the message now (scheduled, not due, unattempted, Received). */
  cancellable?: boolean;
}

export function MessagePage(props: { id: string; session: SessionInfo }) {
  const account = props.session.account_id!;
  const path = `/accounts/${account}/messages/${encodeURIComponent(props.id)}`;
  const message = useLoad(() => v2.get<Message>(path), [path]);
  const activity = useLoad(() => extra.get<Activity>(`${path}/activity`), [path]);
  const title = message.data ? message.data.subject || '(no subject)' : 'Message';
  return (
    <Page title={title}>
      <p>
        <a href="#/messages">Back to messages</a>
      </p>
      <Show loaded={message}>
        {(m) => (
          <>
            <Cancel message={m} activity={activity.data} session={props.session} path={path} onDone={message.reload} />
            <Fields message={m} activity={activity.data} />
            <Events message={m} activity={activity} />
            <OpensAndClicks message={m} activity={activity.data} />
            <WebhookDeliveries activity={activity} />
          </>
        )}
      </Show>
    </Page>
  );
}

function Fields(props: { message: Message; activity: Activity | null }) {
  const m = props.message;
  const attempts = props.activity?.trace.filter((t) => t.kind === 'attempt') ?? [];
  const last = attempts.at(-1);
  const tls = [...attempts].reverse().find((t) => t.tls)?.tls;
  const reply = last ? replyOf(last) : (m.delivery_attempts.at(-1)?.log ?? null);
  return (
    <dl class="fields">
      <dt>Status</dt>
      <dd>
        <Badge value={m.status} />
        {m.bounce_classification ? <span class="muted"> {m.bounce_classification}</span> : null}
      </dd>
      <dt>From</dt>
      <dd>{m.sender}</dd>
      <dt>To</dt>
      <dd>{m.recipient}</dd>
      <dt>Message ID</dt>
      <dd>
        <Copyable value={m.message_id} label="Message ID" />
      </dd>
      <dt>Created</dt>
      <dd>
        <When at={m.created_at} />
      </dd>
      {props.activity?.schedule?.first_attempt ? (
        <>
          <dt>Scheduled for</dt>
          <dd>
            <When at={props.activity.schedule.first_attempt} />
          </dd>
        </>
      ) : null}
      <dt>Sent</dt>
      <dd>
        <When at={m.sent_at} />
      </dd>
      <dt>Delivered</dt>
      <dd>
        <When at={m.delivered_at} />
      </dd>
      <dt>Attempts</dt>
      <dd>{m.num_attempts}</dd>
      <dt>DKIM selector</dt>
      <dd>{orDash(dkimSelector(m, props.activity))}</dd>
      <dt>TLS</dt>
      <dd>{tls ? describeTls(tls) : <span class="muted">—</span>}</dd>
      <dt>Remote reply</dt>
      <dd>{reply ? <pre class="reply">{reply}</pre> : <span class="muted">—</span>}</dd>
      <dt>Tags</dt>
      <dd>{m.tags.length ? m.tags.join(', ') : <span class="muted">—</span>}</dd>
      <dt>Direction</dt>
      <dd>{m.direction}</dd>
      <dt>Kept until</dt>
      <dd>
        <When at={m.retain_until} />
      </dd>
    </dl>
  );
}

function orDash(value: string | null | undefined) {
  return value ? <code>{value}</code> : <span class="muted">—</span>;
}

/** The selector: as the activity reports it, else the `s=` of a DKIM-Signature in the stored headers. */
function dkimSelector(m: Message, activity: Activity | null): string | null {
  if (activity?.dkim_selector) return activity.dkim_selector;
  const fromTrace = activity?.trace.find((t) => t.dkim_selector)?.dkim_selector;
  if (fromTrace) return fromTrace;
  const headers = m.content_parsed?.headers ?? {};
  for (const [name, values] of Object.entries(headers)) {
    if (name.toLowerCase() !== 'dkim-signature') continue;
    const selector = /(?:^|;)\s*s=([^;\s]+)/.exec(values[0] ?? '');
    if (selector) return selector[1]!;
  }
  return null;
}

function describeTls(tls: Tls): string {
  const version = tls.version ? tls.version : 'no TLS';
  const verified = tls.version ? (tls.verified ? ', certificate verified' : ', certificate not verified') : '';
  const policy = tls.policy ? ` (policy ${tls.policy}${tls.mode ? `, ${tls.mode}` : ''})` : '';
  return `${version}${verified}${policy}`;
}

function replyOf(t: TraceItem): string | null {
  const code = [t.smtp_code || null, t.enhanced_status_code].filter(Boolean).join(' ');
  const text = [code, t.response].filter(Boolean).join(' ');
  return text || t.detail;
}

/** Every event and attempt in order; the message's own attempts when the activity cannot be read. */
function Events(props: { message: Message; activity: Loaded<Activity> }) {
  const { activity, message } = props;
  const rows: Array<{ at: string; kind: string; what: string; detail: string | null }> = activity.data
    ? activity.data.trace.map((t) => ({ at: t.at, kind: t.kind, what: t.what, detail: t.kind === 'attempt' ? (replyOf(t) ?? t.detail) : (t.url ?? t.detail) }))
    : message.delivery_attempts.map((a) => ({ at: a.time, kind: 'attempt', what: a.status, detail: a.log }));
  rows.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  return (
    <>
      <h2>Events</h2>
      {activity.error ? <p class="muted">The full activity is not available ({activity.error}); the delivery attempts are shown.</p> : null}
      {activity.loading && !activity.data ? (
        <p class="muted" aria-busy="true">
          Loading the activity…
        </p>
      ) : null}
      <TableWrap label="Events (scrolls sideways)">
        <table>
          <caption class="visually-hidden">Events and delivery attempts, oldest first</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Kind</th>
              <th scope="col">What</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {rows.length === 0 ? (
              <tr>
                <td colSpan={4} class="muted">
                  Nothing yet.
                </td>
              </tr>
            ) : (
              rows.map((r, i) => (
                <tr key={i}>
                  <td class="nowrap">
                    <When at={r.at} />
                  </td>
                  <td>{r.kind}</td>
                  <td>
                    <Badge value={r.what} />
                  </td>
                  <td>{r.detail ? <pre class="reply">{r.detail}</pre> : <span class="muted">—</span>}</td>
                </tr>
              ))
            )}
          </tbody>
        </table>
      </TableWrap>
    </>
  );
}

function OpensAndClicks(props: { message: Message; activity: Activity | null }) {
  const hits = (props.activity?.trace ?? []).filter((t) => /open|click/i.test(t.what) && t.kind === 'event');
  return (
    <>
      <h2>Opens and clicks</h2>
      <p>
        {props.message.open_count} {props.message.open_count === 1 ? 'open' : 'opens'}, {props.message.click_count}{' '}
        {props.message.click_count === 1 ? 'click' : 'clicks'}.
      </p>
      {hits.length > 0 ? (
        <ul>
          {hits.map((h, i) => (
            <li key={i}>
              <When at={h.at} /> {h.what}
              {(h.url ?? h.detail) ? <span class="muted"> {h.url ?? h.detail}</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
    </>
  );
}

function WebhookDeliveries(props: { activity: Loaded<Activity> }) {
  const deliveries = props.activity.data?.webhook_deliveries ?? [];
  return (
    <>
      <h2>Webhook deliveries</h2>
      {!props.activity.data ? (
        <p class="muted">{props.activity.error ? 'Not available.' : 'Loading…'}</p>
      ) : deliveries.length === 0 ? (
        <p class="muted">None: no webhook was subscribed to this message's events.</p>
      ) : (
        <TableWrap label="Webhook deliveries (scrolls sideways)">
          <table>
            <caption class="visually-hidden">Webhook deliveries</caption>
            <thead>
              <tr>
                <th scope="col">Webhook</th>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Response</th>
                <th scope="col">Time</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((d, i) => (
                <tr key={i}>
                  <td>
                    <a href={`#/webhooks/${encodeURIComponent(d.webhook_id)}`}>
                      <code>{d.webhook_id.slice(0, 8)}</code>
                      <span class="visually-hidden"> (webhook {d.webhook_id})</span>
                    </a>
                  </td>
                  <td>{d.event_type}</td>
                  <td>
                    <Badge value={d.status} />
                  </td>
                  <td>{d.attempts ?? '—'}</td>
                  <td>
                    {d.response_status ?? '—'}
                    {d.response_ms !== null ? <span class="muted"> in {d.response_ms} ms</span> : null}
                  </td>
                  <td class="nowrap">
                    <When at={d.at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </>
  );
}

/**
 * Scheduled and not yet attempted, and the key may cancel for the sender's domain: the activity
 * says whether the message can be cancelled (getMessage does not carry its schedule); without
 * the activity, the button is not offered.
 */
function cancellable(m: Message, activity: Activity | null, session: SessionInfo): boolean {
  if (activity?.cancellable !== true) return false;
  const domain = m.sender.slice(m.sender.lastIndexOf('@') + 1);
  return mayDo(session, 'messages:cancel', domain);
}

function Cancel(props: { message: Message; activity: Activity | null; session: SessionInfo; path: string; onDone: () => void }) {
  const [asking, setAsking] = useState(false);
  const [done, setDone] = useState(false);
  const action = useAction();
  const confirmRef = useRef<HTMLButtonElement>(null);
  const askRef = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);
  // Focus follows the question: to "Yes" when it opens, back to the button when kept.
  useEffect(() => {
    if (asking) confirmRef.current?.focus();
    else if (asked.current) askRef.current?.focus();
    asked.current = asking;
  }, [asking]);
  if (done)
    return (
      <p class="notice good" role="status">
        The message was cancelled; it will not be sent.
      </p>
    );
  if (!cancellable(props.message, props.activity, props.session)) return null;
  const cancel = async () => {
    const ok = await action.run(() => v2.delete(`${props.path}/cancel`));
    setAsking(false);
    if (ok) {
      setDone(true);
      props.onDone();
    }
  };
  return (
    <div class="actions">
      {!asking ? (
        <button type="button" class="danger" ref={askRef} onClick={() => setAsking(true)}>
          Cancel scheduled message
        </button>
      ) : (
        <div class="card confirm" role="group" aria-labelledby="cancel-question">
          <p id="cancel-question">Cancel this scheduled message? It will not be sent, and this cannot be undone.</p>
          <div class="actions">
            <button type="button" class="danger" ref={confirmRef} disabled={action.busy} onClick={() => void cancel()}>
              Yes, cancel it
            </button>
            <button type="button" class="secondary" disabled={action.busy} onClick={() => setAsking(false)}>
              Keep it
            </button>
          </div>
        </div>
      )}
      <ErrorBox error={action.error} />
    </div>
  );
}
