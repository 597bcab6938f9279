import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { parseBounceRules } from '../../../src/bounce/rules.ts';
import { BodyDigests, digestOf, type BodyDigest } from '../../../src/delivery/body-digests.ts';
import { Deliverer } from '../../../src/delivery/deliverer.ts';
import { Router, routerOptions } from '../../../src/delivery/router.ts';
import { SmtpPool } from '../../../src/delivery/smtp-pool.ts';
import type { MessageRecord } from '../../../src/store/records.ts';
import { verifyDkim } from '../../helpers/domains.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * The deliverer writes a message to the connection in parts (signature, head, the body's
 * chunks) and hashes each body once: what reaches a real smtp-server sink is, byte for byte, the
 * message signed whole, on every attempt. The deliverer is built from the daemon's own parts
 * (store, signer, resolver) with a digest function that counts its calls; the daemon's own
 * delivery is off, so the messages stay for it.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const RULES = parseBounceRules(readFileSync(new URL('../../../config/bounce-rules', import.meta.url), 'utf8'));
const uuidOf = (id: string) => id.slice(1, id.indexOf('@'));

/** Compares two messages without printing them whole: where they first differ. */
function expectSame(actual: string, expected: string): void {
  let at = 0;
  while (at < actual.length && actual[at] === expected[at]) at += 1;
  const why = `${actual.length} vs ${expected.length} characters, first difference at ${at}: ${JSON.stringify(actual.slice(at - 20, at + 40))} vs ${JSON.stringify(expected.slice(at - 20, at + 40))}`;
  expect(actual === expected, why).to.equal(true);
}

describe('delivery of a message in parts', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let pool: SmtpPool;
  let digests: number;

  beforeEach(async () => {
    sink = await startSink();
    bed = await startMessageBed({ ...POLLING, delivery: { enabled: false } });
    for (const domain of ['example.org', 'example.net']) bed.dns.zone.set(domain, 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    digests = 0;
  });
  afterEach(async () => {
    pool?.close();
    await bed?.stop();
    await sink?.close();
  });

  function deliverer(): Deliverer {
    const core = bed.server.daemon.core;
    const router = new Router(
      core.resolver,
      routerOptions({ mx_port: sink.port, tls: 'off', transport: {}, smarthost: null, unreachable_seconds: 60 }),
      core.clock,
    );
    pool = new SmtpPool({
      hostname: 'mx.postilion.test',
      messagesPerConnection: 100,
      idleTimeoutMs: 5000,
      connectTimeoutMs: 5000,
      commandTimeoutMs: 5000,
      tlsRejectUnauthorized: false,
    });
    const counted = (chunks: readonly Buffer[]): BodyDigest => {
      digests += 1;
      return digestOf(chunks);
    };
    return new Deliverer(
      core.messagesRepo,
      core.domainsRepo,
      core.signer,
      router,
      pool,
      RULES,
      core.clock,
      (id) => core.verp.token(id),
      new BodyDigests(100, counted),
    );
  }

  async function records(fields: Record<string, unknown>): Promise<MessageRecord[]> {
    const res = await bed.send(fields);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return Promise.all(res.body.data.map(async (d: { id: string }) => (await bed.server.daemon.core.messagesRepo.get(uuidOf(d.id)))!));
  }

  /**
   * The message as it was sent before it went in parts (joined whole, then signed whole), as the
   * sink reads it: every line end CRLF, as the DATA stream makes them.
   */
  async function signedWhole(message: MessageRecord): Promise<string> {
    const core = bed.server.daemon.core;
    const body: Buffer[] = [];
    for await (const chunk of core.messagesRepo.body(message.bodyId)) body.push(chunk);
    const unsigned = Buffer.concat([Buffer.from(message.head, 'utf8'), ...body]);
    const sent = ((await core.signer.sign(message.domain, unsigned)) + unsigned.toString('utf8')).replace(/\r\n|\r|\n/g, '\r\n');
    return sent.endsWith('\r\n') ? sent : `${sent}\r\n`;
  }

  it('sends a retried message byte for byte as the first time, as the message signed whole, and hashes its body once', async () => {
    // Lines beginning with a dot, which the DATA stream stuffs, and a body over one chunk's worth of text.
    const text = `Receipt\n.\n..two dots\n${'A line of the receipt, with some words in it.\n'.repeat(2000)}.end\n`;
    const [message] = await records({ text_content: text, html_content: `<p>Receipt</p>\n.<p>${'x'.repeat(70_000)}</p>` });
    const d = deliverer();
    // The clock stands still: the signature's t= is the same on both attempts.
    for (let i = 0; i < 2; i++) expect((await d.attempt(message!)).outcome).to.equal('delivered');
    const [first, second] = await sink.waitFor(2);
    expectSame(second!.raw, first!.raw);
    expectSame(first!.raw, await signedWhole(message!));
    expect((await verifyDkim(bed, first!.raw)).map((v) => v.result)).to.deep.equal(['pass']);
    expect(digests).to.equal(1);
  });

  it('hashes a body once for its recipients at two domains, each copy with its own head and a signature that verifies', async () => {
    const messages = await records({ recipients: [{ email: 'one@example.org' }, { email: 'two@example.net' }] });
    expect(new Set(messages.map((m) => m.bodyId)).size).to.equal(1);
    const d = deliverer();
    for (const message of messages) expect((await d.attempt(message)).outcome).to.equal('delivered');
    const received = await sink.waitFor(2);
    expect(received.map((r) => r.to[0])).to.deep.equal(['one@example.org', 'two@example.net']);
    for (const [i, r] of received.entries()) {
      expectSame(r.raw, await signedWhole(messages[i]!));
      expect((await verifyDkim(bed, r.raw)).map((v) => v.result)).to.deep.equal(['pass']);
    }
    expect(digests).to.equal(1);
  });
});
