import { generate } from 'selfsigned';

/** A certificate authority of the test's own, and the server certificates it issues. */
export interface TestCa {
  /** The CA certificate (PEM): what a client is told to trust. */
  cert: string;
  /** A certificate for `names` (DNS names) signed by the CA, with its key (PEM). */
  issue(names: string[]): Promise<{ cert: string; key: string }>;
}

export async function makeTestCa(): Promise<TestCa> {
  const ca = await generate([{ name: 'commonName', value: 'Postilion Test CA' }], {
    keySize: 2048,
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return {
    cert: ca.cert,
    issue: async (names) => {
      const leaf = await generate([{ name: 'commonName', value: names[0]! }], {
        keySize: 2048,
        algorithm: 'sha256',
        ca: { key: ca.private, cert: ca.cert },
        extensions: [
          { name: 'basicConstraints', cA: false },
          { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
          { name: 'extKeyUsage', serverAuth: true },
          { name: 'subjectAltName', altNames: names.map((value) => ({ type: 2, value })) },
        ],
      });
      return { cert: leaf.cert, key: leaf.private };
    },
  };
}
