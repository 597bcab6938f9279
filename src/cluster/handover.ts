import type pg from 'pg';
import type { Logger } from 'pino';
import type { Messages } from '../message/messages.ts';
import { isFinal } from '../message/retention.ts';
import type { MessageRecord } from '../store/records.ts';
import { domainOf } from '../util/email.ts';
import { AppError } from '../util/errors.ts';
import { isUuid } from '../util/ids.ts';
import { mapLimited } from '../util/limited.ts';
import type { CommandHandler } from './commands.ts';

/** Messages in one handover at most. */
export const HANDOVER_MESSAGES = 100;
/** Body bytes in one handover at most (one larger message goes alone). */
export const HANDOVER_BYTES = 16 * 1024 * 1024;
/** Body chunks written per statement. */
const CHUNKS_PER_INSERT = 64;

/** One batch of a draining node's queued messages: the records (bodies beside the command, in command_bodies). */
export interface Handover {
  messages: Array<{ record: MessageRecord; links: string[] | null }>;
  /** How many chunks each body has: what the node taking them checks it read. */
  bodies: Record<string, number>;
}

/** What the node taking them answers: the ids it holds now (taken, or had already), and what failed. */
export interface HandoverAnswer {
  taken: string[];
  failed: number;
  error: string | null;
}

/** Writes the bodies of a handover beside its command, in the transaction that makes it. */
export async function attachBodies(client: pg.PoolClient, commandId: string, bodies: ReadonlyMap<string, Buffer[]>): Promise<void> {
  const rows: Array<[string, number, Buffer]> = [];
  for (const [bodyId, chunks] of bodies) chunks.forEach((chunk, i) => rows.push([bodyId, i, chunk]));
  for (let at = 0; at < rows.length; at += CHUNKS_PER_INSERT) {
    const slice = rows.slice(at, at + CHUNKS_PER_INSERT);
    await client.query('INSERT INTO command_bodies (command_id, body_id, chunk, data) SELECT $1, * FROM unnest($2::text[], $3::int[], $4::bytea[])', [
      commandId,
      slice.map((r) => r[0]),
      slice.map((r) => r[1]),
      slice.map((r) => r[2]),
    ]);
  }
}

/**
 * The taking node's side of a drain: stores each message handed over (Messages.takeOver: same
 * id, same state, its body and links), wakes the engine for it, and answers the ids it holds
 * now. Only then does the draining node delete them; its bodies are dropped from the database.
 */
export function handoverHandler(o: { messages: Messages; pool: pg.Pool; due: (dueMs: number) => void; log: Logger }): CommandHandler {
  return async (payload, command): Promise<HandoverAnswer> => {
    const handover = parseHandover(payload);
    const bodies = await readBodies(o.pool, command.id);
    for (const [bodyId, count] of Object.entries(handover.bodies)) {
      if ((bodies.get(bodyId)?.length ?? 0) !== count) throw new AppError(409, `the handover's body ${bodyId} is not whole in the cluster database`);
    }
    const taken: string[] = [];
    let failed = 0;
    let error: string | null = null;
    await mapLimited(handover.messages, 16, async ({ record, links }) => {
      const log = o.log.child({ message_id: record.id, account_id: record.accountId, recipient_domain: domainOf(record.recipient), from_node: command.from });
      try {
        const how = await o.messages.takeOver(record, bodies.get(record.bodyId) ?? [], links);
        taken.push(record.id);
        if (how === 'taken') o.due(Date.parse(record.dueAt));
        log.info(
          { status: record.status, due_at: record.dueAt },
          how === 'taken' ? 'message taken over from a draining node' : 'message handed over again: already here',
        );
      } catch (err) {
        failed += 1;
        error ??= (err as Error).message;
        log.error({ err }, 'could not take over a message from a draining node');
      }
    });
    await o.pool.query('DELETE FROM command_bodies WHERE command_id = $1', [command.id]);
    return { taken, failed, error };
  };
}

async function readBodies(pool: pg.Pool, commandId: string): Promise<Map<string, Buffer[]>> {
  const { rows } = await pool.query<{ body_id: string; data: Buffer }>(
    'SELECT body_id, data FROM command_bodies WHERE command_id = $1 ORDER BY body_id, chunk',
    [commandId],
  );
  const bodies = new Map<string, Buffer[]>();
  for (const row of rows) {
    const chunks = bodies.get(row.body_id) ?? [];
    chunks.push(row.data);
    bodies.set(row.body_id, chunks);
  }
  return bodies;
}

/** The payload as the draining node wrote it, checked before anything is stored. */
function parseHandover(payload: unknown): Handover {
  const bad = (why: string) => new AppError(400, `a handover of another node is not well formed: ${why}`);
  const p = payload as Partial<Handover> | null;
  if (typeof p !== 'object' || p === null || !Array.isArray(p.messages) || typeof p.bodies !== 'object' || p.bodies === null) throw bad('no messages');
  if (p.messages.length > HANDOVER_MESSAGES) throw bad(`more than ${HANDOVER_MESSAGES} messages`);
  for (const m of p.messages) {
    const r = (m as { record?: Partial<MessageRecord> } | null)?.record;
    if (typeof r !== 'object' || r === null || r.v !== 1) throw bad('a record of an unknown version');
    if (!isUuid(r.id ?? '') || typeof r.bodyId !== 'string' || typeof r.accountId !== 'string' || typeof r.recipient !== 'string')
      throw bad('a record without ids');
    if (typeof r.status !== 'string' || isFinal(r.status) || Number.isNaN(Date.parse(r.dueAt ?? ''))) throw bad(`message ${r.id} is not queued`);
    if (!(r.bodyId in p.bodies)) throw bad(`message ${r.id} comes without its body`);
    const links = (m as { links?: unknown }).links;
    if (links !== null && !(Array.isArray(links) && links.every((l) => typeof l === 'string'))) throw bad(`message ${r.id} has links that are not a list`);
  }
  return p as Handover;
}
