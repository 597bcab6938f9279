import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import { call } from '../../helpers/harness.ts';
import { sendingChild } from '../../helpers/sub-accounts.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * `postilion accounts suspend|unsuspend|list` against a running daemon (its control socket) and
 * against the stopped store: a suspended account's queued mail is held (not sent, not failed),
 * shown by `postilion queue`, and goes out once the account is active again.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const GREYLISTED = { code: 451, text: '4.7.1 Greylisted, try again later' };

describe('postilion accounts suspend and held mail', function () {
  this.timeout(40_000);
  let sink: SmtpSink;
  let bed: MessageBed;
  let configPath: string;
  let greylist: boolean;

  beforeEach(async () => {
    greylist = true;
    sink = await startSink();
    sink.rcpt = () => (greylist ? GREYLISTED : null);
    bed = await startMessageBed({ ...POLLING, delivery: { enabled: true, mx_port: sink.port, retry: { first_delay_seconds: 60, jitter: 0 } } });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    bed.clock.ms = Date.now();
    configPath = join(bed.server.dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(bed.server.dir, 'data')}\nkeys:\n  dir: ${join(bed.server.dir, 'keys')}\nlog:\n  level: silent\n`);
  });

  afterEach(async () => {
    await bed.stop();
    await sink.close();
  });

  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  /** The record id: the API's id may be the Message-ID form `<uuid@domain>`. */
  const uuidOf = (id: string) => (id.startsWith('<') ? id.slice(1, id.indexOf('@')) : id);

  async function heldIds(): Promise<string[]> {
    const listed = await cli('queue', 'list', '--status', 'held', '--json');
    expect(listed.code, listed.err).to.equal(0);
    return (JSON.parse(listed.out).messages as Array<{ id: string }>).map((m) => m.id).sort();
  }

  async function untilHeld(n: number): Promise<string[]> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const ids = await heldIds();
      if (ids.length >= n) return ids;
      if (Date.now() > deadline) throw new Error(`${ids.length} held, not ${n}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('holds the mail of a suspended account and its sub accounts, and sends it when the operator unsuspends', async () => {
    const child = await sendingChild(bed, 'Customer', 'customer.example');
    const mine = (await bed.send()).body.data[0].id as string;
    const sent = await child.send();
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const theirs = sent.body.data[0].id as string;
    await bed.until(mine, 'Deferred');
    await child.api('GET', `/v2/accounts/${child.id}/messages/${encodeURIComponent(theirs)}`);

    const suspended = await cli('accounts', 'suspend', bed.server.accountId, '--reason', 'abuse report #42');
    expect(suspended.code, suspended.err).to.equal(0);
    expect(suspended.out).to.equal(`${bed.server.accountId}\tsuspended\n`);
    const list = await cli('accounts', 'list');
    expect(list.out).to.contain(`${bed.server.accountId}\tsuspended\t-\t`);
    expect(list.out).to.contain('(suspended by operator: abuse report #42)');
    expect(list.out).to.contain(`${child.id}\tparent-suspended\t${bed.server.accountId}\tCustomer`);
    const listed = JSON.parse((await cli('accounts', 'list', '--json')).out) as Array<Record<string, unknown>>;
    expect(listed.find((a) => a.id === child.id)).to.deep.equal({
      id: child.id,
      name: 'Customer',
      status: 'parent-suspended',
      parent_account_id: bed.server.accountId,
      suspension: null,
      delivery_pool: null,
    });
    expect(listed.find((a) => a.id === bed.server.accountId)).to.deep.include({ status: 'suspended', parent_account_id: null });
    const refused = await bed.api('GET', `/v2/accounts/${bed.server.accountId}`);
    expect(refused.status).to.equal(401);
    expect(refused.body.message).to.equal('Account is suspended');

    // The retries come due: both are held, neither sent nor failed.
    greylist = false;
    bed.clock.advance(61_000);
    await bed.server.daemon.parts.jobs.engine.wake();
    const held = await untilHeld(2);
    expect(held.map(uuidOf).sort()).to.deep.equal([uuidOf(mine), uuidOf(theirs)].sort());
    const status = JSON.parse((await cli('queue', 'status', '--json')).out);
    expect(status.totals.held).to.equal(2);
    expect((await cli('queue', 'status')).out).to.contain('held for an account that is not active 2');
    const retry = await cli('queue', 'retry', '--all');
    expect(retry.out).to.contain('2 messages held');
    expect(sink.received).to.have.length(0);
    const stored = await bed.server.daemon.core.messagesRepo.get(uuidOf(mine));
    expect(stored).to.include({ status: 'Deferred' });
    expect(stored!.heldAt).to.be.a('string');

    const back = await cli('accounts', 'unsuspend', bed.server.accountId);
    expect(back.code, back.err).to.equal(0);
    expect(back.out).to.equal(`${bed.server.accountId}\tactive\n`);
    await bed.until(mine, 'Delivered');
    const deadline = Date.now() + 10_000;
    while (sink.received.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(
      sink.received
        .map((m) => m.to)
        .flat()
        .sort(),
    ).to.deep.equal(['child@example.org', 'rcpt@example.org']);
    expect(await heldIds()).to.deep.equal([]);
    expect((await cli('accounts', 'list')).out).to.contain(`${child.id}\tactive\t${bed.server.accountId}\tCustomer`);
  });

  it('keeps held mail across a restart and releases it on start when the account was unsuspended on the stopped store', async () => {
    const mine = (await bed.send()).body.data[0].id as string;
    await bed.until(mine, 'Deferred');
    expect((await cli('accounts', 'suspend', bed.server.accountId, '--reason', 'maintenance')).code).to.equal(0);
    greylist = false;
    bed.clock.advance(61_000);
    await bed.server.daemon.parts.jobs.engine.wake();
    await untilHeld(1);

    await bed.server.daemon.stop();
    // No daemon: the CLI opens the store itself.
    expect((await cli('queue', 'list', '--status', 'held', '--json')).out).to.contain(uuidOf(mine));
    const back = await cli('accounts', 'unsuspend', bed.server.accountId);
    expect(back.code, back.err).to.equal(0);
    const restarted = await bed.server.restart();
    try {
      await untilDelivered(restarted, mine);
    } finally {
      await restarted.daemon.stop();
    }
    expect(sink.received).to.have.length(1);
  });

  async function untilDelivered(restarted: { url: string; adminKey: string; accountId: string }, mine: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const res = await call(restarted, 'GET', `/v2/accounts/${restarted.accountId}/messages/${encodeURIComponent(mine)}`);
      if (res.body.status === 'Delivered') break;
      if (Date.now() > deadline) throw new Error(`message is ${res.body.status}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('holds the mail of a deleted sub account until the operator purges it', async () => {
    const child = await sendingChild(bed, 'Leaving', 'leaving.example');
    const sent = await child.send();
    const id = uuidOf(sent.body.data[0].id as string);
    const deadline = Date.now() + 10_000;
    while ((await bed.server.daemon.core.messagesRepo.get(id))?.status !== 'Deferred') {
      if (Date.now() > deadline) throw new Error('not deferred');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await bed.api('DELETE', `/v2/accounts/${bed.server.accountId}/sub-accounts/${child.id}`)).status).to.equal(200);
    greylist = false;
    bed.clock.advance(61_000);
    await bed.server.daemon.parts.jobs.engine.wake();
    expect(await untilHeld(1)).to.deep.equal([id]);
    expect((await cli('accounts', 'list')).out).to.contain(`${child.id}\tdeleted\t${bed.server.accountId}\tLeaving`);
    // Unsuspending a deleted account is refused; the operator purges its mail instead.
    expect((await cli('accounts', 'unsuspend', child.id)).err).to.contain('is deleted');
    const purged = await cli('queue', 'purge', '--account', child.id, '--yes');
    expect(purged.code, purged.err).to.equal(0);
    expect(purged.out).to.contain('purged 1 message');
    expect(await heldIds()).to.deep.equal([]);
    expect(await bed.server.daemon.core.messagesRepo.heldOf(child.id, 10)).to.deep.equal([]);
    const failed = (await bed.server.daemon.core.messagesRepo.get(id))!;
    expect(failed).to.include({ status: 'Failed', heldAt: null });
    expect(sink.received).to.have.length(0);
  });

  it('refuses bad operator input with a message', async () => {
    const noReason = await cli('accounts', 'suspend', bed.server.accountId);
    expect(noReason.code).to.not.equal(0);
    const blank = await cli('accounts', 'suspend', bed.server.accountId, '--reason', '   ');
    expect(blank.code).to.not.equal(0);
    expect(blank.err).to.contain('reason must be 1 to 500 characters');
    const long = await cli('accounts', 'suspend', bed.server.accountId, '--reason', 'x'.repeat(501));
    expect(long.err).to.contain('reason must be 1 to 500 characters');
    const notUuid = await cli('accounts', 'suspend', 'nope', '--reason', 'r');
    expect(notUuid.err).to.contain('is not an account id');
    const unknown = await cli('accounts', 'unsuspend', '01900000-0000-7000-8000-000000000000');
    expect(unknown.err).to.contain('account not found');
    const notSuspended = await cli('accounts', 'unsuspend', bed.server.accountId);
    expect(notSuspended.err).to.contain('is not suspended');
  });
});
