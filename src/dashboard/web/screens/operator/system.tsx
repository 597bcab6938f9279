// The operator's system page (#/operator/system): readiness, the listeners the daemon holds, and
// the cluster's nodes when it runs in one.
import { operator } from '../../api.ts';
import { Badge, Page, Show, useLoad, When } from '../../ui.tsx';
import { Table } from '../kit/list-table.tsx';
import type { Listener, NodeView, SystemView } from './types.ts';

export function SystemScreen() {
  const system = useLoad(() => operator.get<SystemView>('/system'), []);
  return (
    <Page
      title="System"
      actions={
        <button type="button" class="secondary" onClick={system.reload}>
          Refresh
        </button>
      }
    >
      <Show loaded={system}>
        {(s) => {
          const listeners: Listener[] = Array.isArray(s.listeners) ? s.listeners : (s.listeners?.listeners ?? []);
          return (
            <>
              <h2>Readiness</h2>
              {s.readiness.length === 0 ? (
                <p class="muted">Nothing reports.</p>
              ) : (
                <ul class="plain">
                  {s.readiness.map((r) => (
                    <li key={r.name}>
                      <Badge value={r.ok ? 'ready' : 'not ready'} tone={r.ok ? 'good' : 'bad'} /> {r.name}
                    </li>
                  ))}
                </ul>
              )}

              <h2>Listeners</h2>
              <Table
                caption="Listeners"
                columns={['Listener', 'Host', 'Port']}
                items={listeners}
                empty="No listener."
                row={(l) => (
                  <tr key={`${l.name} ${l.host} ${l.port}`}>
                    <th scope="row">{l.name}</th>
                    <td>
                      <code>{l.host}</code>
                    </td>
                    <td>{l.port}</td>
                  </tr>
                )}
              />

              <h2>Nodes</h2>
              {s.cluster === null ? (
                <p>This node runs on its own (no cluster).</p>
              ) : (
                <>
                  <p>
                    This node: <code>{s.cluster.node_id}</code>
                  </p>
                  <Table
                    caption="Nodes"
                    columns={['Node', 'State', 'Last seen']}
                    items={s.cluster.nodes}
                    empty="No node."
                    row={(n) => (
                      <tr key={n.id}>
                        <th scope="row">
                          <code>{n.id}</code>
                          {n.id === s.cluster!.node_id ? ' (this node)' : ''}
                          {n.leader ? (
                            <>
                              {' '}
                              <Badge value="leader" tone="neutral" />
                            </>
                          ) : null}
                        </th>
                        <td>
                          <Badge value={stateOf(n)} tone={stateOf(n) === 'live' ? 'good' : stateOf(n) === 'stopped' ? 'neutral' : 'bad'} />
                        </td>
                        <td>
                          <When at={n.last_seen ?? n.heartbeat_at ?? null} />
                        </td>
                      </tr>
                    )}
                  />
                </>
              )}
            </>
          );
        }}
      </Show>
    </Page>
  );
}

function stateOf(n: NodeView): string {
  if (n.state) return n.state;
  return n.live ? 'live' : 'lost';
}
