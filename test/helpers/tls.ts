import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generate } from 'selfsigned';

/** Writes a self-signed certificate for localhost/127.0.0.1 into `<keysDir>/tls/` and returns the PEMs. */
export async function writeTestCertificate(keysDir: string): Promise<{ cert: string; key: string }> {
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keySize: 2048,
    algorithm: 'sha256',
    extensions: [
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  });
  mkdirSync(join(keysDir, 'tls'), { recursive: true });
  writeFileSync(join(keysDir, 'tls', 'api.crt'), pems.cert);
  writeFileSync(join(keysDir, 'tls', 'api.key'), pems.private, { mode: 0o600 });
  return { cert: pems.cert, key: pems.private };
}

/** A certificate and its key, PEM; `chain` is the certificate followed by its issuer's (what a server presents). */
export interface Issued {
  cert: string;
  key: string;
  chain: string;
}

/** A test certificate authority on the fly: its certificate (to trust, e.g. delivery.mta_sts.ca_file) and leaves it signs. */
export interface TestCa {
  cert: string;
  key: string;
  /** A leaf certificate for `names` (DNS names), signed by the CA. */
  issue(names: string[]): Promise<Issued>;
}

export async function startTestCa(): Promise<TestCa> {
  const ca = await generate([{ name: 'commonName', value: 'Postilion Test CA' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return {
    cert: ca.cert,
    key: ca.private,
    issue: async (names) => {
      const leaf = await generate([{ name: 'commonName', value: names[0]! }], {
        keyType: 'ec',
        algorithm: 'sha256',
        ca: { cert: ca.cert, key: ca.private },
        extensions: [
          { name: 'basicConstraints', cA: false },
          { name: 'keyUsage', digitalSignature: true, critical: true },
          { name: 'extKeyUsage', serverAuth: true },
          { name: 'subjectAltName', altNames: names.map((value) => ({ type: 2, value })) },
        ],
      });
      return { cert: leaf.cert, key: leaf.private, chain: `${leaf.cert.trim()}\n${ca.cert.trim()}\n` };
    },
  };
}
