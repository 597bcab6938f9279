import { expect } from 'chai';
import { X509Certificate } from 'node:crypto';
import { generate } from 'selfsigned';
import type { CertificateSpec } from '../../../src/doctor/certificates.ts';
import { judgeServed } from '../../../src/doctor/served-certificates.ts';

const DAY = 86_400_000;
const spec: CertificateSpec = { name: 'api', certPath: '/keys/tls/api.crt', keyPath: '/keys/tls/api.key', madeOnStart: false, hostname: null };

async function certificate(from: number, to: number): Promise<X509Certificate> {
  const pems = await generate([{ name: 'commonName', value: 'doctor.test' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(from),
    notAfterDate: new Date(to),
  });
  return new X509Certificate(pems.cert);
}

describe('doctor: the certificate a running daemon serves', () => {
  const now = Date.now();

  it('is OK when it is the file, WARN when the file was renewed and not reloaded, FAIL when what it serves expired', async () => {
    const onDisk = await certificate(now - DAY, now + 90 * DAY);
    const old = await certificate(now - 90 * DAY, now + 3 * DAY);
    const expired = await certificate(now - 90 * DAY, now - DAY);
    const files = { kind: 'read' as const, cert: onDisk, keyMatches: true };
    expect(judgeServed(spec, files, '127.0.0.1:8443', { cert: onDisk }, now)!.status).to.equal('OK');
    expect(judgeServed(spec, files, '127.0.0.1:8443', { cert: old }, now)!.status).to.equal('WARN');
    expect(judgeServed(spec, files, '127.0.0.1:8443', { cert: old }, now)!.reason).to.match(/: reload it \(SIGHUP\) or restart it to serve the file's$/);
    // The tracking listener's certificate is read at start only.
    expect(judgeServed({ ...spec, name: 'tracking' }, files, '127.0.0.1:8081', { cert: old }, now)!.reason).to.match(/: restart it to serve the file's$/);
    const check = judgeServed(spec, files, '127.0.0.1:8443', { cert: expired }, now)!;
    expect(check.status).to.equal('FAIL');
    expect(check.reason).to.match(/what it serves has expired$/);
  });

  it('warns when the handshake fails, and leaves an unreadable file to its own check', async () => {
    expect(judgeServed(spec, { kind: 'none' }, '127.0.0.1:8443', { error: 'ECONNRESET' }, now)).to.deep.equal({
      check: 'tls api served',
      status: 'WARN',
      reason: 'the certificate the running daemon serves on 127.0.0.1:8443 could not be read: ECONNRESET',
    });
    expect(judgeServed(spec, { kind: 'unreadable', reason: 'EACCES' }, '127.0.0.1:8443', { cert: await certificate(now - DAY, now + DAY) }, now)).to.equal(
      null,
    );
  });
});
