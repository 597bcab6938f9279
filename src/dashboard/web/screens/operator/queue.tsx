// The operator's queue (#/operator/queue): queued mail by recipient domain with suspend, resume
// and retry; the delivery engine's destinations and the suspended ones; the HTTP jobs; held mail.
import { useState } from 'preact/hooks';
import { operator } from '../../api.ts';
import { Badge, Page, Show, useLoad, When } from '../../ui.tsx';
import { useActions } from '../kit/form.tsx';
import { RowButton, Table } from '../kit/list-table.tsx';
import type { QueueList, QueueStatus, RetryResult, SuspendResult } from './types.ts';

export function QueueScreen() {
  const status = useLoad(() => operator.get<QueueStatus>('/queue/status'), []);
  const held = useLoad(() => operator.get<QueueList>('/queue/messages', { state: 'held', limit: 100 }), []);
  /** Recipient domain → the engine destination a suspend or resume resolved it to. */
  const [resolved, setResolved] = useState<Record<string, string>>({});
  const { act, busy, status: said } = useActions();
  const refresh = () => (status.reload(), held.reload());
  const suspend = (name: string, on: boolean) =>
    act(async () => {
      const r = await operator.post<SuspendResult>(on ? '/queue/suspend' : '/queue/resume', { destination: name });
      refresh();
      setResolved((m) => ({ ...m, [name]: r.destination }));
      const target = r.destination === r.name ? r.destination : `${r.destination} (for ${r.name}, by ${r.via})`;
      if (!r.changed) return `${target} already was ${on ? 'suspended' : 'running'}.`;
      return `${on ? 'Suspended' : 'Resumed'} ${target}.`;
    });
  const retry = (domain: string) =>
    act(async () => {
      const r = await operator.post<RetryResult>('/queue/retry', { domain });
      refresh();
      return `Retry ${domain}: ${r.retried} made due now, ${r.already_due} already due, ${r.kept_scheduled} kept to their schedule, ${r.held} held (account not active).`;
    });

  return (
    <Page
      title="Queue"
      actions={
        <button type="button" class="secondary" onClick={refresh}>
          Refresh
        </button>
      }
    >
      {said}
      <Show loaded={status}>
        {(s) => {
          const suspended = new Set(s.suspended.map((x) => x.destination));
          const isSuspended = (name: string) => suspended.has(name) || (resolved[name] !== undefined && suspended.has(resolved[name]));
          /** Suspend or Resume a destination, as it stands now. */
          const toggle = (rowId: string, name: string, off: boolean) => (
            <RowButton of={rowId} disabled={busy} onClick={() => void suspend(name, !off)}>
              {off ? 'Resume' : 'Suspend'}
            </RowButton>
          );
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
              <Table
                caption="Queue by destination"
                columns={['Destination', 'Queued', 'Due', 'Deferred', 'Scheduled', 'Held', 'Oldest', 'Next attempt', 'Actions']}
                items={s.destinations}
                empty="No mail is queued."
                row={(d, i) => {
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
                        {toggle(rowId, d.destination, off)}
                        <RowButton of={rowId} look="primary" disabled={busy} onClick={() => void retry(d.destination)}>
                          Retry
                        </RowButton>
                      </td>
                    </tr>
                  );
                }}
              />
              <p class="hint">
                Suspending a recipient domain suspends where its mail goes (its MX set, or the transport or smarthost that takes it): other domains sharing it
                wait too.
              </p>

              <h2>Engine destinations</h2>
              <Table
                caption="Engine destinations"
                columns={['Destination', 'Kind', 'Ready', 'Running', 'Concurrency', 'Paused until', 'Actions']}
                items={s.daemon?.engine ?? []}
                empty="The delivery engine holds no destination now."
                row={(e, i) => {
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
                      <td class="actions-cell">{toggle(rowId, e.destination, off)}</td>
                    </tr>
                  );
                }}
              />

              <h2>Suspended destinations</h2>
              <Table
                caption="Suspended destinations"
                columns={['Destination', 'Since', 'Actions']}
                items={s.suspended}
                empty="None: every destination runs."
                row={(x, i) => (
                  <tr key={x.destination}>
                    <th scope="row" id={`suspended-${i}`}>
                      <code>{x.destination}</code>
                    </th>
                    <td>
                      <When at={x.since} />
                    </td>
                    <td class="actions-cell">{toggle(`suspended-${i}`, x.destination, true)}</td>
                  </tr>
                )}
              />

              {s.jobs.length > 0 ? (
                <>
                  <h2>Webhook and route jobs</h2>
                  <Table
                    caption="Webhook and route jobs"
                    columns={['Destination', 'Kind', 'Pending', 'Due', 'Held', 'Parked', 'Failed', 'Next attempt']}
                    items={s.jobs}
                    empty=""
                    row={(j) => (
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
                    )}
                  />
                </>
              ) : null}
            </>
          );
        }}
      </Show>

      <h2>Held mail</h2>
      <p class="muted">Mail of suspended or deleted accounts: kept, not sent, until the account is active again.</p>
      <Show loaded={held}>
        {(list) => (
          <>
            <Table
              caption="Held mail"
              columns={['Recipient', 'Sender', 'Account', 'Attempts', 'Queued', 'Last attempt']}
              items={list.messages}
              empty="No mail is held."
              row={(m) => (
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
              )}
            />
            {list.more > 0 ? <p class="muted">And {list.more} more.</p> : null}
          </>
        )}
      </Show>
    </Page>
  );
}
