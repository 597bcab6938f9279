import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createTransport } from 'nodemailer';
import { startCaptureSink, type CaptureSink } from '../../../src/cli/sink.ts';
import { startDomainBed, verifyDkim, type DomainBed } from '../../helpers/domains.ts';

describe('a domain verified by hand, and the capture sink (a laptop without public DNS)', function () {
  this.timeout(20_000);
  let bed: DomainBed;

  beforeEach(async () => {
    bed = await startDomainBed();
  });
  afterEach(async () => bed?.stop());

  it('counts as valid, says so in the domain, keeps valid through checks that find nothing, and sends no dns_error', async () => {
    await bed.create('laptop.test');
    expect((await bed.get('laptop.test')).dns_verified_by_hand).to.equal(null);
    const { core } = bed.server.daemon;
    const marked = await core.domains.verifyByHand(bed.server.accountId, 'laptop.test', 'operator (test)');
    expect(marked.dns.valid).to.equal(true);
    const shown = await bed.get('laptop.test');
    expect(shown.dns_valid).to.equal(true);
    expect(shown.dns_verified_by_hand).to.deep.equal({ at: marked.dns.byHand!.at, by: 'operator (test)' });
    // Nothing is published: a check records that, and the mark holds.
    const checked = await bed.recheck('laptop.test');
    expect(checked.status).to.equal(200);
    expect(checked.body.dns_valid).to.equal(true);
    expect(checked.body.dns_records.every((r: { propagated: boolean }) => !r.propagated)).to.equal(true);
    expect(await bed.dnsErrors()).to.have.length(0);
    // Sending is allowed from it.
    const sent = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/messages`, {
      body: { from: { email: 'app@laptop.test' }, recipients: [{ email: 'me@example.org' }], subject: 's', text_content: 't' },
    });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    // Cleared, it is invalid until records are found.
    const cleared = await core.domains.verifyByHand(bed.server.accountId, 'laptop.test', 'operator (test)', true);
    expect(cleared.dns.valid).to.equal(false);
    expect((await bed.get('laptop.test')).dns_verified_by_hand).to.equal(null);
  });

  it('is never the default: a new domain is not verified by hand, and stays invalid until checked', async () => {
    const created = await bed.create('fresh.test');
    expect(created.dns_valid).to.equal(false);
    expect(created.dns_verified_by_hand).to.equal(null);
  });

  describe('capture sink', () => {
    let sink: CaptureSink;
    let dir: string;
    beforeEach(async () => {
      dir = mkdtempSync(join(tmpdir(), 'postilion-sink-'));
    });
    afterEach(async () => {
      await sink?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('writes each message it receives to a file, byte for byte under its envelope line', async () => {
      const seen: string[] = [];
      sink = await startCaptureSink({ host: '127.0.0.1', port: 0, dir, onMessage: (file) => seen.push(file) });
      const transport = createTransport({ host: '127.0.0.1', port: sink.port, secure: false, ignoreTLS: true });
      await transport.sendMail({ from: 'a@example.org', to: 'b@example.net', subject: 'captured', text: 'hello' });
      transport.close();
      expect(seen).to.have.length(1);
      const text = readFileSync(seen[0]!, 'utf8');
      expect(text).to.match(/^X-Postilion-Sink: from=<a@example\.org> to=<b@example\.net>\r\n/);
      expect(text).to.include('Subject: captured');
      expect(readdirSync(dir)).to.have.length(1);
    });

    it('receives what the daemon delivers through it as smarthost, with a DKIM signature that verifies', async () => {
      // The file is there from the message's first byte: it is read once the sink has written all of it.
      let captured!: (file: string) => void;
      const written = new Promise<string>((resolve) => (captured = resolve));
      sink = await startCaptureSink({ host: '127.0.0.1', port: 0, dir, onMessage: (file) => captured(file) });
      await bed.stop();
      bed = await startDomainBed({ delivery: { enabled: true, smarthost: { host: '127.0.0.1', port: sink.port, tls: 'off' } } });
      await bed.create('laptop.test');
      await bed.server.daemon.core.domains.verifyByHand(bed.server.accountId, 'laptop.test', 'operator (test)');
      const sent = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/messages`, {
        body: { from: { email: 'app@laptop.test' }, recipients: [{ email: 'me@example.org' }], subject: 'first', text_content: 'hi' },
      });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
      let timer: NodeJS.Timeout | undefined;
      const file = await Promise.race([written, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), 10_000)))]);
      clearTimeout(timer);
      expect(file, 'nothing captured').to.be.a('string');
      const raw = readFileSync(file!, 'utf8').replace(/^X-Postilion-Sink:[^\n]*\n/, '');
      expect(raw).to.match(/^DKIM-Signature: /m);
      // Verified against the record the domain asks to publish, served by the test DNS server.
      bed.publish(await bed.get('laptop.test'));
      const results = await verifyDkim(bed, raw);
      expect(results.map((r) => r.result)).to.deep.equal(['pass']);
    });
  });
});
