import { expect } from 'chai';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { generate } from 'selfsigned';
import { Child } from '../../helpers/child.ts';

/** The SHA-256 fingerprint of the certificate a TLS handshake on `socket` (or a new connection) shows. */
function peerFingerprint(options: { port: number } | { socket: Socket }): Promise<string> {
  return new Promise((resolve, reject) => {
    const tls: TLSSocket = tlsConnect({ host: '127.0.0.1', ...options, rejectUnauthorized: false }, () => {
      resolve(tls.getPeerCertificate().fingerprint256);
      tls.destroy();
    });
    tls.once('error', reject);
  });
}

/** Reads from `socket` until a final reply line (`NNN text`) and returns it. */
function reply(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString('latin1');
      const last = buffer.split('\r\n').find((l) => /^\d{3} /.test(l));
      if (!last) return;
      socket.removeListener('data', onData);
      resolve(last);
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

/** The certificate the STARTTLS listener shows after EHLO and STARTTLS. */
async function starttlsFingerprint(port: number): Promise<string> {
  const socket = netConnect({ host: '127.0.0.1', port });
  try {
    expect(await reply(socket)).to.match(/^220 /);
    socket.write('EHLO client.test\r\n');
    expect(await reply(socket)).to.match(/^250 /);
    socket.write('STARTTLS\r\n');
    expect(await reply(socket)).to.match(/^220 /);
    return await peerFingerprint({ socket });
  } finally {
    socket.destroy();
  }
}

async function newCertificate(commonName: string): Promise<{ cert: string; key: string; fingerprint: string }> {
  const pems = await generate([{ name: 'commonName', value: commonName }], { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' });
  return { cert: pems.cert, key: pems.private, fingerprint: new X509Certificate(pems.cert).fingerprint256 };
}

describe('postilion start: SIGHUP reloads the SMTP submission certificate', function () {
  this.timeout(30_000);
  let dir: string;
  let daemon: Child;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-reload-tls-'));
    writeFileSync(
      join(dir, 'postilion.yaml'),
      `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\ndelivery:\n  enabled: false\nsmtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\n`,
    );
    daemon = new Child(['--config', join(dir, 'postilion.yaml'), 'start'], dir);
  });
  afterEach(async () => {
    await daemon.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The bound ports, from the log line of the listeners. */
  async function ports(): Promise<{ starttls: number; tls: number }> {
    const line = (await daemon.waitFor(/^.*"msg":"SMTP submission listening".*$/m))[0];
    const listed = (JSON.parse(line) as { ports: Array<{ port: number; tls: string }> }).ports;
    return { starttls: listed.find((p) => p.tls === 'starttls')!.port, tls: listed.find((p) => p.tls === 'implicit')!.port };
  }

  /** Sends SIGHUP and waits for the `n`th reload outcome in the log. */
  async function reload(n: number): Promise<string> {
    daemon.signal('SIGHUP');
    const pattern = /^.*"msg":"(configuration reloaded|reload failed, configuration unchanged)".*$/gm;
    const deadline = Date.now() + 10_000;
    for (;;) {
      const outcomes = [...daemon.stdout.matchAll(pattern)];
      if (outcomes.length >= n) return outcomes[n - 1]![0];
      if (Date.now() > deadline) throw new Error(`no reload outcome in the log:\n${daemon.stdout}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  it('shows the new certificate on both listeners after SIGHUP, and keeps the old one when the new files are not a pair', async () => {
    const { starttls, tls } = await ports();
    const certPath = join(dir, 'keys', 'tls', 'smtp.crt');
    const keyPath = join(dir, 'keys', 'tls', 'smtp.key');
    // The self-signed certificate made on this first start.
    const first = new X509Certificate(readFileSync(certPath)).fingerprint256;
    expect(await peerFingerprint({ port: tls })).to.equal(first);
    expect(await starttlsFingerprint(starttls)).to.equal(first);

    const next = await newCertificate('mail.example.test');
    writeFileSync(certPath, next.cert);
    writeFileSync(keyPath, next.key, { mode: 0o600 });
    const reloaded = JSON.parse(await reload(1)) as { msg: string; tls_reloaded: string[]; restart_needed_for: string[] };
    expect(reloaded.msg).to.equal('configuration reloaded');
    expect(reloaded.tls_reloaded).to.deep.equal(['smtp-submission']);
    expect(reloaded.restart_needed_for).to.deep.equal([]);
    expect(await peerFingerprint({ port: tls })).to.equal(next.fingerprint);
    expect(await starttlsFingerprint(starttls)).to.equal(next.fingerprint);

    // A certificate with another certificate's key: the reload fails as a whole, the listeners keep `next`.
    const other = await newCertificate('other.example.test');
    writeFileSync(certPath, other.cert);
    const failed = JSON.parse(await reload(2)) as { msg: string; err: string };
    expect(failed.msg).to.equal('reload failed, configuration unchanged');
    expect(JSON.stringify(failed.err)).to.contain('are not a certificate and its key');
    expect(await peerFingerprint({ port: tls })).to.equal(next.fingerprint);
    expect(await starttlsFingerprint(starttls)).to.equal(next.fingerprint);
  });
});
