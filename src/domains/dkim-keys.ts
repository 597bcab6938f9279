import { createPrivateKey, createPublicKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

export type DkimAlgorithm = 'rsa' | 'ed25519';

/** The public half of a key, as published in DNS; the private half is a file under keys/dkim/. */
export interface DkimPublicKey {
  selector: string;
  algorithm: DkimAlgorithm;
  /** The `p=` value: base64 SubjectPublicKeyInfo (RSA) or the raw 32 bytes (Ed25519, RFC 8463). */
  publicKey: string;
  createdAt: string;
}

export class DkimKeyError extends Error {}

const generate = promisify(generateKeyPair);

/** The TXT record content that publishes a key. */
export function dkimTxt(key: DkimPublicKey): string {
  return `v=DKIM1; k=${key.algorithm}; p=${key.publicKey}`;
}

/** Where private keys (PEM) are kept: files under keys/dkim/, or the cluster's database. */
export interface DkimKeyFiles {
  read(domainId: string, selector: string): Promise<string>;
  /** Durable when it resolves: never a torn key. */
  write(domainId: string, selector: string, pem: string): Promise<void>;
  remove(domainId: string, selector: string): Promise<void>;
  removeDomain(domainId: string): Promise<void>;
}

/**
 * DKIM private keys, each parsed once and kept as a KeyObject: parsing PEM on every signature is
 * measurably slower. Kept as files (one node, `DkimKeyStore.inDirectory`) or sealed in the
 * cluster's database (cluster/dkim-keys.ts).
 */
export class DkimKeyStore {
  private readonly cache = new Map<string, KeyObject>();

  constructor(private readonly files: DkimKeyFiles) {}

  /** Keys as PEM files, mode 0600, at <dir>/<domain id>/<selector>.pem. */
  static inDirectory(dir: string): DkimKeyStore {
    return new DkimKeyStore(new PemFiles(dir));
  }

  async generate(domainId: string, selector: string, algorithm: DkimAlgorithm, createdAt: string): Promise<DkimPublicKey> {
    const { privateKey } = algorithm === 'rsa' ? await generate('rsa', { modulusLength: 2048 }) : await generate('ed25519');
    return this.save(domainId, selector, privateKey, createdAt);
  }

  /** Takes an operator-supplied RSA key (PEM, at least 1024 bits). */
  async import(domainId: string, selector: string, pem: string, createdAt: string): Promise<DkimPublicKey> {
    let key: KeyObject;
    try {
      key = createPrivateKey({ key: pem, format: 'pem' });
    } catch {
      throw new DkimKeyError('dkim_private_key is not a PEM private key');
    }
    if (key.asymmetricKeyType !== 'rsa') throw new DkimKeyError('dkim_private_key must be an RSA key');
    if ((key.asymmetricKeyDetails?.modulusLength ?? 0) < 1024) throw new DkimKeyError('dkim_private_key must have at least 1024 bits');
    return this.save(domainId, selector, key, createdAt);
  }

  /** The private key for signing. */
  async privateKey(domainId: string, selector: string): Promise<KeyObject> {
    const id = `${domainId}/${selector}`;
    let key = this.cache.get(id);
    if (!key) {
      key = createPrivateKey({ key: await this.files.read(domainId, selector), format: 'pem' });
      this.cache.set(id, key);
    }
    return key;
  }

  /**
   * Writes each key again under its new selector; the old ones stay until the caller removes
   * them, after the record that names the new selectors is committed.
   */
  async copy(domainId: string, renames: Array<{ from: string; to: string }>): Promise<void> {
    const keys = await Promise.all(renames.map(async ({ from, to }) => ({ to, key: await this.privateKey(domainId, from) })));
    for (const { to, key } of keys) await this.write(domainId, to, key);
  }

  async remove(domainId: string, selector: string): Promise<void> {
    this.cache.delete(`${domainId}/${selector}`);
    await this.files.remove(domainId, selector);
  }

  async removeDomain(domainId: string): Promise<void> {
    for (const id of this.cache.keys()) if (id.startsWith(`${domainId}/`)) this.cache.delete(id);
    await this.files.removeDomain(domainId);
  }

  private async save(domainId: string, selector: string, key: KeyObject, createdAt: string): Promise<DkimPublicKey> {
    await this.write(domainId, selector, key);
    const algorithm = key.asymmetricKeyType as DkimAlgorithm;
    const publicKey = createPublicKey(key);
    const p =
      algorithm === 'rsa'
        ? (publicKey.export({ type: 'spki', format: 'der' }) as Buffer).toString('base64')
        : // RFC 8463: the raw 32-byte key, which is the tail of the 44-byte SPKI encoding.
          (publicKey.export({ type: 'spki', format: 'der' }) as Buffer).subarray(-32).toString('base64');
    return { selector, algorithm, publicKey: p, createdAt };
  }

  private async write(domainId: string, selector: string, key: KeyObject): Promise<void> {
    await this.files.write(domainId, selector, key.export({ type: 'pkcs8', format: 'pem' }) as string);
    this.cache.set(`${domainId}/${selector}`, key);
  }
}

/** Private keys as PEM files, mode 0600, at <dir>/<domain id>/<selector>.pem. */
class PemFiles implements DkimKeyFiles {
  constructor(private readonly dir: string) {}

  read(domainId: string, selector: string): Promise<string> {
    return readFile(this.path(domainId, selector), 'utf8');
  }

  /** Written to a temporary file, fsynced and renamed, then the directory fsynced: never a torn key. */
  async write(domainId: string, selector: string, pem: string): Promise<void> {
    const dir = join(this.dir, domainId);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const path = this.path(domainId, selector);
    const temporary = `${path}.${process.pid}.tmp`;
    const file = await open(temporary, 'w', 0o600);
    try {
      await file.writeFile(pem);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, path);
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  async remove(domainId: string, selector: string): Promise<void> {
    await rm(this.path(domainId, selector), { force: true });
  }

  async removeDomain(domainId: string): Promise<void> {
    await rm(join(this.dir, domainId), { recursive: true, force: true });
  }

  private path(domainId: string, selector: string): string {
    return join(this.dir, domainId, `${selector}.pem`);
  }
}
