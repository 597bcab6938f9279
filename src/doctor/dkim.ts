import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dkimMatches } from '../domains/checks.ts';
import { dkimTxt } from '../domains/dkim-keys.ts';
import type { DkimKeyRecord, DomainRecord } from '../store/records.ts';
import { codeOf, fail, ok, type Check } from './check.ts';
import { shortKey } from './dns-records.ts';
import type { Answer, Lookups } from './lookups.ts';

/** What was found on disk for one key. */
export type DiskKey =
  { kind: 'missing'; path: string } | { kind: 'unreadable'; path: string; reason: string } | { kind: 'read'; path: string; key: DkimKeyRecord };

/** Where DkimKeyStore keeps a private key: <keys.dir>/dkim/<domain id>/<selector>.pem. */
export function dkimKeyPath(dkimDir: string, domainId: string, selector: string): string {
  return join(dkimDir, domainId, `${selector}.pem`);
}

/** The `p=` value of a private key's public half, as DkimKeyStore publishes it. */
export function publicKeyValue(privateKey: KeyObject): string {
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' }) as Buffer;
  // RFC 8463: an Ed25519 key is published raw, the last 32 bytes of its SPKI encoding.
  return (privateKey.asymmetricKeyType === 'ed25519' ? spki.subarray(-32) : spki).toString('base64');
}

/** Reads the private key of `record` from disk and derives what DNS should publish for it. */
export async function readDiskKey(dkimDir: string, domainId: string, record: DkimKeyRecord): Promise<DiskKey> {
  const path = dkimKeyPath(dkimDir, domainId, record.selector);
  let pem: string;
  try {
    pem = await readFile(path, 'utf8');
  } catch (err) {
    if (codeOf(err) === 'ENOENT') return { kind: 'missing', path };
    return { kind: 'unreadable', path, reason: codeOf(err) };
  }
  try {
    const key = createPrivateKey({ key: pem, format: 'pem' });
    const algorithm = key.asymmetricKeyType;
    if (algorithm !== 'rsa' && algorithm !== 'ed25519') return { kind: 'unreadable', path, reason: `a ${algorithm} key, not RSA or Ed25519` };
    return { kind: 'read', path, key: { ...record, algorithm, publicKey: publicKeyValue(key) } };
  } catch (err) {
    return { kind: 'unreadable', path, reason: `not a PEM private key (${(err as Error).message})` };
  }
}

/**
 * The verdict on one active key: FAIL when its private key is missing or unreadable (mail from
 * the domain cannot be signed), when it is not the key the domain's record names, when DNS
 * cannot be asked, or when the TXT record at its selector does not publish it; OK otherwise.
 */
export function judgeDkim(domain: DomainRecord, record: DkimKeyRecord, disk: DiskKey, answer: Answer, via: string): Check {
  const name = `dkim ${domain.name} ${record.selector}`;
  const host = `${record.selector}._domainkey.${domain.name}`;
  switch (disk.kind) {
    case 'missing':
      return fail(name, `the private key ${disk.path} is missing: mail from ${domain.name} cannot be signed`);
    case 'unreadable':
      return fail(name, `the private key ${disk.path} cannot be read: ${disk.reason}`);
    case 'read':
      break;
  }
  const onDisk = disk.key;
  if (onDisk.algorithm !== record.algorithm || onDisk.publicKey !== record.publicKey) {
    return fail(name, `${disk.path} is not the ${record.algorithm} key the domain's record names (the store and keys.dir disagree)`);
  }
  const asked = `(asked ${via})`;
  if ('error' in answer) return fail(name, `TXT ${host}: ${answer.error} ${asked}`);
  if (answer.values.length === 0) return fail(name, `no TXT record at ${host}: publish "${dkimTxt(onDisk)}" ${asked}`);
  if (!dkimMatches(answer.values, onDisk)) {
    return fail(
      name,
      `TXT ${host} does not publish the key on disk (${shortKey(dkimTxt(onDisk))}): it has ${answer.values.map((v) => `"${shortKey(v)}"`).join(', ')} ${asked}`,
    );
  }
  return ok(name, `the ${onDisk.algorithm === 'rsa' ? 'RSA' : 'Ed25519'} key on disk (${disk.path}) is the one published at ${host} ${asked}`);
}

/** Every active key of the domain: on disk, and the same as DNS publishes. */
export async function checkActiveDkim(domain: DomainRecord, dkimDir: string, lookups: Lookups): Promise<Check[]> {
  return Promise.all(
    domain.dkim.active.keys.map(async (record) => {
      const [disk, answer] = await Promise.all([readDiskKey(dkimDir, domain.id, record), lookups.txt(`${record.selector}._domainkey.${domain.name}`)]);
      return judgeDkim(domain, record, disk, answer, lookups.via);
    }),
  );
}
