import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { RawSmtp, plainToken, type SmtpReply } from '../../helpers/raw-smtp.ts';

/** Only this address may AUTH in clear here; the others stand for clients on another host. */
const LISTED = '127.0.0.1';

const offersAuth = (ehlo: SmtpReply) => ehlo.lines.some((l) => /^AUTH\b/i.test(l));
const offersStarttls = (ehlo: SmtpReply) => ehlo.lines.includes('STARTTLS');

describe('SMTP submission: AUTH only after TLS', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let starttlsPort: number;
  let tlsPort: number;
  let credential: { username: string; password: string };
  const open: RawSmtp[] = [];

  before(async () => {
    bed = await startMessageBed({
      smtp: { submission: { enabled: true, plain_auth_from: [`${LISTED}/32`], auth_failures: { limit: 3, window_seconds: 300 } } },
    });
    const ports = bed.server.daemon.parts.submission.ports;
    starttlsPort = ports.find((p) => !p.secure)!.port;
    tlsPort = ports.find((p) => p.secure)!.port;
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body: { name: 'app', scope: 'global' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    credential = { username: res.body.username, password: res.body.password };
  });
  after(async () => {
    await bed?.stop();
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.close();
  });

  async function connect(localAddress: string, options: { tls?: boolean } = {}): Promise<RawSmtp> {
    const { client, greeting } = await RawSmtp.open(options.tls ? tlsPort : starttlsPort, { localAddress, tls: options.tls });
    open.push(client);
    expect(greeting.code).to.equal(220);
    return client;
  }

  it('does not offer AUTH before STARTTLS to a client outside plain_auth_from, and offers it after TLS on both listeners', async () => {
    const client = await connect('127.0.0.2');
    const clear = await client.command('EHLO client.example');
    expect(clear.code).to.equal(250);
    expect(offersStarttls(clear), clear.raw).to.equal(true);
    expect(offersAuth(clear), clear.raw).to.equal(false);
    // Withholding AUTH does not lift the rule that mail needs it.
    expect((await client.command('MAIL FROM:<app@example.com>')).code).to.equal(530);

    await client.starttls();
    const secured = await client.command('EHLO client.example');
    expect(secured.code).to.equal(250);
    expect(secured.lines).to.include('AUTH PLAIN LOGIN');
    expect(offersStarttls(secured), secured.raw).to.equal(false);
    expect((await client.command(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`)).code).to.equal(235);

    const implicit = await connect('127.0.0.2', { tls: true });
    const ehlo = await implicit.command('EHLO client.example');
    expect(ehlo.lines).to.include('AUTH PLAIN LOGIN');
  });

  it('offers AUTH without TLS to a client in plain_auth_from, beside one outside it on the same listener', async () => {
    const listed = await connect(LISTED);
    const unlisted = await connect('127.0.0.2');
    const [forListed, forUnlisted] = await Promise.all([listed.command('EHLO app.local'), unlisted.command('EHLO client.example')]);
    expect(forListed.lines, forListed.raw).to.include('AUTH PLAIN LOGIN');
    expect(offersStarttls(forListed), forListed.raw).to.equal(true);
    expect(offersAuth(forUnlisted), forUnlisted.raw).to.equal(false);
    expect((await listed.command(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`)).code).to.equal(235);
  });

  it('refuses AUTH PLAIN in clear with 538 before reading the token, and does not count it as a failed login', async () => {
    const from = '127.0.0.5';
    const client = await connect(from);
    await client.command('EHLO client.example');
    // Not even base64: a server that decoded the token would answer 501 instead.
    const garbage = await client.command('AUTH PLAIN !!!not-a-token!!!');
    expect(garbage.code, garbage.raw).to.equal(538);
    expect(garbage.raw).to.equal('538 5.7.11 Encryption required: send STARTTLS first, then AUTH; the credentials were not used');
    // The right password in clear is refused the same way and does not log the session in.
    expect((await client.command(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`)).code).to.equal(538);
    expect((await client.command('MAIL FROM:<app@example.com>')).code).to.equal(530);
    // Past the failure limit (3) in clear: none of it counts against the client or the credential.
    for (let i = 0; i < 4; i++) {
      expect((await client.command(`AUTH PLAIN ${plainToken(credential.username, 'wrong')}`)).code).to.equal(538);
    }
    await client.starttls();
    await client.command('EHLO client.example');
    expect((await client.command(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`)).code).to.equal(235);
  });

  it('refuses AUTH LOGIN in clear with 538 at once instead of asking for the username', async () => {
    const client = await connect('127.0.0.2');
    await client.command('EHLO client.example');
    const login = await client.command('AUTH LOGIN');
    expect(login.code, login.raw).to.equal(538);
    // The next line is a command again, not a username: it gets a reply of its own.
    expect((await client.command('NOOP')).code).to.equal(250);
  });
});
