import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTransport } from 'nodemailer';
import { main } from '../../../src/cli/main.ts';
import { verifyDkim } from '../../helpers/domains.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * The header From of mail submitted over SMTP must be at a domain the credential may send from
 * (550 5.7.1 otherwise), and the message is signed with that domain, so it aligns for DMARC. The
 * operator relaxes it per account for forwarding set-ups (`postilion accounts smtp-header-from`).
 */
const SECOND = 'second.example';

describe('SMTP submission: the header From aligns with what Postilion signs', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let port: number;
  let configPath: string;
  const credentials: Record<'global' | 'scoped', { username: string; password: string }> = {
    global: { username: '', password: '' },
    scoped: { username: '', password: '' },
  };

  before(async () => {
    sink = await startSink();
    bed = await startMessageBed({
      api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } },
      delivery: { enabled: true, mx_port: sink.port },
      smtp: { submission: { enabled: true, plain_auth_from: ['127.0.0.1/32'] } },
    });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    const second = await bed.create(SECOND);
    bed.publish(second);
    expect((await bed.recheck(SECOND)).body.dns_valid).to.equal(true);
    for (const [name, body] of [
      ['global', { name: 'app', scope: 'global' }],
      ['scoped', { name: 'scoped', scope: 'scoped', domains: ['example.com'] }],
    ] as const) {
      const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      credentials[name] = { username: res.body.username, password: res.body.password };
    }
    port = bed.server.daemon.parts.submission.ports.find((p) => !p.secure)!.port;
    configPath = join(bed.server.dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(bed.server.dir, 'data')}\nkeys:\n  dir: ${join(bed.server.dir, 'keys')}\nlog:\n  level: silent\n`);
  });
  after(async () => {
    await bed?.stop();
    await sink?.close();
  });
  beforeEach(() => {
    sink.received.length = 0;
  });

  /** Submits as `who` with MAIL FROM app@example.com; the final reply, or the refusal. */
  async function submit(who: 'global' | 'scoped', from: string, subject: string): Promise<{ code: number; text: string }> {
    const transport = createTransport({
      host: '127.0.0.1',
      port,
      secure: false,
      ignoreTLS: true,
      auth: { user: credentials[who].username, pass: credentials[who].password },
    });
    const raw = [`From: ${from}`, 'To: rcpt@example.org', `Subject: ${subject}`, '', 'Hello.', ''].join('\r\n');
    try {
      const info = await transport.sendMail({ envelope: { from: 'app@example.com', to: ['rcpt@example.org'] }, raw });
      return { code: 250, text: info.response };
    } catch (err) {
      const e = err as { responseCode?: number; response?: string; message: string };
      return { code: e.responseCode ?? 0, text: e.response ?? e.message };
    } finally {
      transport.close();
    }
  }

  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  /** The d= of the DKIM signatures of the one message the sink received, verified. */
  async function signedBy(): Promise<string[]> {
    const [received] = await sink.waitFor(1);
    const verified = await verifyDkim(bed, received!.raw);
    expect(verified.map((v) => v.result)).to.include('pass');
    return [...received!.raw.matchAll(/^DKIM-Signature:[^]*?\bd=([^;\s]+)/gim)].map((m) => m[1]!);
  }

  it('refuses a header From at a domain not of the account, or not of a scoped credential, with 550 5.7.1', async () => {
    const foreign = await submit('global', 'Someone <someone@elsewhere.test>', 'Foreign');
    expect(foreign.code).to.equal(550);
    expect(foreign.text).to.match(
      /^550 5\.7\.1 the From header must be at a domain this credential may send from: sender domain elsewhere\.test is not a domain/,
    );
    const scoped = await submit('scoped', `News <news@${SECOND}>`, 'Scoped');
    expect(scoped.code).to.equal(550);
    expect(scoped.text).to.contain(`5.7.1 the From header must be at a domain this credential may send from: this credential may not send from ${SECOND}`);
    const several = await submit('global', `a@example.com, b@${SECOND}`, 'Several');
    expect(several.code).to.equal(550);
    expect(several.text).to.contain('5.7.1 the From header names addresses at more than one domain');
    await new Promise((r) => setTimeout(r, 200));
    expect(sink.received).to.have.length(0);
  });

  it('signs with the header From domain when it differs from MAIL FROM, so the message aligns', async () => {
    const sent = await submit('global', `News <news@${SECOND}>`, 'Aligned');
    expect(sent.code, sent.text).to.equal(250);
    expect(await signedBy()).to.deep.equal([SECOND]);
  });

  it('an account set to any by the operator sends a foreign header From, signed with the MAIL FROM domain; own refuses it again', async () => {
    const relaxed = await cli('accounts', 'smtp-header-from', bed.server.accountId, 'any');
    expect(relaxed.code, relaxed.err).to.equal(0);
    expect(relaxed.out).to.equal(`${bed.server.accountId}\tsmtp_header_from=any\n`);
    const sent = await submit('global', 'Someone <someone@elsewhere.test>', 'Forwarded');
    expect(sent.code, sent.text).to.equal(250);
    expect(await signedBy()).to.deep.equal(['example.com']);
    // Not a field of the API's account object.
    const account = await bed.api('GET', `/v2/accounts/${bed.server.accountId}`);
    expect(JSON.stringify(account.body)).to.not.contain('header_from');

    expect((await cli('accounts', 'smtp-header-from', bed.server.accountId, 'own')).out).to.equal(`${bed.server.accountId}\tsmtp_header_from=own\n`);
    expect((await submit('global', 'Someone <someone@elsewhere.test>', 'Again')).code).to.equal(550);
    const bad = await cli('accounts', 'smtp-header-from', bed.server.accountId, 'maybe');
    expect(bad.code).to.not.equal(0);
    expect(bad.err).to.contain('"maybe" is neither own nor any');
  });
});
