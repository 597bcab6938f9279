import { expect } from 'chai';
import type { ConfigInput } from '../../src/config/schema.ts';
import { startDomainBed, type ApiDomain, type DomainBed } from './domains.ts';
import { call, type CallOptions, type CallResult } from './harness.ts';

/** A daemon with one verified sending domain (DNS published and checked), ready to send. */
export interface MessageBed extends DomainBed {
  domain: ApiDomain;
  /** `/v2/accounts/<id>/messages` */
  messages: string;
  /** POST …/messages with a valid body, `fields` merged over it. */
  send(fields?: Record<string, unknown>, options?: CallOptions): Promise<CallResult>;
  /** POST …/messages/conversation with a valid body, `fields` merged over it. */
  converse(fields?: Record<string, unknown>, options?: CallOptions): Promise<CallResult>;
  /** POST /v1/email/send with X-Api-Key. */
  v1(body: unknown, key: string): Promise<CallResult>;
  /** GET …/messages/{id} (200 expected): the message with its content. */
  read(id: string): Promise<CallResult['body']>;
  /** Polls the read API until the message reaches `status` (the delivery engine runs on its own). */
  until(id: string, status: string, timeoutMs?: number): Promise<CallResult['body']>;
  /** How many messages GET …/messages?recipient= lists for the address. */
  countTo(recipient: string): Promise<number>;
  /** Creates a v2 key with the given scopes and returns its secret. */
  key(scopes: string[]): Promise<string>;
  /** Creates a v1 key (operator path: the CLI's) and returns its secret. */
  v1Key(scopes?: string[]): Promise<string>;
}

export const SENDER_DOMAIN = 'example.com';

export async function startMessageBed(
  config: ConfigInput = {},
  domainName = SENDER_DOMAIN,
  options: { logLines?: string[]; dir?: string } = {},
): Promise<MessageBed> {
  const bed = await startDomainBed(config, options);
  try {
    const created = await bed.create(domainName);
    bed.publish(created);
    const checked = await bed.recheck(domainName);
    expect(checked.body.dns_valid, JSON.stringify(checked.body)).to.equal(true);
    const messages = `/v2/accounts/${bed.server.accountId}/messages`;
    const base = { from: { email: `app@${domainName}`, name: 'App' }, subject: 'Hello', text_content: 'Hi there', html_content: '<p>Hi there</p>' };
    return {
      ...bed,
      domain: checked.body as ApiDomain,
      messages,
      send: (fields = {}, options = {}) =>
        bed.api('POST', messages, { ...options, body: { ...base, recipients: [{ email: 'rcpt@example.org', name: 'Rcpt' }], ...fields } }),
      converse: (fields = {}, options = {}) =>
        bed.api('POST', `${messages}/conversation`, { ...options, body: { ...base, to: [{ email: 'rcpt@example.org' }], ...fields } }),
      v1: (body, key) => call(bed.server, 'POST', '/v1/email/send', { key: null, body, headers: { 'x-api-key': key }, operationId: null }),
      read: async (id) => {
        const res = await bed.api('GET', `${messages}/${encodeURIComponent(id)}`);
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        return res.body;
      },
      until: async (id, status, timeoutMs = 10_000) => {
        const deadline = Date.now() + timeoutMs;
        for (;;) {
          const res = await bed.api('GET', `${messages}/${encodeURIComponent(id)}`);
          expect(res.status, JSON.stringify(res.body)).to.equal(200);
          if (res.body.status === status) return res.body;
          if (Date.now() > deadline) throw new Error(`message ${id} is ${res.body.status}, not ${status}: ${JSON.stringify(res.body.delivery_attempts)}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      },
      countTo: async (recipient) => {
        const res = await bed.api('GET', `${messages}?recipient=${encodeURIComponent(recipient)}`);
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        return res.body.data.length as number;
      },
      key: async (scopes) => {
        const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/api-keys`, { body: { label: `k-${scopes.join(' ')}`.slice(0, 60), scopes } });
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
        return res.body.secret_key as string;
      },
      v1Key: async (scopes = ['messages:send:all']) => {
        const { secret } = await bed.server.daemon.core.apiKeys.create(bed.server.accountId, { label: 'v1', scopes, kind: 'v1' });
        return secret;
      },
    };
  } catch (err) {
    await bed.stop();
    throw err;
  }
}
