import { expect } from 'chai';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseBounceRules } from '../../../src/bounce/rules.ts';
import { tlsText } from '../../../src/control/queue-admin.ts';
import { trace } from '../../../src/control/resource-admin.ts';
import { Deliverer } from '../../../src/delivery/deliverer.ts';
import { Router, routerOptions } from '../../../src/delivery/router.ts';
import { SmtpPool } from '../../../src/delivery/smtp-pool.ts';
import type { TlsSessionResult } from '../../../src/delivery/tls-outcome.ts';
import { MtaSts } from '../../../src/delivery/tls-policy/mta-sts.ts';
import { TlsaLookups } from '../../../src/delivery/tls-policy/tlsa-lookup.ts';
import { TlsPolicies } from '../../../src/delivery/tls-policy/tls-policies.ts';
import { DnsWireClient } from '../../../src/domains/dns-wire.ts';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import { MtaStsRepo } from '../../../src/store/mta-sts-repo.ts';
import type { MessageRecord } from '../../../src/store/records.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startPolicyHost, stsPolicy as policy, type PolicyHost } from '../../helpers/mta-sts-host.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { startTestCa, type TestCa } from '../../helpers/tls.ts';

/**
 * Outbound TLS policies end to end on loopback: MX sinks on 127.0.0.x (one with a certificate of
 * the test CA for its name, one without STARTTLS, one with a certificate for another name), an
 * HTTPS policy host with a certificate of the test CA, and the test DNS server answering MX, A,
 * TXT and TLSA, with the AD bit when a case needs a signed zone.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const RULES = parseBounceRules(`# none\n`);
const uuidOf = (id: string) => id.slice(1, id.indexOf('@'));

/** The DER of the first certificate of a PEM chain. */
const derOf = (pem: string) => new X509Certificate(pem).raw;
const spkiOf = (pem: string) => new X509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' });
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest();

const DOMAINS = [
  'enforce.test',
  'notls.test',
  'wrongcert.test',
  'unlisted.test',
  'second.test',
  'testing.test',
  'kept.test',
  'both.test',
  'e2e.test',
  'e2e-plain.test',
];

