import type pg from 'pg';
import type { Logger } from 'pino';
import { AppError } from '../util/errors.ts';
import { listenChannel, type ChannelListener } from '../store/pg/channel.ts';

/** The channel a node is told on that a command for it waits, or that one it asked is answered. */
export const COMMANDS_CHANNEL = 'postilion_commands';
/** How often a node looks for commands and answers without being told (a notification lost). */
const POLL_MS = 3000;
/** How often an asker reads its commands' states while it waits. */
const ASK_POLL_MS = 500;
/** Commands claimed at once. */
const CLAIM_LIMIT = 8;
/** Answered and withdrawn commands are kept this long (for the operator's eyes), then deleted. */
const KEEP_HOURS = 24;
const PURGE_EVERY_MS = 600_000;

/** What a node can be asked to do for another: cancel a message it holds, take over a draining node's queued mail. */
export type CommandKind = 'cancel' | 'handover' | 'late-bounce';

/** A node's answer: its handler's value, or why it refused (an API status and its text). */
export type CommandAnswer = { ok: true; value: unknown } | { ok: false; status: number; message: string };

/**
 * How a command ended for its asker: answered, or not in time: withdrawn before the node took it
 * (`taken` false: it never applies it), or taken and not answered (it may have applied it).
 */
export type CommandOutcome =
  { node: string; id: string; state: 'done'; answer: CommandAnswer } | { node: string; id: string; state: 'unanswered'; taken: boolean };

/** Applies one command on the node it is for; an AppError thrown is the refusal the asker gets. */
export type CommandHandler = (payload: unknown, command: { id: string; from: string | null }) => Promise<unknown>;

export interface AskOptions {
  /** How long the nodes have to take the command: those that did not by then have it withdrawn. */
  waitMs: number;
  /** How long, in all, a node that took it has to answer. */
  runningMs: number;
  /** Writes what goes with each command (a drain's bodies), in the transaction that makes it. */
  attach?: (client: pg.PoolClient, commandId: string) => Promise<void>;
}

export interface ClusterCommandsOptions {
  pool: pg.Pool;
  connection: pg.ClientConfig;
  nodeId: string;
  log: Logger;
  handlers: Partial<Record<CommandKind, CommandHandler>>;
}

/**
 * Commands between nodes, through the `commands` table: a node asks another (a row per node
 * asked, NOTIFY on COMMANDS_CHANNEL) and waits for the answer; the node asked claims the row
 * ('running'), applies it with its handler and answers ('done', NOTIFY to the asker). Each node
 * also looks every few seconds, so a lost notification only delays. An asker that stops waiting
 * withdraws the commands not taken ('expired'), and no node takes a command past its
 * `expires_at`: a node that comes back late never applies what its asker gave up on.
 */
export class ClusterCommands {
  private listener: ChannelListener | null = null;
  private poller: NodeJS.Timeout | null = null;
  private lastPurge = 0;
  private serving: Promise<void> | null = null;
  private serveAgain = false;
  private taking = false;
  /** Asks waiting for an answer, by command id: woken by the answer's notification. */
  private readonly waiting = new Map<string, () => void>();
  private readonly applying = new Set<Promise<void>>();

  constructor(private readonly o: ClusterCommandsOptions) {}

  get nodeId(): string {
    return this.o.nodeId;
  }

