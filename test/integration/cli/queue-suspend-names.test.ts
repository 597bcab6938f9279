import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import type { ConfigInput } from '../../../src/config/schema.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * `postilion queue suspend <name>`: a name stands for the engine destination its mail is filed
 * under (the smarthost or transport host, the MX set), and that is what is suspended and printed.
 */
const uuidOf = (messageId: string) => messageId.slice(1, messageId.indexOf('@'));

describe('postilion queue suspend <name> (CLI)', function () {
  this.timeout(30_000);
  let sink: SmtpSink;
  let bed: MessageBed;
  let configPath: string;
  let logLines: string[];

  async function start(delivery: (sinkPort: number) => ConfigInput['delivery']) {
    sink = await startSink();
    logLines = [];
    const routing = delivery(sink.port);
    bed = await startMessageBed({ delivery: { enabled: true, ...routing } }, undefined, { logLines });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    bed.clock.ms = Date.now();
    configPath = join(bed.server.dir, 'postilion.yaml');
    writeFileSync(
      configPath,
      `data:\n  dir: ${join(bed.server.dir, 'data')}\nkeys:\n  dir: ${join(bed.server.dir, 'keys')}\nlog:\n  level: silent\ndelivery: ${JSON.stringify(routing)}\n`,
    );
  }

  afterEach(async () => {
    await bed?.stop();
    await sink?.close();
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

  describe('with a smarthost', () => {
    beforeEach(() => start((port) => ({ smarthost: { host: '127.0.0.1', port } })));

    it('suspending a recipient domain suspends the smarthost it goes through: nothing is delivered until resume', async () => {
      const res = await queue('suspend', 'Example.org');
      expect(res.code, res.err).to.equal(0);
      expect(res.out).to.equal(
        'example.org goes through the smarthost 127.0.0.1 (all mail through it waits with it): 127.0.0.1: suspended; the daemon applies it now\n',
      );

      const sent = await bed.send({ recipients: [{ email: 'a@example.org' }] });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
      const id = uuidOf(sent.body.data[0].id);
      // Today's bug delivered it 0.3 s later: wait well past that, with the engine woken.
      await new Promise((r) => setTimeout(r, 800));
      await bed.server.daemon.parts.jobs.engine.wake();
      await new Promise((r) => setTimeout(r, 300));
      expect(sink.received).to.have.length(0);
      const status = await json('status');
      expect(status.suspended.map((d: { destination: string }) => d.destination)).to.deep.equal(['127.0.0.1']);
      expect(status.totals.due).to.equal(1);

      expect(await json('resume', 'example.org')).to.deep.equal({
        destination: '127.0.0.1',
        name: 'example.org',
        via: 'smarthost',
        suspended: false,
        changed: true,
      });
      await bed.until(id, 'Delivered');
      expect(sink.received.map((r) => r.to[0])).to.deep.equal(['a@example.org']);
      // The delivery's log line names the engine destination, and the recipient domain apart.
      const attempt = logLines.map((l) => JSON.parse(l)).find((l) => l.msg === 'delivery attempt' && l.message_id === id);
      expect(attempt, logLines.join('\n')).to.include({ destination: '127.0.0.1', recipient_domain: 'example.org' });
      const suspendedLine = logLines.map((l) => JSON.parse(l)).find((l) => l.msg === 'destination suspended by operator');
      expect(suspendedLine).to.include({ destination: '127.0.0.1', name: 'example.org', via: 'smarthost' });
    });

    it('refuses a name that matches nothing, and malformed ones, with one line and exit 2, suspending nothing', async () => {
      for (const [name, said] of [
        ['mx9.nowhere.test,mx8.nowhere.test', '"mx8.nowhere.test,mx9.nowhere.test" matches nothing'],
        ['', 'is not a destination'],
        ['two words', 'is not a destination'],
        ['ftp://x.example', 'is not a destination'],
        ['a\u0007b', 'is not a destination'],
        ['x'.repeat(3000), 'is not a destination'],
      ] as const) {
        const res = await queue('suspend', name);
        expect(res.code, name).to.equal(2);
        expect(res.out, name).to.equal('');
        expect(res.err, name).to.match(/^postilion: [^\n]+\n$/);
        expect(res.err, name).to.contain(said);
        expect(res.err, name).to.contain('a recipient domain (example.org), an MX set or host as queue status shows it');
      }
      expect((await json('status')).suspended).to.deep.equal([]);
    });

    it('resolves the same way with the daemon stopped (the store opened directly)', async () => {
      await bed.server.daemon.stop();
      const res = await queue('suspend', 'example.org');
      expect(res.code, res.err).to.equal(0);
      expect(res.out).to.equal(
        'example.org goes through the smarthost 127.0.0.1 (all mail through it waits with it): 127.0.0.1: suspended; no daemon runs: it applies when the daemon starts\n',
      );
    });
  });

  describe('without a smarthost', () => {
    beforeEach(() => start((port) => ({ mx_port: port, transport: { 'relay.example': { host: '127.0.0.2', port } } })));

    it('a domain stands for its MX set, a transport domain for its host, a URL for its origin; an unroutable domain is refused', async () => {
      expect(await json('suspend', 'example.org')).to.deep.equal({
        destination: 'mx1.example.org',
        name: 'example.org',
        via: 'mx',
        suspended: true,
        changed: true,
      });
      expect(await json('suspend', 'relay.example')).to.deep.equal({
        destination: '127.0.0.2',
        name: 'relay.example',
        via: 'transport',
        suspended: true,
        changed: true,
      });
      expect(await json('suspend', 'https://hooks.example.com/path?q=1')).to.deep.equal({
        destination: 'https://hooks.example.com',
        name: 'https://hooks.example.com/path?q=1',
        via: 'origin',
        suspended: true,
        changed: true,
      });
      // A name as queue status shows it stands for itself.
      expect(await json('resume', '127.0.0.2')).to.include({ destination: '127.0.0.2', via: 'destination', changed: true });

      const unknown = await queue('suspend', 'nowhere.example');
      expect(unknown.code).to.equal(2);
      expect(unknown.err).to.match(/^postilion: "nowhere\.example" matches nothing: [^\n]*nowhere\.example has no MX and no address record[^\n]*\n$/);

      const sent = await bed.send({ recipients: [{ email: 'b@example.org' }] });
      await new Promise((r) => setTimeout(r, 600));
      expect(sink.received).to.have.length(0);
      expect((await json('resume', 'example.org')).destination).to.equal('mx1.example.org');
      await bed.until(uuidOf(sent.body.data[0].id), 'Delivered');
    });
  });
});
