import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { createTransport } from 'nodemailer';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { InboundRepo } from '../../../src/store/inbound-repo.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * Mail for routes is authenticated once, at the end of DATA, through the DNS server on loopback:
 * SPF, DKIM, DMARC and ARC with mailauth. The verdict is stored with the message and prepended as
 * Authentication-Results and Received-SPF; the route POSTs use it, whatever DNS says later.
 * `smtp.inbound.dmarc_policy: enforce` refuses p=reject failures with 550 5.7.1 and marks
 * p=quarantine failures in the payload; monitor only records.
 */
const SENDER = 'sender.test';
const SELECTOR = 'mail';
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const DKIM_RECORD = `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;

function message(from: string, subject: string, body = 'Hello there.'): Buffer {
  return Buffer.from(
    [
      `From: Alice <${from}>`,
      'To: support@example.com',
      `Subject: ${subject}`,
      `Message-ID: <${subject.replace(/\W/g, '')}@${SENDER}>`,
      'Date: Fri, 27 Nov 2026 10:00:00 +0000',
      '',
      body,
      '',
    ].join('\r\n'),
  );
}

async function signed(raw: Buffer): Promise<Buffer> {
  // The signer takes its keys as `signatureData` (its bundled types name only the older top-level fields).
  const options = {
    canonicalization: 'relaxed/relaxed',
    algorithm: 'rsa-sha256',
    signatureData: [{ signingDomain: SENDER, selector: SELECTOR, privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) }],
  } as unknown as Parameters<typeof dkimSign>[1];
  const { signatures } = await dkimSign(raw, options);
  return Buffer.concat([Buffer.from(signatures), raw]);
}

/** A daemon with a route for support@example.com (headers on) to `receiver`. */
async function startBed(dmarcPolicy: 'monitor' | 'enforce', receiver: WebhookReceiver): Promise<MessageBed> {
  const b = await startMessageBed({
    api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } },
    smtp: { inbound: { enabled: true, port: 0, dmarc_policy: dmarcPolicy } },
    webhooks: { allow_networks: ['127.0.0.0/8'] },
  });
  try {
    const res = await b.api('POST', `/v2/accounts/${b.server.accountId}/routes`, {
      body: { name: 'support', url: receiver.url('/support'), recipient: 'support@example.com', headers: true },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set('/support', res.body.secret);
    return b;
  } catch (err) {
    await b.stop();
    throw err;
  }
}

/** The sender's domain: SPF for loopback, a DKIM key, DMARC p=reject. */
function publishSender(b: MessageBed): void {
  b.dns.zone.set(SENDER, 'TXT', ['v=spf1 ip4:127.0.0.1 -all']);
  b.dns.zone.set(`${SELECTOR}._domainkey.${SENDER}`, 'TXT', [DKIM_RECORD]);
  b.dns.zone.set(`_dmarc.${SENDER}`, 'TXT', ['v=DMARC1; p=reject']);
}

for (const mode of ['enforce', 'monitor'] as const)
  describe(`inbound: mail authenticated at arrival, dmarc_policy ${mode}`, function () {
    this.timeout(30_000);
    let bed: MessageBed;
    let receiver: WebhookReceiver;
    let port: number;

    before(async () => {
      receiver = await WebhookReceiver.start();
      try {
        bed = await startBed(mode, receiver);
      } catch (err) {
        await receiver.stop();
        throw err;
      }
      port = bed.server.daemon.parts.inbound.port!;
    });
    after(async () => {
      await bed?.stop();
      await receiver?.stop();
    });
    beforeEach(() => {
      publishSender(bed);
      receiver.received.length = 0;
      receiver.answer = (d) => (d.payload ? 204 : 400);
    });

    /** Sends over SMTP from 127.0.0.1; resolves to the final reply, or the refusal's code and text. */
    async function send(envelopeFrom: string, raw: Buffer): Promise<{ code: number; text: string }> {
      const transport = createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, name: 'client.sender.test' });
      try {
        const info = await transport.sendMail({ envelope: { from: envelopeFrom, to: ['support@example.com'] }, raw });
        return { code: 250, text: info.response };
      } catch (err) {
        const e = err as { responseCode?: number; response?: string; message: string };
        return { code: e.responseCode ?? 0, text: e.response ?? e.message };
      } finally {
        transport.close();
      }
    }

    if (mode === 'enforce') {
      it('enforce: refuses unsigned mail failing p=reject with 550 5.7.1 and the reason; signed mail passes with its verdict stored and prepended', async () => {
        const b = bed;
        // Not aligned: the envelope sender is elsewhere (no SPF there) and nothing is signed.
        const refused = await send('bounces@elsewhere.test', message(`alice@${SENDER}`, 'Forged'));
        expect(refused.code).to.equal(550);
        expect(refused.text).to.match(/5\.7\.1 .*DMARC policy of sender\.test \(p=reject\)/);
        const metrics = await (await fetch(`${bed.server.daemon.parts.metrics.url}/metrics`)).text();
        expect(metrics).to.match(/^postilion_inbound_dmarc_total\{result="fail",action="reject"\} 1$/m);

        const accepted = await send('bounces@elsewhere.test', await signed(message(`alice@${SENDER}`, 'Signed')));
        expect(accepted.code, accepted.text).to.equal(250);
        await receiver.until((r) => r.length === 1);
        const p = receiver.received[0]!.payload!;
        expect(p.data.subject).to.equal('Signed');
        const ar = p.data.headers['Authentication-Results'] as string;
        expect(ar).to.match(/^mx\.postilion\.test;/);
        expect(ar).to.contain(`dkim=pass header.i=@${SENDER}`);
        expect(ar).to.contain('dmarc=pass');
        expect(p.data.headers['Received-SPF']).to.match(/^none /);
        expect(p.data).to.not.have.property('quarantine');

        const repo = new InboundRepo(b.server.daemon.core.store);
        const record = await repo.get(p.data.id);
        expect(record!.authentication).to.deep.include({ action: 'accept', results: ar, spamScore: 0 });
        expect(record!.authentication!.dmarc).to.deep.equal({ result: 'pass', domain: SENDER, policy: 'reject', pct: 100 });
        // Stored with the trace fields on top, as received below them.
        const stored = (await repo.head(record!.bodyId, 64 * 1024)).toString('latin1');
        expect(stored).to.match(/^Received-SPF: none .*\r\nAuthentication-Results: mx\.postilion\.test;/s);
        expect(stored).to.contain('DKIM-Signature:');
      });

      it('enforce: a message past 1 MiB, written to the store as it arrives, is checked as received (its DKIM body hash passes)', async () => {
        const body = Array.from({ length: 24_000 }, (_, i) => `line ${i} of a long message, long enough to be spooled`).join('\r\n');
        const raw = await signed(message(`alice@${SENDER}`, 'Large', body));
        expect(raw.length).to.be.greaterThan(1024 * 1024);
        const accepted = await send('bounces@elsewhere.test', raw);
        expect(accepted.code, accepted.text).to.equal(250);
        await receiver.until((r) => r.length === 1);
        const p = receiver.received[0]!.payload!;
        expect(p.data.headers['Authentication-Results']).to.contain('dkim=pass').and.contain('dmarc=pass');
        expect(p.data.plain_body as string).to.contain('line 23999 of a long message');
      });

      it('enforce: marks mail failing p=quarantine in the payload; a forged Authentication-Results of ours is dropped', async () => {
        const b = bed;
        b.dns.zone.set(`_dmarc.${SENDER}`, 'TXT', ['v=DMARC1; p=quarantine']);
        const forged = Buffer.concat([
          Buffer.from('Authentication-Results: mx.postilion.test; dmarc=pass header.from=sender.test\r\n'),
          message(`alice@${SENDER}`, 'Q'),
        ]);
        const accepted = await send('bounces@elsewhere.test', forged);
        expect(accepted.code, accepted.text).to.equal(250);
        await receiver.until((r) => r.length === 1);
        const p = receiver.received[0]!.payload!;
        expect(p.data.quarantine).to.equal(true);
        expect(p.data.headers['Authentication-Results']).to.contain('dmarc=fail').and.not.contain('dmarc=pass');
        const record = await new InboundRepo(b.server.daemon.core.store).get(p.data.id);
        const stored = (await new InboundRepo(b.server.daemon.core.store).head(record!.bodyId, 64 * 1024)).toString('latin1');
        expect(stored.match(/^Authentication-Results:/gim)).to.have.length(1);
      });
    } else {
      it('monitor: takes unsigned mail failing p=reject, records dmarc=fail and marks nothing', async () => {
        const accepted = await send('bounces@elsewhere.test', message(`alice@${SENDER}`, 'Monitored'));
        expect(accepted.code, accepted.text).to.equal(250);
        await receiver.until((r) => r.length === 1);
        const p = receiver.received[0]!.payload!;
        expect(p.data.headers['Authentication-Results']).to.contain('dkim=none').and.contain('dmarc=fail');
        expect(p.data).to.not.have.property('quarantine');
      });

      it('every POST of a message uses the verdict of its arrival, not DNS as it is at the POST', async () => {
        const b = bed;
        receiver.answer = () => 500;
        const accepted = await send(`bounces@${SENDER}`, await signed(message(`alice@${SENDER}`, 'Retried')));
        expect(accepted.code, accepted.text).to.equal(250);
        await receiver.until((r) => r.length === 1);
        const first = receiver.received[0]!.payload!.data.headers as Record<string, string>;
        expect(first['Authentication-Results']).to.contain('spf=pass').and.contain('dkim=pass').and.contain('dmarc=pass');

        // The failed attempt is recorded (and its retry scheduled) just after the answer.
        await new Promise((r) => setTimeout(r, 200));
        // The sender's records are gone before the retry: checked again, everything would fail.
        b.dns.zone.delete(SENDER);
        b.dns.zone.delete(`${SELECTOR}._domainkey.${SENDER}`);
        b.dns.queries = [];
        receiver.answer = () => 204;
        b.clock.advance(2000);
        await b.server.daemon.parts.jobs.engine.wake();
        await receiver.until((r) => r.length === 2);
        const second = receiver.received[1]!.payload!.data.headers as Record<string, string>;
        expect(second['Authentication-Results']).to.equal(first['Authentication-Results']);
        expect(second['Received-SPF']).to.equal(first['Received-SPF']);
        expect(b.dns.queries.filter((q) => q.includes(SENDER))).to.deep.equal([]);
      });
    }
  });