  async start(): Promise<void> {
    const { log } = this.o;
    this.taking = true;
    let failing = false;
    this.listener = listenChannel(
      this.o.connection,
      COMMANDS_CHANNEL,
      (payload) => this.heard(payload),
      () => {
        failing = false;
        // What was told while no one listened is read now.
        this.serveSoon();
        for (const wake of this.waiting.values()) wake();
      },
      (err) => {
        if (!failing) log.warn({ err }, 'the commands channel of the cluster database was lost; listening again');
        failing = true;
      },
    );
    // Commands that waited for this node while it was down (and not expired) are taken now.
    this.serveSoon();
    this.poller = setInterval(() => this.serveSoon(), POLL_MS);
    this.poller.unref();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.listener.ready, new Promise<void>((resolve) => (timer = setTimeout(resolve, 5000)))]).finally(() => clearTimeout(timer));
  }

  /** Takes no more commands (at a stop); those being applied finish. */
  stopTaking(): void {
    this.taking = false;
    if (this.poller) clearInterval(this.poller);
    this.poller = null;
  }

  /** Waits (up to `graceMs`) for the commands being applied to be answered. */
  async settled(graceMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([Promise.allSettled([this.serving, ...this.applying]), late]).finally(() => clearTimeout(timer));
  }

  async close(): Promise<void> {
    this.stopTaking();
    await this.listener?.close();
    this.listener = null;
    for (const wake of this.waiting.values()) wake();
  }

  /**
   * Sends the command to each node and waits for their answers: those not taken within
   * `waitMs` are withdrawn, those taken get until `runningMs`. A database that cannot be
   * reached is a 503.
   */
  async ask(nodes: readonly string[], kind: CommandKind, payload: unknown, options: AskOptions): Promise<CommandOutcome[]> {
    if (nodes.length === 0) return [];
    const ids = await reachable(() => this.insert(nodes, kind, payload, options));
    const started = Date.now();
    let withdrawn = false;
    const answered = new Map<string, CommandOutcome>();
    // An answer told while the states are being read is not missed: the next wait ends at once.
    let told = false;
    const wake: { now: () => void } = { now: () => (told = true) };
    for (const id of ids.values()) this.waiting.set(id, () => wake.now());
    try {
      for (;;) {
        const pending = [...ids].filter(([, id]) => !answered.has(id));
        if (pending.length === 0) break;
        const rows = await reachable(() =>
          this.o.pool.query<{ id: string; state: string; result: CommandAnswer | null }>(
            'SELECT id::text, state, result FROM commands WHERE id = ANY($1::bigint[])',
            [pending.map(([, id]) => id)],
          ),
        );
        for (const row of rows.rows) {
          const node = pending.find(([, id]) => id === row.id)![0];
          if (row.state === 'done' && row.result) answered.set(row.id, { node, id: row.id, state: 'done', answer: row.result });
          else if (row.state === 'expired') answered.set(row.id, { node, id: row.id, state: 'unanswered', taken: false });
        }
        const elapsed = Date.now() - started;
        if (!withdrawn && elapsed >= options.waitMs) {
          withdrawn = true;
          await reachable(() =>
            this.o.pool.query("UPDATE commands SET state = 'expired', done_at = now() WHERE id = ANY($1::bigint[]) AND state = 'pending'", [
              pending.map(([, id]) => id),
            ]),
          );
          continue;
        }
        if (elapsed >= options.runningMs || !this.listener) {
          const left = pending.filter(([, id]) => !answered.has(id));
          const { rows: withdrawnNow } = await reachable(() =>
            this.o.pool.query<{ id: string }>(
              "UPDATE commands SET state = 'expired', done_at = now() WHERE id = ANY($1::bigint[]) AND state = 'pending' RETURNING id::text",
              [left.map(([, id]) => id)],
            ),
          );
          const notTaken = new Set(withdrawnNow.map((r) => r.id));
          for (const [node, id] of left) answered.set(id, { node, id, state: 'unanswered', taken: !notTaken.has(id) });
          break;
        }
        const until = withdrawn ? options.runningMs : options.waitMs;
        if (!told) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, Math.max(0, Math.min(ASK_POLL_MS, until - elapsed)));
            wake.now = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        told = false;
        wake.now = () => (told = true);
      }
    } finally {
      for (const id of ids.values()) this.waiting.delete(id);
    }
    return [...ids.values()].map((id) => answered.get(id)!);
  }

  /**
   * Hands the command to one node without waiting for its answer, and without a deadline: it
   * waits in the table until that node takes it, however long it is down (a bounce for a message
   * it holds). A database that cannot be reached is a 503.
   */
  async tell(node: string, kind: CommandKind, payload: unknown): Promise<void> {
    await reachable(() =>
      this.o.pool.query(
        `WITH made AS (INSERT INTO commands (node_id, kind, payload, from_node, expires_at) VALUES ($1, $2, $3, $4, NULL) RETURNING id)
         SELECT pg_notify($5, json_build_object('to', $1::text, 'command', (SELECT id FROM made)::text)::text)`,
        [node, kind, JSON.stringify(payload), this.o.nodeId, COMMANDS_CHANNEL],
      ),
    );
  }

  /** One row per node, each told, in one transaction (with what goes with each). */
  private async insert(nodes: readonly string[], kind: CommandKind, payload: unknown, options: AskOptions): Promise<Map<string, string>> {
    const client = await this.o.pool.connect();
    const ids = new Map<string, string>();
    try {
      await client.query('BEGIN');
      for (const node of nodes) {
        const { rows } = await client.query<{ id: string }>(
          `INSERT INTO commands (node_id, kind, payload, from_node, expires_at) VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5)) RETURNING id::text`,
          [node, kind, JSON.stringify(payload), this.o.nodeId, options.waitMs / 1000],
        );
        const id = rows[0]!.id;
        await options.attach?.(client, id);
        await client.query('SELECT pg_notify($1, $2)', [COMMANDS_CHANNEL, JSON.stringify({ to: node, command: id })]);
        ids.set(node, id);
      }
      await client.query('COMMIT');
      return ids;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  private heard(payload: string): void {
    let told: { to?: unknown; command?: unknown; answered?: unknown };
    try {
      told = JSON.parse(payload) as typeof told;
    } catch {
      return;
    }
    if (told.to !== this.o.nodeId) return;
    if (typeof told.answered === 'string') this.waiting.get(told.answered)?.();
    else if (typeof told.command === 'string') this.serveSoon();
  }

  /** Claims and applies this node's pending commands (coalesced: one round at a time, one more if asked meanwhile). */
  private serveSoon(): void {
    if (!this.taking) return;
    if (this.serving) {
      this.serveAgain = true;
      return;
    }
    this.serving = (async () => {
      try {
        do {
          this.serveAgain = false;
          await this.serveRound();
        } while (this.serveAgain && this.taking);
      } catch (err) {
        this.o.log.warn({ err }, 'could not read the commands for this node; trying again in a few seconds');
      } finally {
        this.serving = null;
      }
    })();
  }

  private async serveRound(): Promise<void> {
    const { pool, nodeId } = this.o;
    // What its asker gave up on is closed, never applied.
    await pool.query("UPDATE commands SET state = 'expired', done_at = now() WHERE node_id = $1 AND state = 'pending' AND expires_at <= now()", [nodeId]);
    if (Date.now() - this.lastPurge > PURGE_EVERY_MS) {
      this.lastPurge = Date.now();
      await pool.query('DELETE FROM commands WHERE done_at < now() - make_interval(hours => $1)', [KEEP_HOURS]);
    }
    while (this.taking) {
      const { rows } = await pool.query<{ id: string; kind: string; payload: unknown; from_node: string | null }>(
        `UPDATE commands SET state = 'running' WHERE id IN (
           SELECT id FROM commands WHERE node_id = $1 AND state = 'pending' AND (expires_at IS NULL OR expires_at > now())
           ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING id::text, kind, payload, from_node`,
        [nodeId, CLAIM_LIMIT],
      );
      if (rows.length === 0) return;
      await Promise.all(rows.map((row) => this.track(this.apply(row))));
    }
  }

  private track(work: Promise<void>): Promise<void> {
    this.applying.add(work);
    return work.finally(() => this.applying.delete(work));
  }

  /** Applies one claimed command and answers it. */
  private async apply(row: { id: string; kind: string; payload: unknown; from_node: string | null }): Promise<void> {
    const { log, nodeId, pool } = this.o;
    const handler = this.o.handlers[row.kind as CommandKind];
    let answer: CommandAnswer;
    try {
      if (!handler) throw new AppError(503, `node ${nodeId} cannot apply a '${row.kind}' command (a release that does not know it)`);
      answer = { ok: true, value: (await handler(row.payload, { id: row.id, from: row.from_node })) ?? null };
    } catch (err) {
      if (err instanceof AppError) answer = { ok: false, status: err.status, message: err.message };
      else {
        log.error({ err, command_id: row.id, kind: row.kind, from_node: row.from_node }, 'could not apply a command of another node');
        answer = { ok: false, status: 503, message: `node ${nodeId} could not apply the command: try again` };
      }
    }
    try {
      await pool.query(
        `WITH answered AS (UPDATE commands SET state = 'done', result = $2, done_at = now() WHERE id = $1 RETURNING from_node)
         SELECT pg_notify($3, json_build_object('to', from_node, 'answered', $1::text)::text) FROM answered`,
        [row.id, JSON.stringify(answer), COMMANDS_CHANNEL],
      );
    } catch (err) {
      // Applied, unanswered: its asker stops waiting and says so.
      log.warn({ err, command_id: row.id, kind: row.kind }, 'could not answer a command of another node');
    }
  }
}

/** A query of the cluster database; not reaching it is a 503, not a 500. */
async function reachable<T>(query: () => Promise<T>): Promise<T> {
  try {
    return await query();
  } catch (err) {
    if (err instanceof AppError) throw err;
    // The cause stays for the log; the client is told no more than that.
    throw Object.assign(new AppError(503, 'the cluster database cannot be reached: try again'), { cause: err });
  }
}
