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
