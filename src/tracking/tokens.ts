import { createHmac, timingSafeEqual } from 'node:crypto';
import { isUuid } from '../util/ids.ts';
import { Lru } from '../util/lru.ts';

/** Bytes of the MAC in a token: 96 bits, so a token cannot be forged by guessing. */
const MAC_BYTES = 12;
const ID_BYTES = 16;
/** Verified tokens remembered at most (about 100 bytes each). */
const VERIFIED_KEPT = 20_000;

/** What a verified token names: the link index of a click token, null for an open token. */
interface Verified {
  messageId: string;
  index: number | null;
}

/** Links per message a click token can number. */
export const MAX_LINK_INDEX = 0xffff;

/**
 * Tracking tokens: the path of an open pixel (`/o/<token>`) or a rewritten link (`/c/<token>`)
 * names the message (and, for a click, the link's number in its stored link list) and carries an
 * HMAC under a server key (keys/tracking.key). A token of one kind never passes as the other,
 * and nothing in it is a URL: the redirect target is only ever read from the message's links.
 * base64url: `<16-byte message id>[<2-byte link index>]<12-byte MAC>`.
 */
export class TrackingTokens {
  /** Tokens recently verified, and what they name: a hit on a known token costs no MAC. */
  private readonly verified = new Lru<string, Verified>(VERIFIED_KEPT);

  constructor(private readonly key: Buffer) {
    if (key.length < 32) throw new Error('the tracking key must be at least 32 bytes');
  }

  open(messageId: string): string {
    return this.seal('o', idBytes(messageId));
  }

  click(messageId: string, index: number): string {
    if (!Number.isInteger(index) || index < 0 || index > MAX_LINK_INDEX) throw new RangeError(`link index ${index} out of range`);
    const payload = Buffer.alloc(ID_BYTES + 2);
    idBytes(messageId).copy(payload);
    payload.writeUInt16BE(index, ID_BYTES);
    return this.seal('c', payload);
  }

  /** The message an open token names, or null when it is malformed or forged. */
  readOpen(token: string): { messageId: string } | null {
    const known = this.verified.get(token);
    if (known !== undefined) return known.index === null ? { messageId: known.messageId } : null;
    const payload = this.unseal('o', token, ID_BYTES);
    if (!payload) return null;
    const messageId = uuidOf(payload);
    this.keep(token, { messageId, index: null });
    return { messageId };
  }

  /** The message and link a click token names, or null when it is malformed or forged. */
  readClick(token: string): { messageId: string; index: number } | null {
    const known = this.verified.get(token);
    if (known !== undefined) return known.index === null ? null : { messageId: known.messageId, index: known.index };
    const payload = this.unseal('c', token, ID_BYTES + 2);
    if (!payload) return null;
    const read = { messageId: uuidOf(payload.subarray(0, ID_BYTES)), index: payload.readUInt16BE(ID_BYTES) };
    this.keep(token, read);
    return { ...read };
  }

  /** Remembers a token that verified (only those: a forged one is checked every time). */
  private keep(token: string, read: Verified): void {
    this.verified.set(token, read);
  }

  private seal(kind: 'o' | 'c', payload: Buffer): string {
    return Buffer.concat([payload, this.mac(kind, payload)]).toString('base64url');
  }

  private unseal(kind: 'o' | 'c', token: string, payloadBytes: number): Buffer | null {
    if (token.length > 64 || !/^[A-Za-z0-9_-]+$/.test(token)) return null;
    const raw = Buffer.from(token, 'base64url');
    if (raw.length !== payloadBytes + MAC_BYTES || raw.toString('base64url') !== token) return null;
    const payload = raw.subarray(0, payloadBytes);
    return timingSafeEqual(raw.subarray(payloadBytes), this.mac(kind, payload)) ? payload : null;
  }

  private mac(kind: 'o' | 'c', payload: Buffer): Buffer {
    return createHmac('sha256', this.key).update(`track:${kind}:`).update(payload).digest().subarray(0, MAC_BYTES);
  }
}

function idBytes(messageId: string): Buffer {
  if (!isUuid(messageId)) throw new TypeError(`not a message id: ${messageId}`);
  return Buffer.from(messageId.replace(/-/g, ''), 'hex');
}

function uuidOf(bytes: Buffer): string {
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
