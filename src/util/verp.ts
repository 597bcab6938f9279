import { createHmac, timingSafeEqual } from 'node:crypto';

/** Hex characters of the MAC in a token: 64 bits, enough that a forged bounce is never accepted. */
const MAC_HEX = 16;
const ID_HEX = 32;

/**
 * VERP tokens: the local part `bounces+<token>` of a message's return path names the message and
 * proves Postilion made it (an HMAC under a server key), so a bounce can be matched to its message
 * and nobody can bounce another sender's mail by guessing ids.
 */
export class VerpTokens {
  constructor(private readonly key: Buffer) {
    if (key.length < 32) throw new Error('the VERP key must be at least 32 bytes');
  }

  /** `<message id, 32 hex>` + `<MAC, 16 hex>`. */
  token(messageId: string): string {
    const id = messageId.replace(/-/g, '').toLowerCase();
    return id + this.mac(id);
  }

  /** The message id (UUID form) a token names, or null when it is malformed or forged. */
  messageId(token: string): string | null {
    const t = token.toLowerCase();
    if (!/^[0-9a-f]+$/.test(t) || t.length !== ID_HEX + MAC_HEX) return null;
    const id = t.slice(0, ID_HEX);
    const given = Buffer.from(t.slice(ID_HEX), 'hex');
    if (!timingSafeEqual(given, Buffer.from(this.mac(id), 'hex'))) return null;
    return `${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20)}`;
  }

  private mac(id: string): string {
    return createHmac('sha256', this.key).update(`verp:${id}`).digest('hex').slice(0, MAC_HEX);
  }
}
