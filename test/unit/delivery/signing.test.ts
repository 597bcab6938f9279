import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { newWebhookSecret, signPayload } from '../../../src/delivery/signing.ts';

describe('webhook signing', () => {
  it('makes secrets of aha-whsec- and 64 alphanumerics, each different', () => {
    const secrets = new Set(Array.from({ length: 200 }, newWebhookSecret));
    expect(secrets.size).to.equal(200);
    for (const secret of secrets) expect(secret).to.match(/^aha-whsec-[A-Za-z0-9]{64}$/);
  });

  it('signs "{id}.{timestamp}.{body}" with HMAC-SHA256 keyed by the secret\'s UTF-8 bytes, as the standard library in raw-key mode', () => {
    const secret = 'aha-whsec-K8vT3nB6qW1yF9mC4pR7sX2dL5gH0jZaK8vT3nB6qW1yF9mC4pR7sX2dL5gH0jZa12345678';
    const body = '{"type":"message.delivered","data":{"subject":"héllo"}}';
    const ts = 1_767_225_600;
    const ours = signPayload(secret, 'msg_2b', ts, body);
    expect(ours).to.equal(new Webhook(secret, { format: 'raw' }).sign('msg_2b', new Date(ts * 1000), body));
    expect(signPayload(secret, 'msg_2b', ts + 1, body)).to.not.equal(ours);
    expect(signPayload(secret, 'msg_2c', ts, body)).to.not.equal(ours);
    expect(signPayload(`${secret}x`, 'msg_2b', ts, body)).to.not.equal(ours);
  });
});
