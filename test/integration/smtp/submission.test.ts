import { expect } from 'chai';
import { createTransport, type SendMailOptions } from 'nodemailer';
import { verifyDkim } from '../../helpers/domains.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { RawSmtp, plainToken } from '../../helpers/raw-smtp.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { AccountsRepo } from '../../../src/store/accounts-repo.ts';

const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
/** Connecting from here makes the client "remote": only 127.0.0.1 may AUTH in clear in these tests. */
const REMOTE = '127.0.0.2';

interface Credential {
  id: string;
  username: string;
  password: string;
}

describe('SMTP submission', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let credential: Credential;
  let starttlsPort: number;
  let tlsPort: number;

  before(async () => {
    sink = await startSink();
    bed = await startMessageBed({
      ...POLLING,
      delivery: { enabled: true, mx_port: sink.port },
      smtp: {
        submission: {
          enabled: true,
          plain_auth_from: ['127.0.0.1/32'],
          max_message_bytes: 64 * 1024,
          max_recipients: 3,
          auth_failures: { limit: 3, window_seconds: 300 },
        },
      },
    });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    const ports = bed.server.daemon.parts.submission.ports;
    starttlsPort = ports.find((p) => !p.secure)!.port;
    tlsPort = ports.find((p) => p.secure)!.port;
    credential = await createCredential({ name: 'app', scope: 'global' });
  });
  after(async () => {
    await bed?.stop();
    await sink?.close();
  });
  beforeEach(() => {
    sink.received.length = 0;
    sink.rcpt = () => null;
  });

  async function createCredential(body: Record<string, unknown>): Promise<Credential> {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { id: res.body.id, username: res.body.username, password: res.body.password };
  }

  function transport(options: { port?: number; secure?: boolean; user?: string; pass?: string; ignoreTLS?: boolean; forceAuth?: boolean; from?: string } = {}) {
    return createTransport({
      host: '127.0.0.1',
      port: options.port ?? starttlsPort,
      secure: options.secure ?? false,
      localAddress: options.from ?? REMOTE,
      ignoreTLS: options.ignoreTLS ?? false,
      forceAuth: options.forceAuth ?? false,
      requireTLS: !(options.ignoreTLS ?? false) && !(options.secure ?? false),
      auth: { user: options.user ?? credential.username, pass: options.pass ?? credential.password },
      tls: { rejectUnauthorized: false },
    });
  }

  const mail = (fields: Partial<SendMailOptions> = {}): SendMailOptions => ({
    from: 'App <app@example.com>',
    to: 'rcpt@example.org',
    subject: 'Relayed',
    text: 'Hello over SMTP',
    ...fields,
  });

  async function refusal(promise: Promise<unknown>): Promise<{ responseCode: number; response: string }> {
    try {
      await promise;
    } catch (err) {
      return err as { responseCode: number; response: string };
    }
    throw new Error('expected the server to refuse');
  }

  it('relays over STARTTLS: one message per recipient, delivered DKIM-signed, 250 naming the queue id', async () => {
    const t = transport();
    const info = await t.sendMail(mail({ to: ['one@example.org', 'two@example.org'] }));
    t.close();
    expect(info.response).to.match(/^250 2\.0\.0 Ok: queued as ([0-9a-f-]{36}) \(\+1 more\)$/);
    const [first, second] = await sink.waitFor(2);
    expect([first!.to[0], second!.to[0]].sort()).to.deep.equal(['one@example.org', 'two@example.org']);
    expect((await verifyDkim(bed, first!.raw)).map((v) => v.result)).to.deep.equal(['pass']);
    expect(first!.raw).to.contain('Subject: Relayed');
    // Our trace field is on top of what the client wrote: who sent it, over TLS with AUTH.
    expect(first!.raw).to.match(
      /\r\nReceived: from [^\r]+ \(\[127\.0\.0\.2\]\)\r\n\tby mx\.postilion\.test \(Postilion\) with ESMTPSA id [0-9a-f-]{36};\r\n\t\w{3}, /,
    );
    const listed = await bed.api('GET', `${bed.messages}?sender=app@example.com`);
    const mine = listed.body.data.filter((m: { subject: string }) => m.subject === 'Relayed');
    expect(mine).to.have.length(2);
    for (const m of mine) await bed.until(m.id, 'Delivered');
    const queued = /queued as ([0-9a-f-]{36})/.exec(info.response)![1]!;
    expect(mine.map((m: { id: string }) => m.id)).to.include(queued);
  });

  it('relays over implicit TLS (the 465 listener)', async () => {
    const t = transport({ port: tlsPort, secure: true });
    await t.sendMail(mail({ subject: 'Implicit TLS' }));
    t.close();
    const [got] = await sink.waitFor(1);
    expect(got!.raw).to.contain('Subject: Implicit TLS');
  });

  it('refuses AUTH before TLS from a client that is not local (538), and allows it from a local one', async () => {
    // AUTH is not offered before TLS, so a client library keeps the password and meets the 530 at MAIL FROM.
    const plain = transport({ ignoreTLS: true });
    expect((await refusal(plain.sendMail(mail()))).responseCode).to.equal(530);
    plain.close();
    const forced = transport({ ignoreTLS: true, forceAuth: true });
    const err = await refusal(forced.sendMail(mail()));
    forced.close();
    expect(err.responseCode).to.equal(538);
    expect(err.response).to.contain('STARTTLS');

    const local = transport({ ignoreTLS: true, from: '127.0.0.1' });
    await local.sendMail(mail({ subject: 'Local plain' }));
    local.close();
    await sink.waitFor(1);
  });

  it('answers 530 to MAIL FROM without AUTH', async () => {
    const t = createTransport({ host: '127.0.0.1', port: starttlsPort, localAddress: REMOTE, requireTLS: true, tls: { rejectUnauthorized: false } });
    const err = await refusal(t.sendMail(mail()));
    t.close();
    expect(err.responseCode).to.equal(530);
  });

  it('answers 535 to a wrong password and 454 once a client has failed too often', async () => {
    const from = '127.0.0.3';
    for (let i = 0; i < 3; i++) {
      const t = transport({ from, pass: 'wrong' });
      const err = await refusal(t.sendMail(mail()));
      t.close();
      expect(err.responseCode).to.equal(535);
    }
    const blocked = transport({ from });
    const err = await refusal(blocked.sendMail(mail()));
    blocked.close();
    expect(err.responseCode).to.equal(454);
    expect(err.response).to.contain('Too many failed authentication attempts');
    // Another client is not affected.
    const other = transport();
    await other.sendMail(mail());
    other.close();
  });

  it('answers 454 to a guess that waited its turn once the client has failed too often meanwhile', async () => {
    // Ten sessions of one client, each ready to AUTH, guess at the same moment. Password checks run
    // two at a time, so most guesses wait; the limit (3) must hold for those that waited too.
    const sessions = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const { client } = await RawSmtp.open(starttlsPort, { localAddress: '127.0.0.8' });
        await client.command('EHLO client.example');
        await client.starttls();
        await client.command('EHLO client.example');
        return client;
      }),
    );
    const replies = await Promise.all(sessions.map((c) => c.command(`AUTH PLAIN ${plainToken(credential.username, 'wrong')}`)));
    for (const c of sessions) c.close();
    const codes = replies.map((r) => r.code);
    // At most the limit, plus the checks already running when it was reached (two run at once).
    expect(codes.filter((c) => c === 535).length, codes.join(' ')).to.be.within(3, 4);
    expect(codes.filter((c) => c === 454).length, codes.join(' ')).to.be.at.least(6);
  });

  it('lets many sessions of one client log in at once with the right password', async () => {
    const from = '127.0.0.4';
    const transports = Array.from({ length: 12 }, () => transport({ from }));
    await Promise.all(transports.map((t, i) => t.sendMail(mail({ subject: `Parallel ${i}` }))));
    for (const t of transports) t.close();
    await sink.waitFor(12);
  });

  it('refuses with 550 a sender domain the credential may not use', async () => {
    await bed.create('other.example');
    const scoped = await createCredential({ name: 'scoped', scope: 'scoped', domains: ['other.example'] });
    const t = transport({ user: scoped.username, pass: scoped.password });
    const notAllowed = await refusal(t.sendMail(mail()));
    expect(notAllowed.responseCode).to.equal(550);
    expect(notAllowed.response).to.contain('may not send from example.com');
    const foreign = await refusal(t.sendMail(mail({ from: 'x@unknown.example' })));
    expect(foreign.responseCode).to.equal(550);
    expect(foreign.response).to.contain('not a domain of this account');
    const invalidDns = await refusal(t.sendMail(mail({ from: 'x@other.example' })));
    expect(invalidDns.responseCode).to.equal(550);
    expect(invalidDns.response).to.contain('DNS records of sender domain other.example are not valid');
    t.close();
  });

  it('refuses an oversized message with 552 and stores nothing', async () => {
    const before = (await bed.api('GET', bed.messages)).body.data.length;
    const t = transport();
    const err = await refusal(t.sendMail(mail({ subject: 'Too big', text: 'x'.repeat(80 * 1024) })));
    t.close();
    expect(err.responseCode).to.equal(552);
    expect((await bed.api('GET', bed.messages)).body.data.length).to.equal(before);
  });

  it('refuses recipients past the limit with 452 and sends to the others', async () => {
    const t = transport();
    const info = await t.sendMail(mail({ subject: 'Many', to: ['a@example.org', 'b@example.org', 'c@example.org', 'd@example.org'] }));
    t.close();
    expect(info.accepted).to.have.length(3);
    expect(info.rejected).to.deep.equal(['d@example.org']);
    expect(String((info as unknown as { rejectedErrors: Array<{ response: string }> }).rejectedErrors[0]!.response)).to.match(
      /^452 4\.5\.3 Too many recipients/,
    );
    await sink.waitFor(3);
  });

  it('applies the special headers and strips them from the delivered copy', async () => {
    const t = transport();
    await t.sendMail(
      mail({
        subject: 'Special',
        headers: { 'ahasend-tags': 'welcome,smtp', 'AhaSend-Track-Opens': 'false', 'ahasend-metadata-retention': '3' },
      }),
    );
    t.close();
    const [got] = await sink.waitFor(1);
    expect(got!.raw.toLowerCase()).to.not.contain('ahasend-');
    const listed = await bed.api('GET', `${bed.messages}?tags=smtp`);
    expect(listed.body.data).to.have.length(1);
    const message = await bed.read(listed.body.data[0].id);
    expect(message.tags).to.deep.equal(['welcome', 'smtp']);
    expect(Date.parse(message.retain_until) - Date.parse(message.created_at)).to.be.closeTo(3 * 86_400_000, 1000);
  });

  it('refuses a bad special header with 550 naming it', async () => {
    const t = transport();
    const err = await refusal(t.sendMail(mail({ headers: { 'AhaSend-Sandbox-Result': 'explode' } })));
    t.close();
    expect(err.responseCode).to.equal(550);
    expect(err.response).to.contain('ahasend-sandbox-result must be one of');
  });

  it('never delivers mail of a sandbox credential, or with AhaSend-Sandbox', async () => {
    const sandbox = await createCredential({ name: 'sandbox', scope: 'global', sandbox: true });
    const t = transport({ user: sandbox.username, pass: sandbox.password });
    await t.sendMail(mail({ subject: 'Sandboxed', headers: { 'AhaSend-Sandbox-Result': 'bounce' } }));
    t.close();
    const other = transport();
    await other.sendMail(mail({ subject: 'Sandbox header', headers: { 'AhaSend-Sandbox': 'true' } }));
    other.close();
    const ids = (await bed.api('GET', `${bed.messages}?subject=Sandboxed`)).body.data.map((m: { id: string }) => m.id);
    await bed.until(ids[0], 'Sandbox Bounced');
    const header = (await bed.api('GET', `${bed.messages}?subject=${encodeURIComponent('Sandbox header')}`)).body.data[0].id;
    await bed.until(header, 'Sandbox Delivered');
    expect(sink.received).to.have.length(0);
  });

  it('stops authenticating a deleted credential, and refuses the credential of a suspended account', async () => {
    const doomed = await createCredential({ name: 'doomed', scope: 'global' });
    const t = transport({ user: doomed.username, pass: doomed.password });
    await t.sendMail(mail());
    t.close();
    expect((await bed.api('DELETE', `/v2/accounts/${bed.server.accountId}/smtp-credentials/${doomed.id}`)).status).to.equal(200);
    const again = transport({ user: doomed.username, pass: doomed.password });
    expect((await refusal(again.sendMail(mail()))).responseCode).to.equal(535);
    again.close();

    const core = bed.server.daemon.core;
    const repo = new AccountsRepo(core.store);
    const account = (await repo.getAccount(bed.server.accountId))!;
    await core.store.commit(repo.putAccount({ ...account, status: 'suspended' }));
    try {
      const suspended = transport();
      const err = await refusal(suspended.sendMail(mail()));
      suspended.close();
      expect(err.responseCode).to.equal(535);
      expect(err.response).to.contain('suspended');
    } finally {
      await core.store.commit(repo.putAccount(account));
    }
  });

  it('refuses a 21st session from one address with 421 (max_connections_per_address, default 20), while another address still gets in', async () => {
    const { connect } = await import('node:net');
    const open = (localAddress: string) =>
      new Promise<{ socket: import('node:net').Socket; greeting: string }>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: starttlsPort, localAddress });
        socket.once('error', reject);
        socket.once('data', (d) => resolve({ socket, greeting: d.toString() }));
      });
    const held = [];
    for (let i = 0; i < 20; i++) held.push(await open('127.0.0.3'));
    expect(held.every((h) => h.greeting.startsWith('220 '))).to.equal(true);
    const extra = await open('127.0.0.3');
    expect(extra.greeting).to.match(/^421 4\.7\.0 Too many connections from 127\.0\.0\.3/);
    const other = await open('127.0.0.4');
    expect(other.greeting).to.match(/^220 /);
    for (const h of [...held, extra, other]) h.socket.destroy();
    // Once they are closed the address may connect again.
    await new Promise((r) => setTimeout(r, 100));
    const again = await open('127.0.0.3');
    expect(again.greeting).to.match(/^220 /);
    again.socket.destroy();
  });
});
