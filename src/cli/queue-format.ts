import { attemptText } from '../control/protocol.ts';
import type { DrainProgress, DrainResult, EngineFigures, PurgeResult, QueueList, QueueStatus, RetryResult, SuspendResult } from '../control/protocol.ts';

/** How the queue commands print for people; `--json` prints the objects themselves. */

export function formatStatus(s: QueueStatus): string {
  const now = Date.parse(s.generated_at);
  const lines: string[] = [];
  if (!s.daemon) lines.push('daemon: not running (read from the store)');
  else if (!s.daemon.scheduler) lines.push('daemon: running, delivery disabled (delivery.enabled: false): nothing is sent');
  else {
    const sch = s.daemon.scheduler;
    const wake = sch.next_wake_at ? `, next wake-up ${when(sch.next_wake_at, now)}` : '';
    lines.push(
      `daemon: running; ${sch.running} in flight, ${sch.ready} ready in memory${wake}`,
      `limits: ${sch.limits.concurrency} in flight in total, ${sch.limits.per_destination} per destination, ${sch.limits.ready_limit} held in memory`,
    );
  }
  const t = s.totals;
  const held = t.held > 0 ? `, held for an account that is not active ${t.held}` : '';
  lines.push(`queued: ${t.queued}  (due now ${t.due}, waiting for retry ${t.deferred}, scheduled for later ${t.scheduled}${held})`);
  const sections = [`${lines.join('\n')}\n`];
  if (s.destinations.length > 0) {
    const headers = ['DESTINATION', 'QUEUED', 'DUE', 'DEFERRED', 'SCHEDULED', 'HELD', 'OLDEST', 'NEXT ATTEMPT'];
    const rows = s.destinations.map((d) =>
      [d.destination, d.queued, d.due, d.deferred, d.scheduled, d.held, age(now - Date.parse(d.oldest_created_at)), when(d.next_attempt_at, now)].map(String),
    );
    sections.push(table(headers, rows, new Set([1, 2, 3, 4, 5])));
  }
  if (s.jobs.length > 0) {
    const headers = ['JOBS', 'DESTINATION', 'PENDING', 'DUE', 'HELD', 'PARKED', 'FAILED', 'NEXT ATTEMPT'];
    const rows = s.jobs.map((j) =>
      [j.kind, j.destination, j.pending, j.due, j.held, j.parked, j.failed, j.next_attempt_at ? when(j.next_attempt_at, now) : '-'].map(String),
    );
    sections.push(table(headers, rows, new Set([2, 3, 4, 5, 6])));
  }
  const engine = s.daemon?.engine ?? [];
  if (engine.length > 0) {
    const headers = ['ENGINE DESTINATION', 'DISPATCHER', 'READY', 'RUNNING', 'CONCURRENCY', 'RATE', 'STATE'];
    const rows = engine.map((d) =>
      [d.destination, d.dispatcher, d.ready, d.running, d.concurrency, d.rate === null ? '-' : rateText(d.rate), stateOf(d, now)].map(String),
    );
    sections.push(table(headers, rows, new Set([2, 3, 4])));
    const throttled = engine.filter((d) => d.shaping?.throttle);
    if (throttled.length > 0) sections.push(throttles(throttled, now));
  } else if (s.suspended.length > 0) {
    sections.push(`suspended: ${s.suspended.map((d) => `${d.destination} (since ${d.since})`).join(', ')}\n`);
  }
  return sections.join('\n');
}

/** A rate per second as people read it: per hour below one a second (shaping's slowed lanes). */
function rateText(perSecond: number): string {
  return perSecond >= 1 ? `${Math.round(perSecond * 100) / 100}/s` : `${Math.round(perSecond * 3600)}/h`;
}

/** An engine destination's state: suspended by the operator, throttled by a reply, found down, or active. */
function stateOf(d: EngineFigures, now: number): string {
  if (d.suspended) return 'suspended';
  const t = d.shaping?.throttle;
  if (t) {
    const held = Date.parse(t.until) > now;
    if (held) return `${t.action === 'suspend' ? 'suspended' : 'slowed'} by ${d.shaping!.provider}/${t.rule} until ${when(t.until, now)}`;
    return `ramping back (${d.shaping!.provider}/${t.rule}) until ${when(t.ramp_until, now)}`;
  }
  if (d.paused_until) return `down, retried ${when(d.paused_until, now)}`;
  return 'active';
}

/** The replies that throttle lanes: which rule, since when, and what was answered. */
function throttles(engine: EngineFigures[], now: number): string {
  const headers = ['THROTTLED LANE', 'PROVIDER', 'RULE', 'ACTION', 'SINCE', 'REPLY'];
  const rows = engine.map((d) => {
    const t = d.shaping!.throttle!;
    return [d.destination, d.shaping!.provider, t.rule, t.action, `${age(now - Date.parse(t.since))} ago`, oneLine(t.reply)];
  });
  return table(headers, rows, new Set());
}

