import { isUuid, newIdAt } from '../util/ids.ts';

/** A new message's id (UUIDv7 on the given clock time) and its Message-ID `<id@domain>`. */
export function newMessageId(domain: string, ms: number): { id: string; header: string } {
  const id = newIdAt(ms);
  return { id, header: `<${id}@${domain}>` };
}

export type MessageRef = { kind: 'id'; id: string } | { kind: 'header'; header: string };

/**
 * How an API path names a message: the bare UUID, or the full Message-ID (with or without its
 * angle brackets). Null when it is neither.
 */
export function parseMessageRef(text: string): MessageRef | null {
  const value = text.trim();
  if (isUuid(value)) return { kind: 'id', id: value.toLowerCase() };
  const bare = value.startsWith('<') && value.endsWith('>') ? value.slice(1, -1) : value;
  if (!/^[^\s<>@]+@[^\s<>@]+$/.test(bare)) return null;
  return { kind: 'header', header: `<${bare}>` };
}
