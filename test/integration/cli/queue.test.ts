import { expect } from 'chai';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import { call, type TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * `postilion queue …` through main(), against a daemon running in this process (over its control
 * socket) and against its store once it is stopped. Mail is deferred by a sink answering 451.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const GREYLISTED = { code: 451, text: '4.7.1 Greylisted, try again later' };
const UNKNOWN_ID = '01900000-0000-7000-8000-000000000000';
const uuidOf = (messageId: string) => messageId.slice(1, messageId.indexOf('@'));

describe('postilion queue (CLI)', function () {
  this.timeout(30_000);
  let sink: SmtpSink;
  let bed: MessageBed;
  let configPath: string;
  let greylist: boolean;
  /** An MX for stall.example that accepts connections and never greets: delivery stays in flight. */
  let stall: Server;
  let stalled: Socket[];

  beforeEach(async () => {
    greylist = true;
    sink = await startSink();
    sink.rcpt = () => (greylist ? GREYLISTED : null);
    stalled = [];
    stall = createServer((socket) => void stalled.push(socket));
    await new Promise<void>((resolve) => stall.listen(0, '127.0.0.1', resolve));
    const stallPort = (stall.address() as { port: number }).port;
    bed = await startMessageBed({
      ...POLLING,
      delivery: { enabled: true, mx_port: sink.port, transport: { 'stall.example': { host: '127.0.0.1', port: stallPort } } },
    });
    for (const domain of ['example.org', 'example.net']) bed.dns.zone.set(domain, 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    // The CLI reads a stopped store on the system clock: the daemon's clock starts from it.
    bed.clock.ms = Date.now();
    configPath = join(bed.server.dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(bed.server.dir, 'data')}\nkeys:\n  dir: ${join(bed.server.dir, 'keys')}\nlog:\n  level: silent\n`);
  });

  afterEach(async () => {
    for (const socket of stalled) socket.destroy();
    await bed.stop();
    await sink.close();
    await new Promise<void>((resolve) => stall.close(() => resolve()));
  });

  async function queue(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, 'queue', ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  async function json(...args: string[]) {
    const res = await queue(...args, '--json');
    expect(res.code, res.err).to.equal(0);
    return JSON.parse(res.out);
  }

  async function until(id: string, status: string, server: { url: string; adminKey: string } = bed.server) {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const res = await call(server, 'GET', `${bed.messages}/${id}`);
      if (res.body.status === status) return res.body;
      if (Date.now() > deadline) throw new Error(`message ${id} is ${res.body.status}, not ${status}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** Three deferred messages (two to example.org, one to example.net) and one scheduled an hour ahead. */
  async function fillQueue() {
    const sent = await bed.send({ recipients: ['a@example.org', 'b@example.org', 'c@example.net'].map((email) => ({ email })) });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const [a, b, c] = sent.body.data.map((d: { id: string }) => uuidOf(d.id)) as [string, string, string];
    for (const id of [a, b, c]) await until(id, 'Deferred');
    const later = await bed.send({
      recipients: [{ email: 'd@example.org' }],
      schedule: { first_attempt: new Date(bed.clock.now() + 3_600_000).toISOString() },
    });
    const d = uuidOf(later.body.data[0].id);
    return { a, b, c, d };
  }

  describe('with the daemon running', () => {
    it("status counts queued messages by state and destination, with the scheduler's live figures", async () => {
      await fillQueue();
      const status = await json('status');
      expect(status.totals).to.deep.equal({ queued: 4, due: 0, deferred: 3, scheduled: 1, held: 0 });
      expect(status.destinations.map((d: { destination: string; queued: number }) => [d.destination, d.queued])).to.deep.equal([
        ['example.org', 3],
        ['example.net', 1],
      ]);
      const org = status.destinations[0];
      expect(org).to.include({ due: 0, deferred: 2, scheduled: 1 });
      expect(Date.parse(org.next_attempt_at)).to.be.greaterThan(bed.clock.now());
      expect(status.daemon.delivery_enabled).to.equal(true);
      expect(status.daemon.scheduler).to.include({ running: 0, ready: 0 });
      expect(status.daemon.scheduler.limits).to.deep.equal({ concurrency: 20, per_destination: 5, ready_limit: 2000 });

      const table = await queue('status');
      expect(table.code).to.equal(0);
      expect(table.out).to.match(/^daemon: running; 0 in flight/m);
      expect(table.out).to.contain('queued: 4  (due now 0, waiting for retry 3, scheduled for later 1)');
      expect(table.out).to.match(/^DESTINATION\s+QUEUED\s+DUE\s+DEFERRED\s+SCHEDULED\s+HELD\s+OLDEST\s+NEXT ATTEMPT$/m);
      expect(table.out).to.match(/^example\.org\s+3\s+0\s+2\s+1\s+0\s+\d+s\s+\S+Z \(in \d+m\)$/m);
    });

    it('lists each queued message with the reply that keeps it waiting, filtered by domain, account and state', async () => {
      const { a, c, d } = await fillQueue();
      const all = await json('list');
      expect(all.messages).to.have.length(4);
      expect(all.more).to.equal(0);
      const first = all.messages.find((m: { id: string }) => m.id === a);
      expect(first).to.include({
        account_id: bed.server.accountId,
        recipient: 'a@example.org',
        destination: 'example.org',
        status: 'Deferred',
        state: 'deferred',
        attempts: 1,
      });
      expect(first.last_attempt.log).to.match(/^mx1\.example\.org: 451 4\.7\.1 Greylisted/);
      // Due order: the scheduled message, an hour ahead, comes last.
      expect(all.messages.at(-1)).to.include({ id: d, state: 'scheduled', attempts: 0, last_attempt: null });

      expect((await json('list', '--domain', 'Example.NET')).messages.map((m: { id: string }) => m.id)).to.deep.equal([c]);
      expect((await json('list', '--status', 'scheduled')).messages.map((m: { id: string }) => m.id)).to.deep.equal([d]);
      expect((await json('list', '--account', bed.server.accountId)).messages).to.have.length(4);
      expect((await json('list', '--account', UNKNOWN_ID)).messages).to.have.length(0);
      const one = await json('list', '--limit', '1');
      expect(one.messages).to.have.length(1);
      expect(one.more).to.equal(3);

      const lines = await queue('list', '--domain', 'example.net');
      expect(lines.out).to.match(/^ID\s+ACCOUNT\s+RECIPIENT\s+STATE\s+ATTEMPTS\s+NEXT ATTEMPT\s+LAST ATTEMPT$/m);
      expect(lines.out).to.match(
        new RegExp(
          `^${c}\\s+${bed.server.accountId}\\s+c@example\\.net\\s+deferred\\s+1\\s+\\S+Z \\(in \\d+m\\)\\s+mx1\\.example\\.org: 451 4\\.7\\.1 Greylisted`,
          'm',
        ),
      );
      expect((await queue('list', '--domain', 'nowhere.example')).out).to.equal('no queued message matches\n');
    });

    it('retry makes deferred mail due now and the daemon delivers it at once; scheduled mail keeps its time unless named', async () => {
      const { a, b, c, d } = await fillQueue();
      greylist = false;
      const one = await queue('retry', a);
      expect(one.code, one.err).to.equal(0);
      expect(one.out).to.equal('retried 1 message\n');
      expect((await until(a, 'Delivered')).num_attempts).to.equal(2);
      expect(sink.received.map((r) => r.to[0])).to.deep.equal(['a@example.org']);

      const byDomain = await json('retry', '--domain', 'example.org');
      expect(byDomain).to.deep.include({ retried: 1, ids: [b], already_due: 0, kept_scheduled: 1, not_queued: [] });
      await until(b, 'Delivered');
      expect((await until(d, 'Received')).delivery_attempts).to.have.length(0);

      // Named, the scheduled message goes now too; a delivered one is reported, not retried.
      const named = await queue('retry', d, c, a);
      expect(named.code, named.err).to.equal(0);
      expect(named.out).to.equal(`retried 2 messages\n${a}: not queued (Delivered)\n`);
      await until(c, 'Delivered');
      await until(d, 'Delivered');
      expect((await queue('retry', '--all')).out).to.equal('nothing to retry: no selected message waits for a retry\n');
    });

    it('purge fails queued messages for good, with a message.failed event, and keeps them readable', async () => {
      const { a, b, c, d } = await fillQueue();
      const one = await queue('purge', a);
      expect(one.code, one.err).to.equal(0);
      expect(one.out).to.equal('purged 1 message: status Failed, "purged by operator"\n');
      const purged = await until(a, 'Failed');
      expect(purged.bounce_classification).to.equal('Uncategorized');
      expect(purged.delivery_attempts.map((x: { status: string; log: string }) => [x.status, x.log.slice(0, 22)])).to.deep.equal([
        ['Deferred', 'mx1.example.org: 451 4'],
        ['Failed', 'purged by operator'],
      ]);
      const events = await new EventsRepo(bed.server.daemon.core.store).recent(bed.server.accountId, 50, 'message.failed');
      expect(events.map((e) => e.data.id)).to.deep.equal([a]);
      expect(events[0]!.data).to.not.have.property('delivery_attempt');
      expect((await json('list')).messages.map((m: { id: string }) => m.id)).to.not.include(a);

      // A bulk purge needs --yes, and without it nothing changes.
      const unconfirmed = await queue('purge', '--domain', 'example.org');
      expect(unconfirmed.code).to.equal(2);
      expect(unconfirmed.err).to.contain('add --yes');
      expect((await json('status')).totals.queued).to.equal(3);
      const bulk = await json('purge', '--domain', 'example.org', '--yes');
      expect(bulk).to.deep.include({ purged: 2, in_delivery: 0, not_queued: [] });
      expect(bulk.ids).to.have.members([b, d]);
      expect((await json('status')).destinations.map((x: { destination: string }) => x.destination)).to.deep.equal(['example.net']);

      const again = await queue('purge', a, c);
      expect(again.out).to.equal(`purged 1 message: status Failed, "purged by operator"\n${a}: not queued (Failed)\n`);
      expect((await queue('purge', '--all', '--yes')).out).to.equal('nothing to purge: no selected message is queued\n');
      expect(sink.received).to.have.length(0);
    });

    it('suspend holds a destination (an MX set) until resume, kept across a restart; bad names are refused', async () => {
      greylist = false;
      // example.org and example.net share one MX host: one destination, one set of limits.
      const suspended = await json('suspend', 'MX1.example.org');
      expect(suspended).to.deep.equal({ destination: 'mx1.example.org', name: 'mx1.example.org', via: 'mx', suspended: true, changed: true });
      expect((await queue('suspend', 'mx1.example.org')).out).to.equal('mx1.example.org: suspended (it already was suspended); the daemon applies it now\n');
      const sent = await bed.send({ recipients: [{ email: 'a@example.org' }, { email: 'b@example.net' }] });
      const [a, b] = sent.body.data.map((m: { id: string }) => uuidOf(m.id));
      await new Promise((r) => setTimeout(r, 300));
      await bed.server.daemon.parts.jobs.engine.wake();
      expect((await json('status')).totals.due).to.equal(2);
      expect(sink.received).to.have.length(0);
      const table = await queue('status');
      expect(table.out).to.match(/^mx1\.example\.org\s+smtp\s+0\s+0\s+5\s+-\s+suspended$/m);

      // Still suspended after a restart: the suspension is in the store.
      const restarted: TestServer = await bed.server.restart();
      try {
        bed.clock.ms = Date.now();
        await restarted.daemon.parts.jobs.engine.wake();
        await new Promise((r) => setTimeout(r, 300));
        expect(sink.received).to.have.length(0);
        expect((await json('status')).suspended.map((d: { destination: string }) => d.destination)).to.deep.equal(['mx1.example.org']);
        expect(await json('resume', 'mx1.example.org')).to.deep.equal({
          destination: 'mx1.example.org',
          name: 'mx1.example.org',
          via: 'destination',
          suspended: false,
          changed: true,
        });
        await until(a, 'Delivered', restarted);
        await until(b, 'Delivered', restarted);
        expect(sink.received.map((r) => r.to[0]).sort()).to.deep.equal(['a@example.org', 'b@example.net']);
      } finally {
        await restarted.daemon.stop();
      }
      for (const bad of ['', 'not a destination', 'ftp://x.example', 'a\u0007b', 'x'.repeat(3000)]) {
        const res = await queue('suspend', bad);
        expect(res.code, bad).to.equal(2);
        expect(res.err, bad).to.contain('is not a destination');
      }
    });

    it('purge leaves a message the daemon is delivering right now to its attempt, and shows it running', async () => {
      const sent = await bed.send({ recipients: [{ email: 'x@stall.example' }] });
      const id = uuidOf(sent.body.data[0].id);
      const deadline = Date.now() + 10_000;
      while (bed.server.daemon.parts.jobs.engine.snapshot().running === 0) {
        if (Date.now() > deadline) throw new Error('the delivery never started');
        await new Promise((r) => setTimeout(r, 20));
      }
      const table = await queue('status');
      expect(table.out).to.match(/^daemon: running; 1 in flight, 0 ready in memory/m);
      expect(table.out).to.match(/^stall\.example\s+1\s+1\s+0\s+0\s+0\s+\S+\s+now$/m);
      // The engine's view: by MX set (here the transport's host), with its limits.
      expect(table.out).to.match(/^ENGINE DESTINATION\s+DISPATCHER\s+READY\s+RUNNING\s+CONCURRENCY\s+RATE\s+STATE$/m);
      expect(table.out).to.match(/^127\.0\.0\.1\s+smtp\s+0\s+1\s+5\s+-\s+active$/m);
      const busy = await queue('purge', id);
      expect(busy.out).to.equal('nothing purged\n1 message not purged: being delivered right now (run again once their attempt is over)\n');
      expect((await json('list', '--domain', 'stall.example')).messages.map((m: { id: string }) => m.id)).to.deep.equal([id]);

      // The MX hangs up: the attempt defers the message, which can now be purged.
      for (const socket of stalled) socket.destroy();
      await until(id, 'Deferred');
      expect(await json('purge', id)).to.deep.include({ purged: 1, in_delivery: 0 });
      await until(id, 'Failed');
    });

    it('refuses malformed and unknown ids and unclear selections with exit 2, changing nothing', async () => {
      const { a } = await fillQueue();
      const malformed = await queue('retry', 'not-an-id');
      expect(malformed.code).to.equal(2);
      expect(malformed.err).to.equal('postilion: "not-an-id" is not a message id (a UUID)\n');
      const unknown = await queue('purge', a, UNKNOWN_ID);
      expect(unknown.code).to.equal(2);
      expect(unknown.err).to.equal(`postilion: no such message: ${UNKNOWN_ID}\n`);
      expect((await until(a, 'Deferred')).delivery_attempts).to.have.length(1);

      for (const args of [
        ['retry'],
        ['purge'],
        ['retry', a, '--all'],
        ['list', '--limit', '0'],
        ['list', '--status', 'stuck'],
        ['list', '--domain', 'not a domain'],
        ['retry', '--account', 'x'],
      ]) {
        const res = await queue(...args);
        expect(res.code, args.join(' ')).to.equal(2);
        expect(res.err, args.join(' ')).to.match(/^postilion: /);
      }
      expect((await json('status')).totals.queued).to.equal(4);
    });
  });

  describe('with the daemon stopped', () => {
    it('reads and changes the store directly; a retried message goes out when the daemon starts', async () => {
      const { a, b, c } = await fillQueue();
      await bed.server.daemon.stop();
      expect(existsSync(join(bed.server.dir, 'data', 'control.sock'))).to.equal(false);

      const status = await json('status');
      expect(status.daemon).to.equal(null);
      expect(status.totals).to.deep.equal({ queued: 4, due: 0, deferred: 3, scheduled: 1, held: 0 });
      expect((await queue('status')).out).to.match(/^daemon: not running \(read from the store\)$/m);
      expect((await json('list', '--status', 'deferred')).messages).to.have.length(3);

      const retried = await queue('retry', a);
      expect(retried.out).to.equal('retried 1 message (they go out when the daemon starts)\n');
      expect((await json('list', '--status', 'due')).messages.map((m: { id: string }) => m.id)).to.deep.equal([a]);
      expect((await queue('purge', b)).code).to.equal(0);
      expect((await queue('retry', UNKNOWN_ID)).code).to.equal(2);

      greylist = false;
      const restarted: TestServer = await bed.server.restart();
      try {
        bed.clock.ms = Date.now();
        await restarted.daemon.parts.jobs.engine.wake();
        await until(a, 'Delivered', restarted);
        expect((await until(b, 'Failed', restarted)).delivery_attempts.at(-1).log).to.equal('purged by operator');
        expect((await until(c, 'Deferred', restarted)).num_attempts).to.equal(1);
        expect(sink.received.map((r) => r.to[0])).to.deep.equal(['a@example.org']);
      } finally {
        await restarted.daemon.stop();
      }
    });
  });
});
