// What the operator's endpoints answer: the control socket's objects as they are (queue status
// and lists, accounts, listeners; see src/control/protocol.ts, admin-protocol.ts and
// doctor-protocol.ts). Copied, not imported: those modules load Node's path and the config.
// Only the fields the screens read.

export interface QueueTotals {
  queued: number;
  due: number;
  deferred: number;
  scheduled: number;
  held: number;
}

export interface DestinationFigures extends QueueTotals {
  destination: string;
  oldest_created_at: string;
  next_attempt_at: string;
}

export interface EngineFigures {
  destination: string;
  dispatcher: 'smtp' | 'http';
  kinds: string[];
  ready: number;
  running: number;
  concurrency: number;
  rate: number | null;
  suspended: boolean;
  paused_until: string | null;
}

export interface JobFigures {
  kind: string;
  destination: string;
  pending: number;
  due: number;
  held: number;
  parked: number;
  failed: number;
  next_attempt_at: string | null;
}

export interface QueueStatus {
  generated_at: string;
  daemon: { delivery_enabled: boolean; engine: EngineFigures[] } | null;
  totals: QueueTotals;
  destinations: DestinationFigures[];
  jobs: JobFigures[];
  suspended: Array<{ destination: string; since: string }>;
}

export interface QueuedMessage {
  id: string;
  account_id: string;
  sender: string;
  recipient: string;
  destination: string;
  status: string;
  state: string;
  attempts: number;
  created_at: string;
  next_attempt_at: string;
  last_attempt: { time: string; status: string; log: string } | null;
}

export interface QueueList {
  generated_at: string;
  messages: QueuedMessage[];
  more: number;
}

export interface SuspendResult {
  destination: string;
  name: string;
  via: string;
  suspended: boolean;
  changed: boolean;
}

export interface RetryResult {
  retried: number;
  already_due: number;
  kept_scheduled: number;
  held: number;
}

export interface AccountView {
  id: string;
  name: string;
  status: string;
  parent_account_id: string | null;
  suspension: { reason: string; at: string; by: string } | null;
}

export interface Listener {
  name: string;
  host: string;
  port: number;
}

export interface NodeView {
  id: string;
  live?: boolean;
  state?: string;
  last_seen?: string | null;
  heartbeat_at?: string;
  leader?: boolean;
}

export interface SystemView {
  readiness: Array<{ name: string; ok: boolean }>;
  /** The doctor's listeners: the list, or the object that holds it. */
  listeners: Listener[] | { listeners: Listener[] };
  cluster: { node_id: string; nodes: NodeView[] } | null;
}
