import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { RawSmtp, plainToken } from '../../helpers/raw-smtp.ts';

/**
 * SMTP submission and the inbound MX while the store cannot take writes: Postfix's temporary
 * `452 4.3.1 Insufficient system storage`, at MAIL FROM (before any work is done) while the
 * storage guard is closed, and at the end of DATA when the write itself failed.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const diskFull = () => new Error('IO error: /data/000123.log: No space left on device');

describe('SMTP while the store refuses writes', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let credential: { username: string; password: string };

  before(async () => {
    bed = await startMessageBed({
      ...POLLING,
      storage: { check_interval_ms: 100, min_free_bytes: 0, min_free_percent: 0 },
      smtp: { submission: { enabled: true, plain_auth_from: ['127.0.0.1/32'] }, inbound: { enabled: true, port: 0 } },
    });
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body: { name: 'app', scope: 'global' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    credential = { username: res.body.username, password: res.body.password };
  });
  after(async () => {
    bed?.server.daemon.core.store.injectFault(null);
    await bed?.stop();
  });
  afterEach(async () => {
    const store = bed.server.daemon.core.store;
    store.injectFault(null);
    const deadline = Date.now() + 10_000;
    while (!bed.server.daemon.storage.ok && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  });

  async function submission(): Promise<RawSmtp> {
    const port = bed.server.daemon.parts.submission.ports.find((p) => !p.secure)!.port;
    const { client } = await RawSmtp.open(port, { localAddress: '127.0.0.1' });
    await client.command('EHLO client.example');
    const auth = await client.command(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`);
    expect(auth.code, auth.raw).to.equal(235);
    return client;
  }

  async function inbound(): Promise<RawSmtp> {
    const { client } = await RawSmtp.open(bed.server.daemon.parts.inbound.port!, { localAddress: '127.0.0.1' });
    await client.command('EHLO sender.example');
    return client;
  }

  it('answers MAIL FROM on submission and inbound with 452 4.3.1 while the guard is closed, and 250 again once writes land', async () => {
    const store = bed.server.daemon.core.store;
    store.injectFault(() => diskFull(), { sticky: true });
    bed.server.daemon.storage.writeFailed(diskFull());
    const sub = await submission();
    const refused = await sub.command('MAIL FROM:<app@example.com>');
    expect(refused.raw).to.equal('452 4.3.1 Insufficient system storage');
    const mx = await inbound();
    const refusedIn = await mx.command('MAIL FROM:<someone@elsewhere.example>');
    expect(refusedIn.raw).to.equal('452 4.3.1 Insufficient system storage');
    store.injectFault(null);
    const deadline = Date.now() + 10_000;
    while (!bed.server.daemon.storage.ok && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect((await sub.command('MAIL FROM:<app@example.com>')).code).to.equal(250);
    expect((await mx.command('MAIL FROM:<someone@elsewhere.example>')).code).to.equal(250);
    sub.close();
    mx.close();
  });

  it('answers a DATA whose write fails with 452 4.3.1, not 451', async () => {
    const sub = await submission();
    expect((await sub.command('MAIL FROM:<app@example.com>')).code).to.equal(250);
    expect((await sub.command('RCPT TO:<rcpt@example.org>')).code).to.equal(250);
    expect((await sub.command('DATA')).code).to.equal(354);
    // The disk fills while the message is sent.
    bed.server.daemon.core.store.injectFault(() => diskFull());
    const stored = await sub.command('From: App <app@example.com>\r\nTo: rcpt@example.org\r\nSubject: full\r\n\r\nbody\r\n.');
    expect(stored.raw).to.equal('452 4.3.1 Insufficient system storage');
    sub.close();
  });
});
