// The recent deliveries of a webhook or a route (the dashboard's own read, not an API
// operation): each attempt's outcome, the receiver's HTTP status and how long it took.
import { useId } from 'preact/hooks';
import { Badge, When, type Loaded } from '../ui.tsx';

/** One delivery as GET …/webhooks/:id/deliveries and …/routes/:id/deliveries give it; null where nothing is known. */
export interface Delivery {
  webhook_id?: string | null;
  route_id?: string | null;
  message_id?: string | null;
  event_type?: string | null;
  status: string | null;
  attempts: number | null;
  response_status: number | null;
  response_ms: number | null;
  at: string | null;
}

export interface DeliveriesAnswer {
  deliveries: Delivery[];
  /** Why the webhook was disabled (webhooks only); null when it was not, or by a person. */
  disabled_reason?: string | null;
}

export function RecentDeliveries(props: { loaded: Loaded<DeliveriesAnswer> }) {
  const id = useId();
  const { loaded } = props;
  const deliveries = loaded.data?.deliveries ?? [];
  const withEvents = deliveries.some((d) => d.event_type);
  return (
    <div class="recent-deliveries">
      <div class="page-head">
        <h2 id={id}>Recent deliveries</h2>
        <button type="button" class="secondary small" onClick={loaded.reload} disabled={loaded.loading}>
          Refresh
        </button>
      </div>
      {loaded.error ? (
        // Quietly: the page is still useful without this part.
        <p class="muted">Recent deliveries are not available: {loaded.error}</p>
      ) : loaded.data === null ? (
        <p class="muted" aria-busy="true">
          Loading…
        </p>
      ) : deliveries.length === 0 ? (
        <p class="muted">No deliveries yet.</p>
      ) : (
        // Focusable: on a phone the table scrolls sideways, and keyboards must reach it.
        <div class="table-wrap" tabIndex={0} role="region" aria-labelledby={id}>
          <table aria-labelledby={id}>
            <thead>
              <tr>
                <th scope="col">Time</th>
                {withEvents ? <th scope="col">Event</th> : null}
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">HTTP status</th>
                <th scope="col">Response time</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((d, i) => (
                <tr key={i}>
                  <td>
                    <When at={d.at} />
                  </td>
                  {withEvents ? (
                    <td>
                      {d.event_type ?? '—'}
                      {d.message_id ? (
                        <>
                          {' '}
                          <a href={`#/messages/${encodeURIComponent(d.message_id)}`}>message</a>
                        </>
                      ) : null}
                    </td>
                  ) : null}
                  <td>{d.status ? <Badge value={d.status} /> : '—'}</td>
                  <td>{d.attempts ?? '—'}</td>
                  <td>{d.response_status ?? '—'}</td>
                  <td>{duration(d.response_ms)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}