export function formatSuspend(r: SuspendResult, daemon: boolean): string {
  const state = r.suspended ? 'suspended' : 'resumed';
  const already = r.changed ? '' : ` (it already was ${r.suspended ? 'suspended' : 'active'})`;
  const effect = daemon ? 'the daemon applies it now' : 'no daemon runs: it applies when the daemon starts';
  return `${suspendedFor(r)}${r.destination}: ${state}${already}; ${effect}\n`;
}

/** When the name stands for another destination, how it got there and what else waits with it. */
function suspendedFor(r: SuspendResult): string {
  if (r.name === r.destination) return '';
  switch (r.via) {
    case 'mx':
      return `${r.name} is delivered to the MX set ${r.destination} (every domain it serves waits with it): `;
    case 'smarthost':
      return `${r.name} goes through the smarthost ${r.destination} (all mail through it waits with it): `;
    case 'transport':
      return `${r.name} goes to the transport host ${r.destination}: `;
    case 'origin':
      return `${r.name} is posted to the origin ${r.destination}: `;
    case 'destination':
      return '';
  }
}

export function formatList(list: QueueList): string {
  const now = Date.parse(list.generated_at);
  if (list.messages.length === 0) return 'no queued message matches\n';
  const headers = ['ID', 'ACCOUNT', 'RECIPIENT', 'STATE', 'ATTEMPTS', 'NEXT ATTEMPT', 'LAST ATTEMPT'];
  const rows = list.messages.map((m) => [
    m.id,
    m.account_id,
    m.recipient,
    m.state,
    String(m.attempts),
    when(m.next_attempt_at, now),
    m.last_attempt ? oneLine(attemptText(m.last_attempt)) : '-',
  ]);
  const more = list.more > 0 ? `… and ${list.more} more (raise --limit)\n` : '';
  return table(headers, rows, new Set([4])) + more;
}

export function formatRetry(r: RetryResult, daemon: boolean): string {
  const lines: string[] = [];
  if (r.retried === 0) lines.push('nothing to retry: no selected message waits for a retry');
  else lines.push(`retried ${count(r.retried, 'message')}${daemon ? '' : ' (they go out when the daemon starts)'}`);
  if (r.already_due > 0)
    lines.push(`${count(r.already_due, 'message')} already due (being delivered, or waiting for a connection${daemon ? '' : ' or for the daemon'})`);
  if (r.kept_scheduled > 0) lines.push(`${count(r.kept_scheduled, 'scheduled message')} kept at the time their sender asked for (name them by id to send now)`);
  if (r.held > 0) lines.push(`${count(r.held, 'message')} held: their account is not active (postilion accounts unsuspend sends them)`);
  for (const n of r.not_queued) lines.push(`${n.id}: not queued (${n.status})`);
  return `${lines.join('\n')}\n`;
}

export function formatDrainProgress(p: DrainProgress): string {
  if (p.batch === 0) return `handing the queued mail of ${p.from} to ${p.to}\n`;
  return `${p.batch} handed over (${p.moved} in all)\n`;
}

export function formatDrainResult(r: DrainResult): string {
  const left =
    r.in_delivery === 0
      ? `none left on ${r.from}`
      : `${r.in_delivery} left on ${r.from}, held by its delivery engine when the drain ended (their attempt decides; drain again for those deferred)`;
  return `drained: ${r.moved} messages handed to ${r.to}; ${left}\n`;
}

export function formatPurge(r: PurgeResult): string {
  const lines: string[] = [];
  if (r.purged === 0) lines.push(r.in_delivery > 0 ? 'nothing purged' : 'nothing to purge: no selected message is queued');
  else lines.push(`purged ${count(r.purged, 'message')}: status Failed, "purged by operator"`);
  if (r.in_delivery > 0) lines.push(`${count(r.in_delivery, 'message')} not purged: being delivered right now (run again once their attempt is over)`);
  for (const n of r.not_queued) lines.push(`${n.id}: not queued (${n.status})`);
  return `${lines.join('\n')}\n`;
}

/** Columns padded to their widest cell; `right` columns (numbers) aligned right; a last text column left ragged. */
export function table(headers: string[], rows: string[][], right: Set<number>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (right.has(i) ? c.padStart(widths[i]!) : i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[headers, ...rows].map(line).join('\n')}\n`;
}

/** A due time: "now" once it has come, else the time to the second and how far off it is. */
function when(isoTime: string, now: number): string {
  const at = Date.parse(isoTime);
  if (at <= now) return 'now';
  return `${isoTime.replace(/\.\d+Z$/, 'Z')} (in ${age(at - now)})`;
}

/** 45s, 12m, 3h12m, 2d4h. */
export function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h${m % 60 ? `${m % 60}m` : ''}`;
  const d = Math.floor(h / 24);
  return `${d}d${h % 24 ? `${h % 24}h` : ''}`;
}

const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();
