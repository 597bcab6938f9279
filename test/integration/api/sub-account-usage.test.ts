import { expect } from 'chai';
import { createTransport } from 'nodemailer';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { sendingChild } from '../../helpers/sub-accounts.ts';

const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

describe('sub-account usage and the monthly credit', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let usagePath: string;

  beforeEach(async () => {
    bed = await startMessageBed({
      ...POLLING,
      billing: { monthly_amount: 100, currency: 'eur' },
      smtp: { submission: { enabled: true, plain_auth_from: ['127.0.0.1/32'] } },
    });
    usagePath = `/v2/accounts/${bed.server.accountId}/sub-accounts/usage`;
  });
  afterEach(async () => {
    await bed.stop();
  });

  const sent = (res: { status: number; body: unknown }) => expect(res.status, JSON.stringify(res.body)).to.equal(202);

  it('adds up a period with active, suspended and deleted sub accounts', async () => {
    const parent = `/v2/accounts/${bed.server.accountId}/sub-accounts`;
    sent(await bed.send());
    sent(await bed.send({ recipients: [{ email: 'two@example.org' }] }));
    // Sandbox mail is not a reception.
    sent(await bed.send({ sandbox: true }));
    const active = await sendingChild(bed, 'Active', 'active.example');
    sent(await active.send(['a1@example.org', 'a2@example.org', 'a3@example.org']));
    const paused = await sendingChild(bed, 'Paused', 'paused.example');
    sent(await paused.send());
    expect((await bed.api('POST', `${parent}/${paused.id}/suspend`, { body: { reason: 'late payment' } })).status).to.equal(200);
    const gone = await sendingChild(bed, 'Gone', 'gone.example');
    sent(await gone.send(['g1@example.org', 'g2@example.org', 'g3@example.org', 'g4@example.org']));
    expect((await bed.api('DELETE', `${parent}/${gone.id}`)).status).to.equal(200);

    const res = await bed.api('GET', usagePath);
    expect(res.status).to.equal(200);
    expect(res.body.billing_period).to.deep.equal({ start: '2026-11-01T00:00:00.000Z', end: '2026-12-01T00:00:00.000Z' });
    expect(res.body).to.include({ currency: 'eur', allocation_method: 'proportional' });
    expect(res.body.allocation_note).to.be.a('string').and.not.equal('');
    expect(res.body.parent).to.deep.equal({ account_id: bed.server.accountId, reception_count: 2, allocated_cost: 20 });
    expect(res.body.sub_accounts).to.have.deep.members([
      { account_id: active.id, name: 'Active', reception_count: 3, allocated_cost: 30 },
      { account_id: paused.id, name: 'Paused', reception_count: 1, allocated_cost: 10 },
    ]);
    expect(res.body.removed_sub_accounts).to.deep.equal({ reception_count: 4, allocated_cost: 40 });
    expect(res.body.total).to.deep.equal({ reception_count: 10, allocated_cost: 100 });

    // The next month starts from nothing; the amount stays with the parent; the deleted one is gone.
    bed.clock.ms = Date.parse('2026-12-02T00:00:00Z');
    const december = await bed.api('GET', usagePath);
    expect(december.body.billing_period.start).to.equal('2026-12-01T00:00:00.000Z');
    expect(december.body.parent).to.include({ reception_count: 0, allocated_cost: 100 });
    expect(december.body.sub_accounts.map((s: { reception_count: number }) => s.reception_count)).to.deep.equal([0, 0]);
    expect(december.body.removed_sub_accounts).to.deep.equal({ reception_count: 0, allocated_cost: 0 });
    expect(december.body.total).to.deep.equal({ reception_count: 0, allocated_cost: 100 });
  });

  it('refuses the SMTP credentials of a suspended and of a deleted sub account with 535', async () => {
    const parent = `/v2/accounts/${bed.server.accountId}/sub-accounts`;
    const child = await sendingChild(bed, 'Smtp', 'smtp-child.example');
    const cred = await child.api('POST', `/v2/accounts/${child.id}/smtp-credentials`, { body: { name: 'app', scope: 'global' } });
    const port = bed.server.daemon.parts.submission.ports.find((p) => !p.secure)!.port;
    const attempt = async () => {
      const transport = createTransport({
        host: '127.0.0.1',
        port,
        secure: false,
        ignoreTLS: true,
        auth: { user: cred.body.username, pass: cred.body.password },
      });
      try {
        return await transport.sendMail({ from: 'app@smtp-child.example', to: 'smtp@example.org', subject: 'Hi', text: 'Hi' }).then(
          () => null,
          (e: { responseCode?: number; response?: string }) => e,
        );
      } finally {
        transport.close();
      }
    };
    expect(await attempt()).to.equal(null);
    await bed.api('POST', `${parent}/${child.id}/suspend`, { body: { reason: 'r' } });
    const suspended = await attempt();
    expect(suspended?.responseCode).to.equal(535);
    expect(suspended?.response).to.contain('is suspended');
    await bed.api('POST', `${parent}/${child.id}/unsuspend`);
    expect(await attempt()).to.equal(null);
    await bed.api('DELETE', `${parent}/${child.id}`);
    const deleted = await attempt();
    expect(deleted?.responseCode).to.equal(535);
    expect(deleted?.response).to.contain('has been deleted');
  });

  it('caps a sub account at its monthly credit over the API, v1 and SMTP, and opens again next month', async () => {
    const parent = `/v2/accounts/${bed.server.accountId}/sub-accounts`;
    const child = await sendingChild(bed, 'Capped', 'capped.example');
    // Sent before any cap: counted once the cap is set (read from the statistics counters).
    sent(await child.send(['c1@example.org', 'c2@example.org']));
    expect((await bed.api('PUT', `${parent}/${child.id}`, { body: { monthly_credit: 3 } })).body.monthly_credit).to.equal(3);

    const over = await child.send(['c3@example.org', 'c4@example.org']);
    expect(over.status).to.equal(403);
    expect(over.body.message).to.match(
      /^monthly credit exhausted: this sub account has used 2 of its 3 messages for 2026-11 \(UTC\), and this send has 2; sending resumes on 2026-12-01T00:00:00\.000Z$/,
    );
    sent(await child.send(['c3@example.org']));
    expect((await child.send(['c4@example.org'])).status).to.equal(403);
    // Sandbox mail is not counted, so not capped.
    sent(await child.send(['c5@example.org'], { sandbox: true }));

    // v1: its error body.
    const { secret: v1Key } = await bed.server.daemon.core.apiKeys.create(child.id, { label: 'v1', scopes: ['messages:send:all'], kind: 'v1' });
    const v1 = await bed.v1(
      { from: { email: 'app@capped.example' }, recipients: [{ email: 'v1@example.org' }], content: { subject: 'Hi', text_body: 'Hi' } },
      v1Key,
    );
    expect(v1.status).to.equal(403);
    expect(v1.body.status).to.contain('monthly credit exhausted');

    // SMTP: 550 5.7.1 with the reason.
    const cred = await child.api('POST', `/v2/accounts/${child.id}/smtp-credentials`, { body: { name: 'app', scope: 'global' } });
    expect(cred.status, JSON.stringify(cred.body)).to.equal(201);
    const port = bed.server.daemon.parts.submission.ports.find((p) => !p.secure)!.port;
    const transport = createTransport({
      host: '127.0.0.1',
      port,
      secure: false,
      ignoreTLS: true,
      auth: { user: cred.body.username, pass: cred.body.password },
    });
    try {
      const err = await transport.sendMail({ from: 'app@capped.example', to: 'smtp@example.org', subject: 'Hi', text: 'Hi' }).then(
        () => null,
        (e: { responseCode?: number; response?: string }) => e,
      );
      expect(err?.responseCode).to.equal(550);
      expect(err?.response).to.match(/^550 5\.7\.1 monthly credit exhausted/);
    } finally {
      transport.close();
    }
    const usage = await bed.api('GET', usagePath);
    expect(usage.body.sub_accounts.find((s: { account_id: string }) => s.account_id === child.id).reception_count).to.equal(3);

    // A larger credit lets it send again; so does the next month.
    await bed.api('PUT', `${parent}/${child.id}`, { body: { monthly_credit: 4 } });
    sent(await child.send(['c6@example.org']));
    expect((await child.send(['c7@example.org'])).status).to.equal(403);
    bed.clock.ms = Date.parse('2026-12-01T00:00:01Z');
    sent(await child.send(['c8@example.org', 'c9@example.org', 'c10@example.org', 'c11@example.org']));
    expect((await child.send(['c12@example.org'])).status).to.equal(403);
    // No cap: anything goes.
    await bed.api('PUT', `${parent}/${child.id}`, { body: { monthly_credit: 0 } });
    sent(await child.send(['c13@example.org']));
  });
});
