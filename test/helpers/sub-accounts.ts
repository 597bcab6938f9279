import { expect } from 'chai';
import { PAST_CACHE_MS, type ApiDomain } from './domains.ts';
import { call, type CallOptions, type CallResult } from './harness.ts';
import type { MessageBed } from './messages.ts';

/** A sub account of the bed's account, with its own verified sending domain and a key for it. */
export interface SendingChild {
  id: string;
  key: string;
  api(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  /** POST …/messages from app@<its domain> to the recipients (`@example.org` by default). */
  send(recipients?: string[], fields?: Record<string, unknown>): Promise<CallResult>;
}

export async function sendingChild(bed: MessageBed, name: string, domainName: string, body: Record<string, unknown> = {}): Promise<SendingChild> {
  const parent = `/v2/accounts/${bed.server.accountId}/sub-accounts`;
  const created = await bed.api('POST', parent, { body: { name, website: domainName, ...body } });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  const id = created.body.id as string;
  const keyRes = await bed.api('POST', `${parent}/${id}/api-keys`, {
    body: {
      label: 'app',
      scopes: ['domains:read', 'domains:write', 'messages:send:all', 'messages:read:all', 'smtp-credentials:write:all', 'smtp-credentials:read:all'],
    },
  });
  expect(keyRes.status, JSON.stringify(keyRes.body)).to.equal(201);
  const key = keyRes.body.secret_key as string;
  const api = (method: string, path: string, options: CallOptions = {}) => call({ url: bed.server.url, adminKey: key }, method, path, options);
  const domains = `/v2/accounts/${id}/domains`;
  const domain = await api('POST', domains, { body: { domain: domainName } });
  expect(domain.status, JSON.stringify(domain.body)).to.equal(201);
  bed.publish(domain.body as ApiDomain);
  bed.clock.advance(PAST_CACHE_MS);
  const checked = await api('POST', `${domains}/${domainName}/check-dns`);
  expect(checked.body.dns_valid, JSON.stringify(checked.body)).to.equal(true);
  return {
    id,
    key,
    api,
    send: (recipients = ['child@example.org'], fields = {}) =>
      api('POST', `/v2/accounts/${id}/messages`, {
        body: { from: { email: `app@${domainName}` }, recipients: recipients.map((email) => ({ email })), subject: 'Hi', text_content: 'Hi', ...fields },
      }),
  };
}
