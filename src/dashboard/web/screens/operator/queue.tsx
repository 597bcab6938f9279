// The operator's queue (#/operator/queue): queued mail by recipient domain with suspend, resume
// and retry; the delivery engine's destinations and the suspended ones; the HTTP jobs; held mail.
import { useState } from 'preact/hooks';
import { operator } from '../../api.ts';
import { Badge, ErrorBox, messageOf, Page, Show, useLoad, When } from '../../ui.tsx';
import type { QueueList, QueueStatus, RetryResult, SuspendResult } from './types.ts';

export function QueueScreen() {
  const status = useLoad(() => operator.get<QueueStatus>('/queue/status'), []);
  const held = useLoad(() => operator.get<QueueList>('/queue/messages', { state: 'held', limit: 100 }), []);
  /** Recipient domain → the engine destination a suspend or resume resolved it to. */
  const [resolved, setResolved] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const act = async (what: () => Promise<string>) => {
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      setNotice(await what());
      status.reload();
      held.reload();
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  const suspend = (name: string, on: boolean) =>
    act(async () => {
      const r = await operator.post<SuspendResult>(on ? '/queue/suspend' : '/queue/resume', { destination: name });
      setResolved((m) => ({ ...m, [name]: r.destination }));
      const target = r.destination === r.name ? r.destination : `${r.destination} (for ${r.name}, by ${r.via})`;
      if (!r.changed) return `${target} already was ${on ? 'suspended' : 'running'}.`;
      return `${on ? 'Suspended' : 'Resumed'} ${target}.`;
    });
  const retry = (domain: string) =>
    act(async () => {
      const r = await operator.post<RetryResult>('/queue/retry', { domain });
      return `Retry ${domain}: ${r.retried} made due now, ${r.already_due} already due, ${r.kept_scheduled} kept to their schedule, ${r.held} held (account not active).`;
    });

  return (
    <Page
      title="Queue"
      actions={
        <button type="button" class="secondary" onClick={() => (status.reload(), held.reload())}>
          Refresh
        </button>
      }
    >
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      <ErrorBox error={error} />
      <Show loaded={status}>
        {(s) => {
          const suspended = new Set(s.suspended.map((x) => x.destination));
          const isSuspended = (name: string) => suspended.has(name) || (resolved[name] !== undefined && suspended.has(resolved[name]));
          return (
            <>
              <p class="muted">
                As of <When at={s.generated_at} />.{' '}
                {s.daemon === null ? 'No daemon runs: read from the store.' : s.daemon.delivery_enabled ? '' : 'Delivery is off on this daemon.'}
              </p>
              <dl class="fields">
                <dt>Queued</dt>
                <dd>{s.totals.queued}</dd>
                <dt>Due</dt>
                <dd>{s.totals.due}</dd>
                <dt>Deferred</dt>
                <dd>{s.totals.deferred}</dd>
                <dt>Scheduled</dt>
                <dd>{s.totals.scheduled}</dd>
                <dt>Held</dt>
                <dd>{s.totals.held}</dd>
              </dl>
              {s.destinations.length === 0 ? (
                <p class="muted">No mail is queued.</p>
              ) : (
                <div class="table-wrap">
                  <table>
                    <caption>Queue by destination</caption>
                    <thead>
                      <tr>
                        <th scope="col">Destination</th>
                        <th scope="col">Queued</th>
                        <th scope="col">Due</th>
                        <th scope="col">Deferred</th>
                        <th scope="col">Scheduled</th>
                        <th scope="col">Held</th>
                        <th scope="col">Oldest</th>
                        <th scope="col">Next attempt</th>
                        <th scope="col">Actions</th>
                      </tr>
                    </thead>
                    <tbody>
                      {s.destinations.map((d, i) => {
                        const off = isSuspended(d.destination);
                        const rowId = `dest-${i}`;
                        return (
                          <tr key={d.destination}>
                            <th scope="row" id={rowId}>
                              {d.destination} {off ? <Badge value="suspended" /> : null}
                            </th>
                            <td>{d.queued}</td>
                            <td>{d.due}</td>
                            <td>{d.deferred}</td>
                            <td>{d.scheduled}</td>
                            <td>{d.held}</td>
                            <td>
                              <When at={d.oldest_created_at} />
                            </td>
                            <td>
                              <When at={d.next_attempt_at} />
                            </td>
                            <td class="actions-cell">
                              <button
                                type="button"
                                class="secondary small"
                                disabled={busy}
                                aria-describedby={rowId}
                                onClick={() => void suspend(d.destination, !off)}
                              >
                                {off ? 'Resume' : 'Suspend'}
                              </button>
                              <button type="button" class="small" disabled={busy} aria-describedby={rowId} onClick={() => void retry(d.destination)}>
                                Retry
                              </button>
                            </td>
                          </tr>
                        );
                      })}
                    </tbody>
                  </table>
                </div>
              )}
              <p class="hint">
                Suspending a recipient domain suspends where its mail goes (its MX set, or the transport or smarthost that takes it): other domains sharing it
                wait too.
              </p>

              <h2>Engine destinations</h2>
              {s.daemon === null || s.daemon.engine.length === 0 ? (
                <p class="muted">The delivery engine holds no destination now.</p>
              ) : (
                <div class="table-wrap">
                  <table>
                    <caption>Engine destinations</caption>
                    <thead>
                      <tr>
                        <th scope="col">Destination</th>
                        <th scope="col">Kind</th>
                        <th scope="col">Ready</th>
                        <th scope="col">Running</th>
                        <th scope="col">Concurrency</th>
                        <th scope="col">Paused until</th>
                        <th scope="col">Actions</th>
                      </tr>
                    </thead>
                    <tbody>
                      {s.daemon.engine.map((e, i) => {
                        const off = e.suspended || suspended.has(e.destination);
                        const rowId = `engine-${i}`;
                        return (
                          <tr key={e.destination}>
                            <th scope="row" id={rowId}>
                              <code>{e.destination}</code> {off ? <Badge value="suspended" /> : null}
                            </th>
                            <td>{e.kinds.join(', ') || e.dispatcher}</td>
                            <td>{e.ready}</td>
                            <td>{e.running}</td>
                            <td>{e.concurrency}</td>
                            <td>
                              <When at={e.paused_until} />
                            </td>
                            <td class="actions-cell">
                              <button
                                type="button"
                                class="secondary small"
                                disabled={busy}
                                aria-describedby={rowId}
                                onClick={() => void suspend(e.destination, !off)}
                              >
                                {off ? 'Resume' : 'Suspend'}
                              </button>
                            </td>
                          </tr>
                        );
                      })}
                    </tbody>
                  </table>
                </div>
              )}

              <h2>Suspended destinations</h2>
              {s.suspended.length === 0 ? (
                <p class="muted">None: every destination runs.</p>
              ) : (
                <div class="table-wrap">
                  <table>
                    <caption>Suspended destinations</caption>
                    <thead>
                      <tr>
                        <th scope="col">Destination</th>
                        <th scope="col">Since</th>
                        <th scope="col">Actions</th>
                      </tr>
                    </thead>
                    <tbody>
                      {s.suspended.map((x, i) => (
                        <tr key={x.destination}>
                          <th scope="row" id={`suspended-${i}`}>
                            <code>{x.destination}</code>
                          </th>
                          <td>
                            <When at={x.since} />
                          </td>
                          <td class="actions-cell">
                            <button
                              type="button"
                              class="secondary small"
                              disabled={busy}
                              aria-describedby={`suspended-${i}`}
                              onClick={() => void suspend(x.destination, false)}
                            >
                              Resume
                            </button>
                          </td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              )}

              {s.jobs.length > 0 ? (
                <>
                  <h2>Webhook and route jobs</h2>
                  <div class="table-wrap">
                    <table>
                      <caption>Webhook and route jobs</caption>
                      <thead>
                        <tr>
                          <th scope="col">Destination</th>
                          <th scope="col">Kind</th>
                          <th scope="col">Pending</th>
                          <th scope="col">Due</th>
                          <th scope="col">Held</th>
                          <th scope="col">Parked</th>
                          <th scope="col">Failed</th>
                          <th scope="col">Next attempt</th>
                        </tr>
                      </thead>
                      <tbody>
                        {s.jobs.map((j) => (
                          <tr key={`${j.kind} ${j.destination}`}>
                            <th scope="row">
                              <code>{j.destination}</code>
                            </th>
                            <td>{j.kind}</td>
                            <td>{j.pending}</td>
                            <td>{j.due}</td>
                            <td>{j.held}</td>
                            <td>{j.parked}</td>
                            <td>{j.failed}</td>
                            <td>
                              <When at={j.next_attempt_at} />
                            </td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  </div>
                </>
              ) : null}
            </>
          );
        }}
      </Show>

      <h2>Held mail</h2>
      <p class="muted">Mail of suspended or deleted accounts: kept, not sent, until the account is active again.</p>
      <Show loaded={held}>
        {(list) =>
          list.messages.length === 0 ? (
            <p class="muted">No mail is held.</p>
          ) : (
            <>
              <div class="table-wrap">
                <table>
                  <caption>Held mail</caption>
                  <thead>
                    <tr>
                      <th scope="col">Recipient</th>
                      <th scope="col">Sender</th>
                      <th scope="col">Account</th>
                      <th scope="col">Attempts</th>
                      <th scope="col">Queued</th>
                      <th scope="col">Last attempt</th>
                    </tr>
                  </thead>
                  <tbody>
                    {list.messages.map((m) => (
                      <tr key={m.id}>
                        <th scope="row">
                          {m.recipient}
                          <br />
                          <code class="muted">{m.id}</code>
                        </th>
                        <td>{m.sender}</td>
                        <td>
                          <code>{m.account_id}</code>
                        </td>
                        <td>{m.attempts}</td>
                        <td>
                          <When at={m.created_at} />
                        </td>
                        <td>{m.last_attempt ? m.last_attempt.log : <span class="muted">none</span>}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              {list.more > 0 ? <p class="muted">And {list.more} more.</p> : null}
            </>
          )
        }
      </Show>
    </Page>
  );
}
