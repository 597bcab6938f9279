import { expect } from 'chai';
import { createTransport } from 'nodemailer';
import type { JobRecord } from '../../../src/store/records.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * Webhook and route URLs saved before their host name is published (the endpoint's DNS often
 * comes after the application is set up): accepted by the API, then judged when dialled, as
 * every target is. A name that turns up on an allowed address is delivered to; one that turns
 * up on a refused address is not, and the attempt's error names the setting that would allow it.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const RECEPTION_ONLY = {
  on_reception: true,
  on_delivered: false,
  on_transient_error: false,
  on_failed: false,
  on_bounced: false,
  on_suppressed: false,
  on_opened: false,
  on_clicked: false,
  on_suppression_created: false,
  on_dns_error: false,
};

describe('webhook and route URLs whose host resolves only after they are saved', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let receiver: WebhookReceiver;

  beforeEach(async () => {
    receiver = await WebhookReceiver.start();
    // Only the receiver's own address is allowed: 127.0.0.2 stays a refused loopback address.
    bed = await startMessageBed({ ...POLLING, smtp: { inbound: { enabled: true, port: 0 } }, webhooks: { allow_networks: ['127.0.0.1/32'] } });
  });
  afterEach(async () => {
    await bed?.stop();
    await receiver?.stop();
  });

  const url = (host: string, path: string) => `http://${host}:${receiver.port}${path}`;

  async function create(resource: 'webhooks' | 'routes', body: Record<string, unknown>): Promise<string> {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/${resource}`, { body });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set(new URL(body.url as string).pathname, res.body.secret);
    return res.body.id as string;
  }

  /** Polls the resource until it counts a failed request, then returns its job's last attempt. */
  async function firstFailure(resource: 'webhooks' | 'routes', id: string): Promise<JobRecord['lastAttempt']> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const res = await bed.api('GET', `/v2/accounts/${bed.server.accountId}/${resource}/${id}`);
      if (res.body.error_count >= 1) break;
      if (Date.now() > deadline) throw new Error(`${resource} ${id} counted no failure: ${JSON.stringify(res.body)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    for await (const job of bed.server.daemon.core.jobs.list(resource === 'webhooks' ? 'webhook' : 'route')) {
      if (job.targetId === id) return job.lastAttempt;
    }
    throw new Error(`no job for ${id}`);
  }

  it('a webhook saved before its DNS exists delivers once the name resolves to an allowed address, and not to a refused one', async () => {
    const later = await create('webhooks', { name: 'later', url: url('later.hooks.test', '/later'), scope: 'global', ...RECEPTION_ONLY });
    const elsewhere = await create('webhooks', { name: 'elsewhere', url: url('elsewhere.hooks.test', '/elsewhere'), scope: 'global', ...RECEPTION_ONLY });
    bed.dns.zone.set('later.hooks.test', 'A', ['127.0.0.1']);
    bed.dns.zone.set('elsewhere.hooks.test', 'A', ['127.0.0.2']);

    expect((await bed.send({ sandbox: true })).status).to.equal(202);
    await receiver.until((r) => r.some((d) => d.path === '/later'));
    expect(receiver.verified('/later')[0]!.payload!).to.include({ type: 'message.reception', webhook_id: later });

    const attempt = await firstFailure('webhooks', elsewhere);
    expect(attempt!.error).to.include(
      'refused to connect to elsewhere.hooks.test: it resolves to 127.0.0.2, a loopback address; such targets are refused unless the operator lists their network in webhooks.allow_networks',
    );
    expect(receiver.received.filter((d) => d.path === '/elsewhere')).to.deep.equal([]);
  });

  it('a route saved before its DNS exists posts once the name resolves to an allowed address, and not to a refused one', async () => {
    const later = await create('routes', { name: 'later', url: url('later.routes.test', '/later'), recipient: 'later@example.com' });
    const elsewhere = await create('routes', { name: 'elsewhere', url: url('elsewhere.routes.test', '/elsewhere'), recipient: 'elsewhere@example.com' });
    bed.dns.zone.set('later.routes.test', 'A', ['127.0.0.1']);
    bed.dns.zone.set('elsewhere.routes.test', 'A', ['127.0.0.2']);

    const transport = createTransport({ host: '127.0.0.1', port: bed.server.daemon.parts.inbound.port!, secure: false, ignoreTLS: true });
    for (const to of ['later@example.com', 'elsewhere@example.com']) {
      const info = await transport.sendMail({ from: 'c@example.net', to, subject: 'Help', text: 'I need help.' });
      expect(info.response).to.match(/^250 /);
    }
    await receiver.until((r) => r.some((d) => d.path === '/later'));
    expect(receiver.verified('/later')[0]!.payload!).to.include({ type: 'message.routing', route_id: later });

    const attempt = await firstFailure('routes', elsewhere);
    expect(attempt!.error).to.include(
      'refused to connect to elsewhere.routes.test: it resolves to 127.0.0.2, a loopback address; such targets are refused unless the operator lists their network in webhooks.allow_networks',
    );
    expect(receiver.received.filter((d) => d.path === '/elsewhere')).to.deep.equal([]);
  });
});
