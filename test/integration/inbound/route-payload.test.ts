import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { createTransport } from 'nodemailer';
import { signPayload } from '../../../src/delivery/signing.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * A route POST of several MiB, made as a list of buffers and signed part by part: it arrives as
 * the JSON text JSON.stringify makes of its payload, byte for byte, with a signature over those
 * bytes that the `standardwebhooks` package verifies.
 */
describe('routes: a payload of several MiB', function () {
  this.timeout(60_000);
  let bed: MessageBed;
  let receiver: WebhookReceiver;

  before(async () => {
    receiver = await WebhookReceiver.start();
    bed = await startMessageBed({ smtp: { inbound: { enabled: true, port: 0 } }, webhooks: { allow_networks: ['127.0.0.0/8'] } });
  });
  after(async () => {
    await bed?.stop();
    await receiver?.stop();
  });

  it('posts the bytes JSON.stringify makes of the payload, signed over those bytes', async () => {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/routes`, {
      body: { name: 'large', url: receiver.url('/large'), recipient: 'large@example.com', attachments: true, headers: true, strip_replies: true },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const secret = res.body.secret as string;
    receiver.secrets.set('/large', secret);

    const binary = randomBytes(3 * 1024 * 1024 + 2);
    // Text past several of the payload writer's slices, with characters JSON escapes and pairs of UTF-16 surrogates.
    const text = 'Grüße "quoted" \\ back\tslash 😀 emoji line\n'.repeat(40_000);
    const info = await createTransport({ host: '127.0.0.1', port: bed.server.daemon.parts.inbound.port!, secure: false, ignoreTLS: true }).sendMail({
      from: 'Customer <c@example.net>',
      to: 'large@example.com',
      subject: 'Große Datei',
      text,
      html: `<p>${text.slice(0, 300_000)}</p>`,
      attachments: [
        { filename: 'data.bin', content: binary },
        { filename: 'nötig.txt', content: 'small' },
      ],
    });
    expect(info.response).to.match(/^250 /);
    await receiver.until((r) => r.length === 1, 30_000);
    const [d] = receiver.received;
    expect(d!.payload, d!.error).to.not.equal(null);

    const bytes = Buffer.from(d!.body, 'utf8');
    expect(bytes.length).to.be.above(6 * 1024 * 1024);
    expect(Number(d!.headers['content-length'])).to.equal(bytes.length);
    expect(bytes.equals(Buffer.from(JSON.stringify(JSON.parse(d!.body)), 'utf8')), 'the bytes JSON.stringify makes').to.equal(true);
    expect(d!.headers['webhook-signature']).to.equal(signPayload(secret, String(d!.headers['webhook-id']), Number(d!.headers['webhook-timestamp']), bytes));

    const data = d!.payload!.data;
    expect(data.subject).to.equal('Große Datei');
    expect(data.plain_body).to.equal(text);
    expect(data.html_body).to.equal(`<p>${text.slice(0, 300_000)}</p>`);
    const attachments = data.attachments as Array<Record<string, string>>;
    expect(attachments.map((a) => a.filename)).to.deep.equal(['data.bin', 'nötig.txt']);
    expect(Buffer.from(attachments[0]!.data!, 'base64').equals(binary)).to.equal(true);
    expect(Buffer.from(attachments[1]!.data!, 'base64').toString()).to.equal('small');
    // The header map has the fields as they came, encoded words and all.
    expect(data.headers.Subject).to.equal('=?UTF-8?Q?Gro=C3=9Fe_Datei?=');
  });
});
