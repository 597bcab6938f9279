import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import { generate } from 'selfsigned';

export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
  /** A self-signed pair was made just now. */
  created: boolean;
}

/**
 * The listeners' certificate and key. When neither file exists, a self-signed certificate for
 * `hostname` is made and written (the key readable by its owner only); when only one exists,
 * that is a configuration error, never silently replaced.
 */
export async function loadOrCreateCertificate(certPath: string, keyPath: string, hostname: string): Promise<TlsFiles> {
  const haveCert = existsSync(certPath);
  const haveKey = existsSync(keyPath);
  if (haveCert && haveKey) return { cert: readFileSync(certPath), key: readFileSync(keyPath), created: false };
  if (haveCert !== haveKey) throw new Error(`${haveCert ? keyPath : certPath} is missing while ${haveCert ? certPath : keyPath} exists: give both or neither`);
  const pems = await generate([{ name: 'commonName', value: hostname }], {
    // EC keys: made in milliseconds, accepted by every current TLS client.
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 825 * 86_400_000),
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: hostname }] }],
  });
  mkdirSync(dirname(certPath), { recursive: true });
  mkdirSync(dirname(keyPath), { recursive: true });
  writeFileSync(keyPath, pems.private, { mode: 0o600 });
  writeFileSync(certPath, pems.cert);
  return { cert: Buffer.from(pems.cert), key: Buffer.from(pems.private), created: true };
}

/**
 * The certificate and key as they are on disk now, for a reload (SIGHUP): both must be readable
 * and be a pair, or this throws and the listeners keep the pair they have. Never creates one.
 */
export function readCertificate(certPath: string, keyPath: string): { cert: Buffer; key: Buffer } {
  const read = (path: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
    }
  };
  const pair = { cert: read(certPath), key: read(keyPath) };
  try {
    createSecureContext(pair);
  } catch (err) {
    throw new Error(`${certPath} and ${keyPath} are not a certificate and its key: ${(err as Error).message}`, { cause: err });
  }
  return pair;
}
