import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTransport } from 'nodemailer';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { RawSmtp } from '../../helpers/raw-smtp.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * The inbound MX taking in what comes back: bounces to VERP return paths (RFC 3464 reports of
 * several MTAs, a non-standard bounce, auto-replies), feedback-loop complaints, and refusing
 * everything else. Real SMTP clients (nodemailer and a bare one) on loopback.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '../../fixtures/bounces');
const FIXTURE_TOKEN = 'bounces+01a1fdfb344872909b0f9bd172324b836a1b2c3d4e5f6071@rp.example.com';
const FIXTURE_MESSAGE_ID = '<01a1fdfb-3448-7290-b0f9-bd172324b836@example.com>';

describe('inbound bounces and complaints', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let port: number;

  beforeEach(async () => {
    sink = await startSink();
    bed = await startMessageBed({ ...POLLING, delivery: { enabled: true, mx_port: sink.port }, smtp: { inbound: { enabled: true, port: 0 } } });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    port = bed.server.daemon.parts.inbound.port!;
  });
  afterEach(async () => {
    await bed.stop();
    await sink.close();
  });

  /** Sends one message to `to` and waits until it is delivered; its id and VERP return path. */
  async function delivered(to: string): Promise<{ id: string; uuid: string; returnPath: string; messageIdHeader: string }> {
    const res = await bed.send({ recipients: [{ email: to }] });
    const id = res.body.data[0].id as string;
    const uuid = id.slice(1, id.indexOf('@'));
    await bed.until(id, 'Delivered');
    const got = sink.received.find((r) => r.to[0] === to)!;
    return { id, uuid, returnPath: got.from, messageIdHeader: id };
  }

  /** A fixture with the message's own return path, recipient and Message-ID in it. */
  function fixture(name: string, m: { returnPath: string; messageIdHeader: string }, recipient: string, fixtureRecipient: string): string {
    return readFileSync(join(FIXTURES, name), 'latin1')
      .replaceAll(FIXTURE_TOKEN, m.returnPath)
      .replaceAll(FIXTURE_MESSAGE_ID, m.messageIdHeader)
      .replaceAll(fixtureRecipient, recipient);
  }

  async function mail(to: string, raw: string, from = ''): Promise<{ rcpt: number; data?: number; text: string }> {
    const { client } = await RawSmtp.open(port, { localAddress: '127.0.0.1' });
    try {
      await client.command('EHLO mx.example.org');
      await client.command(`MAIL FROM:<${from}>`);
      const rcpt = await client.command(`RCPT TO:<${to}>`);
      if (rcpt.code !== 250) return { rcpt: rcpt.code, text: rcpt.raw };
      await client.command('DATA');
      client.write(raw.endsWith('\r\n') ? raw : `${raw}\r\n`);
      const data = await client.command('.');
      return { rcpt: rcpt.code, data: data.code, text: data.raw };
    } finally {
      client.close();
    }
  }

  const events = async (type: string) => new EventsRepo(bed.server.daemon.core.store).recent(bed.server.accountId, 100, type);

  for (const [file, fixtureRecipient, classification] of [
    ['postfix.eml', 'ann@example.org', 'InvalidRecipient'],
    ['exim.eml', 'bob@example.net', 'InactiveMailbox'],
    ['exchange.eml', 'carol@example.com', 'InvalidRecipient'],
    ['gmail.eml', 'dave@example.org', 'InvalidRecipient'],
  ] as const) {
    it(`a late ${file.replace('.eml', '')} bounce makes a delivered message Bounced, with its event and a suppression; no DSN answers it`, async () => {
      const m = await delivered('late@example.org');
      const sent = sink.received.length;
      const answer = await mail(m.returnPath, fixture(file, m, 'late@example.org', fixtureRecipient));
      expect(answer.data, answer.text).to.equal(250);
      const message = await bed.until(m.id, 'Bounced');
      expect(message.bounce_classification).to.equal(classification);
      expect(message.delivery_attempts.at(-1).log).to.match(/^bounce received: 5\./);
      const bounced = await events('message.bounced');
      expect(bounced).to.have.length(1);
      expect(bounced[0]!.data).to.not.have.property('delivery_attempt');
      expect(bounced[0]!.data).to.include({ recipient: 'late@example.org', event: 'on_bounced' });
      const suppressed = await bed.api('GET', `/v2/accounts/${bed.server.accountId}/suppressions?email=late@example.org`);
      expect(suppressed.body.data).to.have.length(classification === 'InvalidRecipient' || classification === 'InactiveMailbox' ? 1 : 0);
      await new Promise((r) => setTimeout(r, 300));
      expect(sink.received.length).to.equal(sent);
    });
  }

  it('a non-standard bounce is classified by its text', async () => {
    const m = await delivered('old@example.org');
    const answer = await mail(m.returnPath, fixture('plain-bounce.eml', m, 'old@example.org', 'frank@old.example.net'));
    expect(answer.data).to.equal(250);
    expect((await bed.until(m.id, 'Bounced')).bounce_classification).to.equal('InvalidRecipient');
  });

  it('auto-replies and delay reports to a return path are taken and dropped: the message stays Delivered', async () => {
    const m = await delivered('away@example.org');
    for (const [file, who] of [
      ['out-of-office.eml', 'grace@example.org'],
      ['vacation.eml', 'heidi@example.org'],
      ['delayed.eml', 'erin@example.org'],
    ] as const) {
      expect((await mail(m.returnPath, fixture(file, m, 'away@example.org', who))).data, file).to.equal(250);
    }
    await new Promise((r) => setTimeout(r, 200));
    expect((await bed.read(m.id)).status).to.equal('Delivered');
    expect(await events('message.bounced')).to.deep.equal([]);
  });

  it('a complaint suppresses the recipient for good (protected): a wipe keeps it and says so', async () => {
    const m = await delivered('ivan@example.org');
    const raw = fixture('arf.eml', m, 'ivan@example.org', 'ivan@example.net');
    const answer = await mail('complaints@rp.example.com', raw, 'staff@hotmail.example.com');
    expect(answer.data, answer.text).to.equal(250);
    const list = await bed.api('GET', `/v2/accounts/${bed.server.accountId}/suppressions?email=ivan@example.org`);
    expect(list.body.data).to.have.length(1);
    expect(list.body.data[0]).to.include({ email: 'ivan@example.org', domain: 'example.com', protected: true });
    expect(list.body.data[0].reason).to.match(/^Complaint \(abuse\)/);
    const created = await events('suppression.created');
    expect(created.map((e) => e.data.recipient)).to.include('ivan@example.org');
    const wipe = await bed.api('DELETE', `/v2/accounts/${bed.server.accountId}/suppressions/all`);
    expect(wipe.status).to.equal(200);
    expect(wipe.body.message).to.contain('1 protected (complaint) suppression kept');
    expect((await bed.api('GET', `/v2/accounts/${bed.server.accountId}/suppressions?email=ivan@example.org`)).body.data).to.have.length(1);
  });

  it('a complaint with only the original headers finds the message by Message-ID', async () => {
    const m = await delivered('judy@example.org');
    const answer = await mail('complaints@rp.example.com', fixture('arf-headers-only.eml', m, 'judy@example.org', 'judy@example.net'));
    expect(answer.data).to.equal(250);
    const list = await bed.api('GET', `/v2/accounts/${bed.server.accountId}/suppressions?email=judy@example.org`);
    expect(list.body.data[0]).to.include({ protected: true, domain: 'example.com' });
  });

  it('refuses a forged return path, unknown domains, relaying and other addresses at the return-path host with 550, storing nothing', async () => {
    const m = await delivered('real@example.org');
    // The token's last character, changed (one return path in 16 ends in 0).
    const forged = m.returnPath.replace(/([0-9a-f])@/, (_match, c: string) => `${c === '0' ? '1' : '0'}@`);
    expect(forged).to.not.equal(m.returnPath);
    const store = bed.server.daemon.core.store;
    const before = (await store.families.inbound.keys().all()).length;
    for (const [to, reason] of [
      [forged, 'bad token'],
      ['bounces+nothex@rp.example.com', 'bad token'],
      ['postmaster@rp.example.com', 'no such address'],
      ['someone@elsewhere.example', 'relay access denied'],
      ['user@example.net', 'relay access denied'],
    ] as const) {
      const answer = await mail(to, 'Subject: x\r\n\r\nx');
      expect(answer.rcpt, to).to.equal(550);
      expect(answer.text, to).to.match(/^550 5\.7\.1 /);
      expect(answer.text, to).to.contain(reason);
    }
    // nodemailer too: the server refuses, the client reports it.
    const refused = await createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true })
      .sendMail({ from: 'x@example.net', to: 'nobody@elsewhere.example', subject: 'relay?', text: 'x' })
      .catch((err: Error) => err);
    expect((refused as Error).message).to.contain('550');
    expect((await store.families.inbound.keys().all()).length).to.equal(before);
  });
});