describe('outbound TLS policies: MTA-STS and DANE', function () {
  this.timeout(30_000);
  let ca: TestCa;
  let dir: string;
  let good: SmtpSink;
  let plain: SmtpSink;
  let wrong: SmtpSink;
  let wrongCert: string;
  let host: PolicyHost;

  before(async () => {
    ca = await startTestCa();
    dir = mkdtempSync(join(tmpdir(), 'postilion-tls-policy-'));
    writeFileSync(join(dir, 'ca.pem'), ca.cert);
    const goodTls = await ca.issue(['mx.good.test']);
    good = await startSink({ host: '127.0.0.2', tls: { key: goodTls.key, cert: goodTls.chain } });
    plain = await startSink({ host: '127.0.0.3', port: good.port });
    const wrongTls = await ca.issue(['other.test']);
    wrongCert = wrongTls.cert;
    wrong = await startSink({ host: '127.0.0.4', port: good.port, tls: { key: wrongTls.key, cert: wrongTls.chain } });
    host = await startPolicyHost(ca, DOMAINS);
  });
  after(async () => {
    await Promise.all([good?.close(), plain?.close(), wrong?.close(), host?.close()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Publishes a domain: its MX hosts, the hosts' addresses, and optionally an MTA-STS policy (TXT id + file). */
  function publish(bed: MessageBed, domain: string, mx: string[], sts?: { id: string; text: string }) {
    const zone = bed.dns.zone;
    zone.set(
      domain,
      'MX',
      mx.map((exchange, i) => ({ exchange, priority: 10 * (i + 1) })),
    );
    zone.set('mx.good.test', 'A', ['127.0.0.2']);
    zone.set('mx.plain.test', 'A', ['127.0.0.3']);
    zone.set('mx.wrong.test', 'A', ['127.0.0.4']);
    zone.set('mx-dane.wrong.test', 'A', ['127.0.0.4']);
    if (sts) {
      zone.set(`_mta-sts.${domain}`, 'TXT', [`v=STSv1; id=${sts.id}`]);
      zone.set(`mta-sts.${domain}`, 'A', ['127.0.0.1']);
      host.policies.set(domain, sts.text);
    }
  }

  describe('the deliverer under each policy', () => {
    let bed: MessageBed;
    let pool: SmtpPool | null = null;
    let reports: TlsSessionResult[];

    before(async () => {
      bed = await startMessageBed({ ...POLLING, delivery: { enabled: false } });
    });
    after(async () => {
      await bed?.stop();
    });
    beforeEach(() => {
      reports = [];
      bed.dns.ad = false;
      bed.dns.insecureNames.clear();
    });
    afterEach(() => {
      pool?.close();
      pool = null;
    });

    function deliverer(options: { dane?: boolean; sts?: MtaSts } = {}): Deliverer {
      const core = bed.server.daemon.core;
      const router = new Router(
        core.resolver,
        routerOptions({ mx_port: good.port, tls: 'opportunistic', transport: {}, smarthost: null, unreachable_seconds: 60 }),
        core.clock,
      );
      pool = new SmtpPool({
        hostname: 'mx.postilion.test',
        messagesPerConnection: 100,
        idleTimeoutMs: 5000,
        connectTimeoutMs: 5000,
        commandTimeoutMs: 5000,
        tlsRejectUnauthorized: false,
        extraCa: ca.cert,
      });
      const dane = options.dane ? new TlsaLookups(new DnsWireClient({ servers: [bed.dns.address], timeoutMs: 500, tries: 1 }), core.clock) : null;
      const policies = new TlsPolicies(options.sts ?? mtaSts(), dane);
      return new Deliverer(core.messagesRepo, core.domainsRepo, core.signer, router, pool, RULES, core.clock, (id) => core.verp.token(id), undefined, {
        tlsPolicies: policies,
        tlsReports: { record: (r) => reports.push(r) },
      });
    }

    function mtaSts(): MtaSts {
      const core = bed.server.daemon.core;
      return new MtaSts(
        core.resolver,
        new MtaStsRepo(core.store),
        { fetch: { resolver: core.resolver, port: host.port, timeoutMs: 2000, extraCa: ca.cert, allowPrivate: true }, recheckMs: 60_000 },
        core.clock,
      );
    }

    async function message(to: string): Promise<MessageRecord> {
      const res = await bed.send({ recipients: [{ email: to }] });
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      return (await bed.server.daemon.core.messagesRepo.get(uuidOf(res.body.data[0].id)))!;
    }

    it('enforce: delivers to a listed MX over TLS with a certificate valid for its name, and reports the session', async () => {
      publish(bed, 'enforce.test', ['mx.good.test'], { id: 'a1', text: policy('enforce', ['mx.good.test']) });
      const before = good.received.length;
      const d = deliverer();
      const attempt = await d.attempt(await message('rcpt@enforce.test'));
      expect(attempt.outcome, attempt.response).to.equal('delivered');
      expect(attempt.tls).to.deep.equal({ policy: 'mta-sts', mode: 'enforce', version: 'TLSv1.3', verified: true });
      // The session is reused: the second message has the same TLS, and the session is reported once.
      expect((await d.attempt(await message('other@enforce.test'))).tls).to.deep.equal(attempt.tls);
      expect(good.received.slice(before).map((r) => r.secure)).to.deep.equal([true, true]);
      expect(reports).to.have.length(1);
      expect(reports[0]).to.deep.include({
        policyDomain: 'enforce.test',
        policyType: 'sts',
        receivingMxHostname: 'mx.good.test',
        receivingIp: '127.0.0.2',
        success: true,
      });
      expect(reports[0]!.mxHosts).to.deep.equal(['mx.good.test']);
      expect(reports[0]!.policyStrings).to.deep.equal(['version: STSv1', 'mode: enforce', 'mx: mx.good.test', 'max_age: 86400']);
    });

    it('enforce: defers, never in clear text, when the MX does not offer STARTTLS', async () => {
      publish(bed, 'notls.test', ['mx.plain.test'], { id: 'b1', text: policy('enforce', ['mx.plain.test']) });
      const before = plain.received.length;
      const d = deliverer();
      const attempt = await d.attempt(await message('rcpt@notls.test'));
      expect(attempt.outcome).to.equal('deferred');
      expect(attempt.classification).to.equal('PolicyRelated');
      expect(attempt.tls).to.deep.equal({ policy: 'mta-sts', mode: 'enforce', version: null, verified: false });
      expect(plain.received.length).to.equal(before);
      expect(reports.map((r) => [r.success, r.failure?.type])).to.deep.equal([[false, 'starttls-not-supported']]);
      // The failed session's addresses, though it was closed: sending-mta-ip is the one the sink saw.
      expect(reports[0]).to.deep.include({ receivingIp: '127.0.0.3', sendingMtaIp: plain.peers.at(-1) });
      expect(reports[0]!.sendingMtaIp).to.match(/^127\./);
      // From a delivery source: its address.
      const source = { name: 'b', address: '127.0.0.5', ehlo: 'b.postilion.test', family: 4 as const, warmup: null };
      expect((await d.attempt(await message('other@notls.test'), source)).outcome).to.equal('deferred');
      expect(plain.peers.at(-1)).to.equal('127.0.0.5');
      expect(reports.map((r) => r.sendingMtaIp)).to.deep.equal([reports[0]!.sendingMtaIp, '127.0.0.5']);
    });

    it('enforce: defers when the certificate does not name the MX host, before any MAIL FROM', async () => {
      publish(bed, 'wrongcert.test', ['mx.wrong.test'], { id: 'c1', text: policy('enforce', ['mx.wrong.test']) });
      const before = wrong.received.length;
      const attempt = await deliverer().attempt(await message('rcpt@wrongcert.test'));
      expect(attempt.outcome).to.equal('deferred');
      expect(attempt.classification).to.equal('PolicyRelated');
      expect(attempt.response).to.contain('certificate does not name mx.wrong.test');
      expect(attempt.tls).to.deep.include({ policy: 'mta-sts', mode: 'enforce', verified: false });
      expect(wrong.received.length).to.equal(before);
      expect(reports.map((r) => r.failure?.type)).to.deep.equal(['certificate-host-mismatch']);
    });

    it('enforce: never connects to an MX host the policy does not list, and delivers to one it lists', async () => {
      publish(bed, 'unlisted.test', ['mx.good.test'], { id: 'd1', text: policy('enforce', ['mx.elsewhere.test']) });
      const connections = good.connections;
      const refused = await deliverer().attempt(await message('rcpt@unlisted.test'));
      expect(refused.outcome).to.equal('deferred');
      expect(refused.classification).to.equal('PolicyRelated');
      expect(refused.response).to.contain('mx.good.test is not in the MTA-STS policy of unlisted.test');
      expect(good.connections).to.equal(connections);
      expect(reports.map((r) => [r.policyType, r.failure?.type])).to.deep.equal([['sts', 'validation-failure']]);

      // The preferred MX (no TLS, not listed) is passed over for the listed one.
      publish(bed, 'second.test', ['mx.plain.test', 'mx.good.test'], { id: 'e1', text: policy('enforce', ['*.good.test']) });
      const plainConnections = plain.connections;
      const attempt = await deliverer().attempt(await message('rcpt@second.test'));
      expect(attempt.outcome, attempt.response).to.equal('delivered');
      expect(attempt.host).to.equal('mx.good.test');
      expect(plain.connections).to.equal(plainConnections);
    });

    it('testing: delivers as before (here in clear text) and reports the failure', async () => {
      publish(bed, 'testing.test', ['mx.plain.test'], { id: 'f1', text: policy('testing', ['mx.plain.test']) });
      const before = plain.received.length;
      const attempt = await deliverer().attempt(await message('rcpt@testing.test'));
      expect(attempt.outcome, attempt.response).to.equal('delivered');
      expect(attempt.tls).to.deep.equal({ policy: 'mta-sts', mode: 'testing', version: null, verified: false });
      expect(plain.received.length).to.equal(before + 1);
      expect(reports.map((r) => [r.policyType, r.success, r.failure?.type])).to.deep.equal([['sts', false, 'starttls-not-supported']]);
    });

    it('keeps a policy for its max_age in the store, fetches it again only when the TXT id changes, and enforces it after a restart', async () => {
      const clock = bed.server.daemon.core.clock as unknown as { advance(ms: number): void };
      publish(bed, 'kept.test', ['mx.good.test'], { id: 'k1', text: policy('enforce', ['mx.good.test']) });
      host.fetches.delete('kept.test');
      const sts = mtaSts();
      const d = deliverer({ sts });
      expect((await d.attempt(await message('a@kept.test'))).outcome).to.equal('delivered');
      const stored = await new MtaStsRepo(bed.server.daemon.core.store).get('kept.test');
      expect(stored).to.deep.include({ version: 1, domain: 'kept.test', id: 'k1' });
      // Past the TXT re-check: same id, no fetch.
      clock.advance(61_000);
      expect((await d.attempt(await message('b@kept.test'))).outcome).to.equal('delivered');
      expect(host.fetches.get('kept.test')).to.equal(1);
      // A new id fetches the new policy, which lists another host: mail now waits.
      bed.dns.zone.set('_mta-sts.kept.test', 'TXT', ['v=STSv1; id=k2']);
      host.policies.set('kept.test', policy('enforce', ['mx.other.test']));
      clock.advance(61_000);
      expect((await d.attempt(await message('c@kept.test'))).outcome).to.equal('deferred');
      expect(host.fetches.get('kept.test')).to.equal(2);
      // A restart (a new cache over the same store), with the policy host down and the TXT record gone: still enforced.
      host.policies.delete('kept.test');
      bed.dns.zone.delete('_mta-sts.kept.test');
      const restarted = await deliverer({ sts: mtaSts() }).attempt(await message('d@kept.test'));
      expect(restarted.outcome).to.equal('deferred');
      expect(restarted.response).to.contain('not in the MTA-STS policy of kept.test');
    });

    it('DANE-EE: delivers to a host whose certificate matches its TLSA record, whatever names it has', async () => {
      bed.dns.ad = true;
      publish(bed, 'dane.test', ['mx-dane.wrong.test']);
      bed.dns.zone.set(`_${good.port}._tcp.mx-dane.wrong.test`, 'TLSA', [{ usage: 3, selector: 1, matching: 1, data: sha256(spkiOf(wrongCert)) }]);
      const attempt = await deliverer({ dane: true }).attempt(await message('rcpt@dane.test'));
      expect(attempt.outcome, attempt.response).to.equal('delivered');
      expect(attempt.tls).to.deep.equal({ policy: 'dane', version: 'TLSv1.3', verified: true });
      expect(reports[0]).to.deep.include({ policyDomain: 'dane.test', policyType: 'tlsa', success: true });
      expect(reports[0]!.policyStrings).to.deep.equal([`3 1 1 ${sha256(spkiOf(wrongCert)).toString('hex')}`]);
    });

    it('DANE: defers when no TLSA record matches the certificate; DANE-TA anchors the chain at the CA and checks the name', async () => {
      bed.dns.ad = true;
      publish(bed, 'dane-bad.test', ['mx.wrong.test']);
      bed.dns.zone.set(`_${good.port}._tcp.mx.wrong.test`, 'TLSA', [
        { usage: 3, selector: 1, matching: 1, data: Buffer.alloc(32, 7) },
        // The CA signed the certificate, but it names other.test, not mx.wrong.test.
        { usage: 2, selector: 0, matching: 1, data: sha256(derOf(ca.cert)) },
      ]);
      const before = wrong.received.length;
      const refused = await deliverer({ dane: true }).attempt(await message('rcpt@dane-bad.test'));
      expect(refused.outcome).to.equal('deferred');
      expect(refused.classification).to.equal('PolicyRelated');
      expect(refused.tls).to.deep.include({ policy: 'dane', verified: false });
      expect(wrong.received.length).to.equal(before);
      expect(reports.map((r) => r.failure?.type)).to.deep.equal(['certificate-host-mismatch']);

      publish(bed, 'dane-ta.test', ['mx.good.test']);
      bed.dns.zone.set(`_${good.port}._tcp.mx.good.test`, 'TLSA', [
        { usage: 2, selector: 1, matching: 2, data: createHash('sha512').update(spkiOf(ca.cert)).digest() },
      ]);
      const attempt = await deliverer({ dane: true }).attempt(await message('rcpt@dane-ta.test'));
      bed.dns.zone.delete(`_${good.port}._tcp.mx.good.test`);
      expect(attempt.outcome, attempt.response).to.equal('delivered');
      expect(attempt.tls).to.deep.equal({ policy: 'dane', version: 'TLSv1.3', verified: true });
    });

    it('DANE takes precedence over MTA-STS; without DNSSEC the TLSA records are not used', async () => {
      bed.dns.ad = true;
      // The policy lists the host, but its certificate fails WebPKI for the name: DANE-EE decides.
      publish(bed, 'both.test', ['mx-dane.wrong.test'], { id: 'g1', text: policy('enforce', ['mx-dane.wrong.test']) });
      bed.dns.zone.set(`_${good.port}._tcp.mx-dane.wrong.test`, 'TLSA', [{ usage: 3, selector: 0, matching: 1, data: sha256(derOf(wrongCert)) }]);
      const attempt = await deliverer({ dane: true }).attempt(await message('rcpt@both.test'));
      expect(attempt.outcome, attempt.response).to.equal('delivered');
      expect(attempt.tls?.policy).to.equal('dane');

      // An unsigned zone: the TLSA records mean nothing, and delivery is opportunistic.
      publish(bed, 'unsigned.test', ['mx-dane.wrong.test']);
      bed.dns.insecureNames.add('unsigned.test');
      bed.dns.insecureNames.add(`_${good.port}._tcp.mx-dane.wrong.test`);
      const plainAttempt = await deliverer({ dane: true }).attempt(await message('rcpt@unsigned.test'));
      expect(plainAttempt.outcome, plainAttempt.response).to.equal('delivered');
      expect(plainAttempt.tls).to.deep.equal({ policy: 'opportunistic', version: 'TLSv1.3', verified: false });
    });
  });

  describe('the daemon (delivery.mta_sts configured)', () => {
    let bed: MessageBed;

    before(async () => {
      bed = await startMessageBed({
        ...POLLING,
        delivery: { enabled: true, mx_port: good.port, mta_sts: { ca_file: join(dir, 'ca.pem'), port: host.port, allow_private: true } },
      });
    });
    after(async () => {
      await bed?.stop();
    });

    it('puts the TLS outcome on the delivery event, in the queue view and in the metrics; an enforced failure waits', async () => {
      publish(bed, 'e2e.test', ['mx.good.test'], { id: 'h1', text: policy('enforce', ['mx.good.test']) });
      publish(bed, 'e2e-plain.test', ['mx.plain.test'], { id: 'i1', text: policy('enforce', ['mx.plain.test']) });
      const sent = await bed.send({ recipients: [{ email: 'rcpt@e2e.test' }] });
      const waits = await bed.send({ recipients: [{ email: 'rcpt@e2e-plain.test' }] });
      const id = uuidOf(sent.body.data[0].id);
      const waiting = uuidOf(waits.body.data[0].id);
      const plainBefore = plain.received.length;
      await bed.until(sent.body.data[0].id, 'Delivered');
      await bed.until(waits.body.data[0].id, 'Deferred');
      expect(plain.received.length).to.equal(plainBefore);

      const events = await new EventsRepo(bed.server.daemon.core.store).recent(bed.server.accountId, 20, 'message.delivered');
      const delivered = events.find((e) => JSON.stringify(e.data).includes(id));
      expect(delivered, JSON.stringify(events)).to.not.equal(undefined);
      expect((delivered!.data as { delivery_attempt?: { tls?: unknown } }).delivery_attempt?.tls).to.deep.equal({
        policy: 'mta-sts',
        mode: 'enforce',
        version: 'TLSv1.3',
        verified: true,
      });

      const repo = bed.server.daemon.core.messagesRepo;
      const ok = (await repo.get(id))!;
      expect(trace(ok, []).map((t) => t.detail)).to.deep.equal([`${ok.attempts[0]!.log} [TLS: TLSv1.3 mta-sts/enforce verified]`]);
      const deferred = (await repo.get(waiting))!;
      expect(deferred.attempts[0]!.tls).to.deep.equal({ policy: 'mta-sts', mode: 'enforce', version: null, verified: false });
      expect(tlsText(deferred.attempts[0]!.tls!)).to.equal('clear text mta-sts/enforce unverified');

      const metrics = await (await fetch(`${bed.server.daemon.parts.metrics.url}/metrics`)).text();
      expect(metrics).to.contain('postilion_delivery_tls_total{policy="mta-sts",mode="enforce",version="TLSv1.3",verified="true"} 1');
      expect(metrics).to.contain('postilion_delivery_tls_total{policy="mta-sts",mode="enforce",version="none",verified="false"} 1');
    });
  });
});
