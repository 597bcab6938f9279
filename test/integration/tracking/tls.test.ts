import { expect } from 'chai';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { get } from 'node:https';
import { tmpdir } from 'node:os';
import type { TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { writeTestCertificate } from '../../helpers/tls.ts';

/** The tracking listener serving HTTPS itself (`tracking.tls`), with a certificate from keys/. */
describe('tracking listener over HTTPS', function () {
  this.timeout(30_000);
  let dir: string;
  let server: TestServer | null = null;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-tracking-tls-'));
  });
  afterEach(async () => {
    await server?.stop();
    server = null;
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers over TLS with the configured certificate', async () => {
    const { cert } = await writeTestCertificate(join(dir, 'keys'));
    copyFileSync(join(dir, 'keys/tls/api.crt'), join(dir, 'keys/tls/tracking.crt'));
    copyFileSync(join(dir, 'keys/tls/api.key'), join(dir, 'keys/tls/tracking.key'));
    server = await startServer({ dir, config: { tracking: { port: 0, tls: { enabled: true } } } });
    const base = new URL(server.daemon.parts.tracking.url!);
    expect(base.protocol).to.equal('https:');
    const res = await new Promise<{ status: number; body: string; authorized: boolean }>((resolve, reject) => {
      get({ host: '127.0.0.1', port: base.port, path: '/o/not-a-token', servername: 'localhost', ca: cert, headers: { host: 'track.example.com' } }, (r) => {
        const authorized = (r.socket as TLSSocket).authorized;
        let body = '';
        r.on('data', (c: Buffer) => (body += c.toString()));
        r.on('end', () => resolve({ status: r.statusCode!, body, authorized }));
      }).on('error', reject);
    });
    expect(res.authorized).to.equal(true);
    // A token that does not verify is a 404, over TLS as over HTTP.
    expect(res.status).to.equal(404);
  });

  it('refuses to start when the certificate is missing, naming it', async () => {
    let error: Error | null = null;
    try {
      server = await startServer({ dir, config: { tracking: { port: 0, tls: { enabled: true } } } });
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).to.match(/tracking\.crt/);
  });
});
