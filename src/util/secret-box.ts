import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * AES-256-GCM for secrets that must be kept for a while (idempotent replays of key creation).
 * The key lives in keys/ (mode 0600), apart from the data directory that holds the ciphertext.
 */
export class SecretBox {
  private constructor(private readonly key: Buffer) {}

  /** Loads the key file, creating it with a fresh random key on first use. */
  static loadOrCreate(path: string): SecretBox {
    if (!existsSync(path)) {
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      writeFileSync(path, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    }
    chmodSync(path, 0o600);
    const key = Buffer.from(readFileSync(path, 'utf8').trim(), 'hex');
    if (key.length !== 32) throw new Error(`${path} does not hold a 32-byte hex key`);
    return new SecretBox(key);
  }

  /** A box over a key held elsewhere (the cluster's secrets, in its database). */
  static fromKey(key: Buffer): SecretBox {
    if (key.length !== 32) throw new Error('a secret box key has 32 bytes');
    return new SecretBox(Buffer.from(key));
  }

  /** The key itself, for a box whose file holds a key of another use (a MAC key). */
  rawKey(): Buffer {
    return Buffer.from(this.key);
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
  }

  open(sealed: string): string {
    const raw = Buffer.from(sealed, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }
}
