import { expect } from 'chai';
import { CoreAdmin } from '../../../src/control/core-admin.ts';
import { SourceCountsRepo } from '../../../src/store/source-counts-repo.ts';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import { call } from '../../helpers/harness.ts';
import { sendingChild } from '../../helpers/sub-accounts.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * Delivery sources on loopback: sessions bound to 127.0.0.2 and 127.0.0.3 with their EHLO names;
 * the sink tells which address each message came from.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

const SOURCES = {
  a: { address: '127.0.0.2', ehlo: 'a.mta.example.com' },
  b: { address: '127.0.0.3', ehlo: 'b.mta.example.com' },
};

describe('delivery sources and pools', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;

  async function setUp(delivery: Record<string, unknown>) {
    sink = await startSink();
    bed = await startMessageBed({ ...POLLING, delivery: { enabled: true, mx_port: sink.port, sources: SOURCES, ...delivery } });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
  }

  afterEach(async () => {
    await bed?.stop();
    await sink?.close();
  });

  /** `postilion …` with a configuration file naming the test's data directory (the daemon answers on its control socket). */
  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    const configPath = join(bed.server.dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(bed.server.dir, 'data')}\nkeys:\n  dir: ${join(bed.server.dir, 'keys')}\nlog:\n  level: silent\n`);
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  async function send(n: number): Promise<string[]> {
    const res = await bed.send({ recipients: Array.from({ length: n }, (_, i) => ({ email: `r${i}@example.org` })) });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return (res.body.data as Array<{ id: string }>).map((m) => m.id);
  }

  /** The source each message's delivered event names, by recipient. */
  async function sourcesOfEvents(ids: string[]): Promise<Map<string, string | undefined>> {
    const out = new Map<string, string | undefined>();
    for (const id of ids) {
      // The API's id is the Message-ID; events name the message by its UUID.
      const events = await bed.server.daemon.core.eventsRepo.ofMessage(id.slice(1, id.indexOf('@')), 0);
      const delivered = events.find((e) => e.type === 'message.delivered');
      const data = delivered?.data as { recipient?: string; delivery_attempt?: { source?: string } } | undefined;
      out.set(String(data?.recipient), data?.delivery_attempt?.source);
    }
    return out;
  }

  it('sends from every source of the default pool, bound to its address with its EHLO name, and each delivery names its source', async () => {
    await setUp({ pools: { both: { a: 1, b: 1 } }, default_pool: 'both' });
    const ids = await send(16);
    const got = await sink.waitFor(16);
    for (const id of ids) await bed.until(id, 'Delivered');
    const byAddress = new Map<string, number>();
    for (const m of got) {
      byAddress.set(m.client.address, (byAddress.get(m.client.address) ?? 0) + 1);
      const source = m.client.address === '127.0.0.2' ? 'a' : 'b';
      expect(m.client.ehlo).to.equal(SOURCES[source].ehlo);
    }
    expect([...byAddress.keys()].sort()).to.deep.equal(['127.0.0.2', '127.0.0.3']);
    const named = await sourcesOfEvents(ids);
    for (const m of got) expect(named.get(m.to[0]!), m.to[0]).to.equal(m.client.address === '127.0.0.2' ? 'a' : 'b');
    // The message's trace names the source of its attempt too.
    const shown = await cli('messages', 'show', ids[0]!.slice(1, ids[0]!.indexOf('@')));
    expect(shown.code, shown.err).to.equal(0);
    expect(shown.out).to.match(/Delivered.*\[source: [ab]\]/);
  });

  it("sends an account's mail from the pool set for it (config, then `accounts pool`, kept in the store)", async () => {
    await setUp({ pools: { pa: { a: 1 }, pb: { b: 1 } }, default_pool: 'pa' });
    await send(3);
    expect((await sink.waitFor(3)).map((m) => m.client.address)).to.deep.equal(['127.0.0.2', '127.0.0.2', '127.0.0.2']);
    const admin = new CoreAdmin(bed.server.daemon.core);
    const view = await admin.setAccountPool({ account: bed.server.accountId, pool: 'pb' });
    expect(view.delivery_pool).to.equal('pb');
    expect((await bed.server.daemon.core.accountsRepo.getAccount(bed.server.accountId))?.deliveryPool).to.equal('pb');
    await send(3);
    expect((await sink.waitFor(6)).slice(3).map((m) => m.client.address)).to.deep.equal(['127.0.0.3', '127.0.0.3', '127.0.0.3']);
    try {
      await admin.setAccountPool({ account: bed.server.accountId, pool: 'nope' });
      expect.fail('not refused');
    } catch (err) {
      expect((err as { status?: number }).status).to.equal(400);
      expect((err as Error).message).to.contain('no pool "nope" in delivery.pools (pools: pa, pb)');
    }
  });

  it('`postilion accounts pool` sets the pool on the running daemon; a sub account without one sends from its parent’s', async () => {
    await setUp({ pools: { pa: { a: 1 }, pb: { b: 1 } }, default_pool: 'pa' });
    const child = await sendingChild(bed, 'Customer', 'customer.example.com');
    const set = await cli('accounts', 'pool', bed.server.accountId, 'pb');
    expect(set, set.err).to.deep.include({ code: 0, out: `${bed.server.accountId}\tpb\n` });
    expect((await child.send(['c1@example.org'])).status).to.equal(202);
    expect((await sink.waitFor(1))[0]!.client.address).to.equal('127.0.0.3');
    // Refused: an unknown pool, a name and --clear together; cleared: the default pool again.
    const unknown = await cli('accounts', 'pool', bed.server.accountId, 'nope');
    expect(unknown.code).to.equal(2);
    expect(unknown.err).to.contain('no pool "nope" in delivery.pools');
    expect((await cli('accounts', 'pool', bed.server.accountId, 'pb', '--clear')).code).to.equal(2);
    const cleared = await cli('accounts', 'pool', bed.server.accountId, '--clear');
    expect(cleared.out).to.equal(`${bed.server.accountId}\t-\n`);
    expect((await child.send(['c2@example.org'])).status).to.equal(202);
    expect((await sink.waitFor(2))[1]!.client.address).to.equal('127.0.0.2');
  });

  it('queue suspend of a destination holds every source’s lane of it; <source>/<domain> holds one lane', async () => {
    await setUp({ pools: { both: { a: 1, b: 1 } }, default_pool: 'both' });
    const all = await cli('queue', 'suspend', 'example.org');
    expect(all.code, all.err).to.equal(0);
    // 12 messages: each source is drawn for some of them (all from one: 1 in 2,048).
    await send(12);
    await new Promise((r) => setTimeout(r, 300));
    expect(sink.received).to.have.length(0);
    // One lane only: b's mail goes, a's waits.
    expect((await cli('queue', 'suspend', 'a/example.org')).code).to.equal(0);
    expect((await cli('queue', 'resume', 'example.org')).code).to.equal(0);
    await new Promise((r) => setTimeout(r, 500));
    const fromB = sink.received.length;
    expect(fromB).to.be.greaterThan(0);
    expect(sink.received.every((m) => m.client.address === '127.0.0.3')).to.equal(true);
    expect((await cli('queue', 'resume', 'a/example.org')).code).to.equal(0);
    await sink.waitFor(12);
    // a's mail arrived only once its lane was resumed.
    expect(sink.received.slice(fromB).some((m) => m.client.address === '127.0.0.2')).to.equal(true);
  });

  it('holds mail over a warm-up cap for the next day, never bounces it; the day’s count survives a restart', async () => {
    await setUp({ sources: { a: { ...SOURCES.a, warmup: { start: '2026-11-21', daily_caps: [2, 10] } } } });
    const ids = await send(3);
    await sink.waitFor(2);
    // The third waits, unattempted, for the next day (UTC).
    // (The sink has the two before their outcomes are written: wait for those.)
    const statuses = async () => (await Promise.all(ids.map(async (id) => (await bed.read(id)).status))).sort();
    for (let i = 0; i < 100 && (await statuses()).filter((x) => x === 'Delivered').length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await statuses()).to.deep.equal(['Delivered', 'Delivered', 'Received']);
    const held = (await Promise.all(ids.map((id) => bed.read(id)))).find((m) => m.status === 'Received')!;
    expect(held.num_attempts ?? held.delivery_attempts.length).to.equal(0);
    // The day's count is on disk: a restart does not give the source its cap again.
    await bed.server.daemon.parts.mail.delivery!.sources!.counter.flush();
    expect(await new SourceCountsRepo(bed.server.daemon.core.store).get('a')).to.deep.equal({ v: 1, day: '2026-11-21', sent: 2 });
    const next = await bed.server.restart();
    try {
      const res = await call(next, 'POST', bed.messages, {
        body: { from: { email: 'app@example.com' }, subject: 'Hi', text_content: 'Hi', recipients: [{ email: 'r9@example.org' }] },
      });
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      await new Promise((r) => setTimeout(r, 300));
      expect(sink.received).to.have.length(2);
      // The next day: a cap of 10, and both go out.
      bed.clock.advance(86_400_000);
      await next.daemon.parts.jobs.engine.wake();
      await sink.waitFor(4);
      expect(sink.received.every((m) => m.client.address === '127.0.0.2')).to.equal(true);
    } finally {
      await next.stop();
    }
  });

  it('sends over-cap mail from another source of the pool that has room', async () => {
    await setUp({
      sources: { a: { ...SOURCES.a, warmup: { start: '2026-11-21', daily_caps: [1] } }, b: SOURCES.b },
      pools: { both: { a: 5, b: 1 } },
      default_pool: 'both',
    });
    const ids = await send(6);
    await sink.waitFor(6);
    for (const id of ids) await bed.until(id, 'Delivered');
    expect(sink.received.filter((m) => m.client.address === '127.0.0.2')).to.have.length.at.most(1);
  });
});
