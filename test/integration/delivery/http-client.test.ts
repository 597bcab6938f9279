import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { HttpClient, type HttpClientOptions } from '../../../src/delivery/http.ts';
import { checkTargetUrl } from '../../../src/delivery/http-target.ts';
import { createResolver } from '../../../src/domains/resolver.ts';
import { parseCidr } from '../../../src/util/cidr.ts';
import { newWebhookSecret, signatureHeaders } from '../../../src/delivery/signing.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';

interface Received {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** What the standard library said: the parsed payload, or its error. */
  verified: boolean;
  error?: string;
}

/**
 * A webhook receiver on 127.0.0.1 that verifies every request with the `standardwebhooks`
 * package in raw-key mode (the key is the secret's UTF-8 bytes), as an application would.
 */
class Receiver {
  readonly received: Received[] = [];
  connections = 0;
  private readonly sockets = new Set<Socket>();
  private server!: Server;
  port = 0;
  /** Answers by path; the default verifies and answers 204 (or 400 when verification fails). */
  readonly routes = new Map<string, (req: IncomingMessage, res: ServerResponse, body: string) => void>();

  constructor(private readonly secret: string) {}

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const path = req.url ?? '/';
        let record: Received;
        try {
          new Webhook(this.secret, { format: 'raw' }).verify(body, req.headers as Record<string, string>);
          record = { path, headers: req.headers, body, verified: true };
        } catch (err) {
          record = { path, headers: req.headers, body, verified: false, error: (err as Error).message };
        }
        this.received.push(record);
        const route = this.routes.get(path);
        if (route) return route(req, res, body);
        res.writeHead(record.verified ? 204 : 400).end();
      });
    });
    this.server.on('connection', (socket: Socket) => {
      this.connections++;
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A port of 127.0.0.1 that nothing listens on: connections to it are refused. */
function closedPort(): Promise<number> {
  return new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

describe('HTTP client of the webhook dispatcher', () => {
  const secret = newWebhookSecret();
  let receiver: Receiver;
  let dns: TestDnsServer;
  const clients: HttpClient[] = [];

  before(async () => {
    receiver = new Receiver(secret);
    await receiver.start();
    dns = await startDnsServer();
    dns.zone.set('receiver.test', 'A', ['127.0.0.1']);
    dns.zone.set('public.test', 'A', ['93.184.216.34']);
  });
  after(async () => {
    for (const client of clients) client.close();
    await receiver.stop();
    await dns.close();
  });
  beforeEach(() => {
    receiver.received.length = 0;
    receiver.routes.clear();
  });

  /** A client with loopback allowed (as the tests' configuration does), unless told otherwise. */
  function client(options: Partial<HttpClientOptions> & { allow?: string[] } = {}): HttpClient {
    const allow = (options.allow ?? ['127.0.0.0/8']).map(parseCidr);
    const made = new HttpClient({
      resolver: createResolver({ servers: [dns.address], timeoutMs: 1000, tries: 1 }),
      allowNetworks: () => allow,
      ...options,
    });
    clients.push(made);
    return made;
  }

  const url = (path = '/hook', host = '127.0.0.1') => `http://${host}:${receiver.port}${path}`;
  const now = () => Math.floor(Date.now() / 1000);
  const envelope = (n: number) => JSON.stringify({ type: 'message.delivered', timestamp: new Date().toISOString(), webhook_id: 'w', data: { n } });

  it('POSTs a JSON body that the standardwebhooks library verifies in raw-key mode', async () => {
    const body = envelope(1);
    const outcome = await client().postSigned({ url: url(), body, id: 'msg_1', timestampSeconds: now(), secret });
    expect(outcome).to.include({ ok: true, status: 204, error: null });
    expect(outcome.durationMs).to.be.a('number');
    const [got] = receiver.received;
    expect(got).to.include({ verified: true, body, path: '/hook' });
    expect(got!.headers['content-type']).to.equal('application/json');
    expect(got!.headers['webhook-id']).to.equal('msg_1');
    expect(got!.headers['webhook-signature']).to.match(/^v1,[A-Za-z0-9+/]+=*$/);
  });

  it('reaches a name through the configured resolver, and reuses one kept-alive connection per origin', async () => {
    const http = client();
    const before = receiver.connections;
    for (let i = 0; i < 5; i++) {
      const outcome = await http.postSigned({ url: url('/hook', 'receiver.test'), body: envelope(i), id: `msg_${i}`, timestampSeconds: now(), secret });
      expect(outcome.ok, outcome.error ?? '').to.equal(true);
    }
    expect(receiver.connections - before).to.equal(1);
    expect(receiver.received.every((r) => r.verified)).to.equal(true);
  });

  it('is rejected by the verifier when the body or the timestamp is tampered with', async () => {
    const http = client();
    const ts = now();
    const signed = signatureHeaders(secret, 'msg_t', ts, envelope(1));
    const tamperedBody = await http.postJson(url(), envelope(2), { ...signed });
    expect(tamperedBody).to.include({ ok: false, status: 400, error: 'HTTP 400' });
    const tamperedTime = await http.postJson(url(), envelope(1), { ...signed, 'webhook-timestamp': String(ts + 1) });
    expect(tamperedTime).to.include({ ok: false, status: 400 });
    const otherSecret = await http.postSigned({ url: url(), body: envelope(1), id: 'msg_s', timestampSeconds: ts, secret: newWebhookSecret() });
    expect(otherSecret).to.include({ ok: false, status: 400 });
    expect(receiver.received.map((r) => r.verified)).to.deep.equal([false, false, false]);
  });

  it('treats any non-2xx as a failure and keeps only the first bytes of the answer', async () => {
    receiver.routes.set('/broken', (_req, res) => res.writeHead(500, { 'content-type': 'text/plain' }).end('x'.repeat(100_000)));
    const outcome = await client().postSigned({ url: url('/broken'), body: envelope(1), id: 'msg_5', timestampSeconds: now(), secret });
    expect(outcome).to.include({ ok: false, status: 500, error: 'HTTP 500' });
    expect(outcome.responseText.length).to.equal(4096);
  });

  it('does not follow a redirect, to a private address or anywhere else', async () => {
    receiver.routes.set('/moved', (_req, res) => res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' }).end());
    receiver.routes.set('/moved-here', (_req, res) => res.writeHead(302, { location: url('/landing') }).end());
    const http = client();
    const metadata = await http.postSigned({ url: url('/moved'), body: envelope(1), id: 'msg_r1', timestampSeconds: now(), secret });
    expect(metadata).to.include({ ok: false, status: 307 });
    expect(metadata.error).to.include('redirects are not followed');
    const local = await http.postSigned({ url: url('/moved-here'), body: envelope(1), id: 'msg_r2', timestampSeconds: now(), secret });
    expect(local).to.include({ ok: false, status: 302 });
    expect(receiver.received.map((r) => r.path)).to.deep.equal(['/moved', '/moved-here']);
  });

  it('does not follow a redirect of any kind to a loopback, private or link-local target, by address or by name', async () => {
    const locations = [
      url('/landing'),
      url('/landing', 'receiver.test'),
      `http://[::1]:${receiver.port}/landing`,
      `http://[::ffff:127.0.0.1]:${receiver.port}/landing`,
      'http://10.1.2.3/landing',
      'http://169.254.169.254/latest/meta-data/',
    ];
    const http = client();
    const asked: string[] = [];
    for (const [i, location] of locations.entries()) {
      for (const status of [301, 302, 303, 307, 308]) {
        const path = `/redirect-${i}-${status}`;
        receiver.routes.set(path, (_req, res) => res.writeHead(status, { location }).end());
        asked.push(path);
        const outcome = await http.postSigned({ url: url(path), body: envelope(i), id: `msg_${path}`, timestampSeconds: now(), secret });
        expect(outcome, `${status} to ${location}`).to.include({ ok: false, status, unreachable: false });
        expect(outcome.error, `${status} to ${location}`).to.equal(`HTTP ${status}: redirects are not followed`);
      }
    }
    // Only the first requests reached the receiver: nothing went to /landing.
    expect(receiver.received.map((r) => r.path)).to.deep.equal(asked);
  });

  it('refuses at connect time private, link-local and IPv6 loopback targets, by address or by name, even with loopback allowed', async () => {
    dns.zone.set('metadata.test', 'A', ['169.254.169.254']);
    dns.zone.set('lan.test', 'A', ['10.1.2.3']);
    // Loopback IPv4 is allowed (as in the tests' configuration); none of these is in it.
    const http = client({ timeoutMs: 2000 });
    const before = receiver.connections;
    const refused: Array<[string, string]> = [
      ['http://10.1.2.3/hook', 'refused to connect to 10.1.2.3: a private address'],
      ['http://192.168.0.10/hook', 'refused to connect to 192.168.0.10: a private address'],
      [`http://[::1]:${receiver.port}/hook`, 'refused to connect to ::1: a loopback address'],
      ['http://169.254.169.254/latest/meta-data/', 'refused to connect to 169.254.169.254: a link-local address'],
      ['http://[::ffff:169.254.169.254]/latest/meta-data/', 'a link-local address'],
      ['http://[::ffff:10.1.2.3]/hook', 'a private address'],
      ['http://metadata.test/latest/meta-data/', 'refused to connect to metadata.test: it resolves to 169.254.169.254, a link-local address'],
      ['http://lan.test/hook', 'refused to connect to lan.test: it resolves to 10.1.2.3, a private address'],
    ];
    for (const [target, message] of refused) {
      const outcome = await http.postSigned({ url: target, body: envelope(1), id: 'msg_p', timestampSeconds: now(), secret });
      // Refused, not down: the origin is not paused and probed for ever.
      expect(outcome, target).to.include({ ok: false, status: null, unreachable: false });
      expect(outcome.error, target).to.include(message);
    }
    // With nothing allowed, IPv4 and IPv6 loopback alike.
    const strict = client({ allow: [], timeoutMs: 2000 });
    for (const host of ['127.0.0.1', '[::1]', '[::ffff:127.0.0.1]', 'receiver.test']) {
      const outcome = await strict.postSigned({ url: url('/hook', host), body: envelope(1), id: 'msg_s', timestampSeconds: now(), secret });
      expect(outcome, host).to.include({ ok: false, status: null, unreachable: false });
      expect(outcome.error, host).to.include('a loopback address');
    }
    expect(receiver.connections).to.equal(before);
    expect(receiver.received).to.deep.equal([]);
  });

  it('refuses at connect time a name that resolves to loopback when loopback is not allowed (DNS rebinding)', async () => {
    const http = client({ allow: [] });
    const before = receiver.connections;
    const outcome = await http.postSigned({ url: url('/hook', 'receiver.test'), body: envelope(1), id: 'msg_d', timestampSeconds: now(), secret });
    expect(outcome).to.include({ ok: false, status: null });
    expect(outcome.error).to.include('resolves to 127.0.0.1, a loopback address');
    const literal = await http.postSigned({ url: url('/hook', '127.0.0.1'), body: envelope(1), id: 'msg_l', timestampSeconds: now(), secret });
    expect(literal).to.include({ ok: false, status: null });
    expect(literal.error).to.include('a loopback address');
    const mapped = await http.postSigned({ url: url('/hook', '[::ffff:127.0.0.1]'), body: envelope(1), id: 'msg_m', timestampSeconds: now(), secret });
    expect(mapped.error).to.include('a loopback address');
    expect(receiver.connections).to.equal(before);
    expect(receiver.received).to.deep.equal([]);
  });

  it('refuses a name that was public when saved and now resolves to loopback', async () => {
    const http = client({ allow: [] });
    const resolver = createResolver({ servers: [dns.address], timeoutMs: 1000, tries: 1 });
    dns.zone.set('flip.test', 'A', ['93.184.216.34']);
    await checkTargetUrl(url('/hook', 'flip.test'), resolver, []);
    dns.zone.set('flip.test', 'A', ['127.0.0.1']);
    const outcome = await http.postSigned({ url: url('/hook', 'flip.test'), body: envelope(1), id: 'msg_f', timestampSeconds: now(), secret });
    expect(outcome.ok).to.equal(false);
    expect(outcome.unreachable).to.equal(false);
    expect(outcome.error).to.include('refused');
    expect(receiver.received).to.deep.equal([]);
  });

  it('gives up on a receiver that does not answer in time', async () => {
    receiver.routes.set('/slow', () => undefined);
    const started = Date.now();
    const outcome = await client({ timeoutMs: 300 }).postSigned({ url: url('/slow'), body: envelope(1), id: 'msg_slow', timestampSeconds: now(), secret });
    // A timeout is a failed attempt, not an origin that is down.
    expect(outcome).to.include({ ok: false, status: null, unreachable: false });
    expect(outcome.error).to.include('timed out after 0.3 s');
    expect(Date.now() - started).to.be.within(250, 3000);
    // Headers sent, then the body never ends: the timeout covers the whole exchange.
    receiver.routes.set('/stall', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"partial":');
    });
    const stalled = await client({ timeoutMs: 300 }).postSigned({ url: url('/stall'), body: envelope(1), id: 'msg_stall', timestampSeconds: now(), secret });
    expect(stalled).to.include({ ok: false, status: 200 });
    expect(stalled.error).to.include('timed out after 0.3 s');
  });

  it('reports a refused connection and a name without address as failures, never throwing', async () => {
    const closed = await closedPort();
    const http = client();
    const refused = await http.postSigned({ url: `http://127.0.0.1:${closed}/`, body: '{}', id: 'msg_c', timestampSeconds: now(), secret });
    // Nothing answered at all: the origin is down (the dispatcher pauses it rather than spend attempts).
    expect(refused).to.include({ ok: false, status: null, unreachable: true });
    expect(refused.error).to.include('ECONNREFUSED');
    const unknown = await http.postSigned({ url: 'http://nowhere.test/', body: '{}', id: 'msg_n', timestampSeconds: now(), secret });
    expect(unknown).to.include({ ok: false, status: null, unreachable: true });
    expect(unknown.error).to.include('nowhere.test');
    const scheme = await http.postSigned({ url: 'ftp://receiver.test/', body: '{}', id: 'msg_f', timestampSeconds: now(), secret });
    expect(scheme.error).to.include('url scheme ftp is not allowed');
  });

  it('finding an origin down, withdraws its requests not yet connected: one refusal per round, not one per request', async () => {
    const closed = await closedPort();
    const http = client({ maxSocketsPerOrigin: 4 });
    const outcomes = await Promise.all(
      Array.from({ length: 40 }, (_, n) =>
        http.postSigned({ url: `http://127.0.0.1:${closed}/`, body: envelope(n), id: `msg_d${n}`, timestampSeconds: now(), secret }),
      ),
    );
    const refused = outcomes.filter((o) => o.unreachable);
    const withdrawn = outcomes.filter((o) => o.withdrawn === true);
    // At most the origin's connections were dialled; every other request came back not attempted.
    expect(refused.length).to.be.within(1, 4);
    expect(refused.length + withdrawn.length).to.equal(40);
    // Another origin is not touched, and the down one is tried again on the next request.
    expect(await http.postSigned({ url: url('/after'), body: envelope(1), id: 'msg_up', timestampSeconds: now(), secret })).to.include({ ok: true });
    expect(await http.postSigned({ url: `http://127.0.0.1:${closed}/`, body: envelope(1), id: 'msg_again', timestampSeconds: now(), secret })).to.include({
      unreachable: true,
    });
  });

  /** A route answering 204 after `ms`, counting the requests it holds at once. */
  function slowRoute(path: string, ms: number): { most: () => number } {
    let active = 0;
    let most = 0;
    receiver.routes.set(path, (_req, res) => {
      active += 1;
      most = Math.max(most, active);
      setTimeout(() => {
        active -= 1;
        res.writeHead(204).end();
      }, ms);
    });
    return { most: () => most };
  }

  it('keeps at most its connections to an origin busy; the other requests wait untimed and go out as one frees', async () => {
    const slow = slowRoute('/queued', 250);
    // 6 requests, 2 connections, 250 ms each: the last wait 500 ms for a connection, past the
    // 400 ms timeout, which counts only from when a request has its connection.
    const http = client({ maxSocketsPerOrigin: 2, timeoutMs: 400 });
    const before = receiver.connections;
    const outcomes = await Promise.all(
      [1, 2, 3, 4, 5, 6].map((n) => http.postSigned({ url: url('/queued'), body: envelope(n), id: `msg_q${n}`, timestampSeconds: now(), secret })),
    );
    expect(outcomes.map((o) => o.error)).to.deep.equal([null, null, null, null, null, null]);
    expect(slow.most()).to.equal(2);
    expect(receiver.connections - before).to.equal(2);
  });

  it('an origin of originSockets has its own number of connections', async () => {
    const slow = slowRoute('/own', 100);
    const origin = new URL(url()).origin;
    const http = client({ maxSocketsPerOrigin: 4, originSockets: { [origin]: 1 } });
    const outcomes = await Promise.all(
      [1, 2, 3].map((n) => http.postSigned({ url: url('/own'), body: envelope(n), id: `msg_o${n}`, timestampSeconds: now(), secret })),
    );
    expect(outcomes.every((o) => o.ok)).to.equal(true);
    expect(slow.most()).to.equal(1);
  });

  it('withdraws the requests to an origin that wait for a connection, not the one under way', async () => {
    slowRoute('/withdraw', 300);
    const http = client({ maxSocketsPerOrigin: 1 });
    const posts = [1, 2, 3].map((n) => http.postSigned({ url: url('/withdraw'), body: envelope(n), id: `msg_w${n}`, timestampSeconds: now(), secret }));
    await new Promise((r) => setTimeout(r, 50));
    expect(http.withdraw('http://elsewhere.test')).to.equal(0);
    const started = Date.now();
    expect(http.withdraw(new URL(url()).origin)).to.equal(2);
    const [second, third] = await Promise.all([posts[1]!, posts[2]!]);
    // At once, not after the request under way.
    expect(Date.now() - started).to.be.below(200);
    for (const outcome of [second, third]) expect(outcome).to.include({ ok: false, status: null, unreachable: false, withdrawn: true });
    expect(await posts[0]!).to.include({ ok: true, status: 204 });
    expect(receiver.received.map((r) => r.headers['webhook-id'])).to.deep.equal(['msg_w1']);
    // The connection stays usable.
    expect(await http.postSigned({ url: url('/withdraw'), body: envelope(4), id: 'msg_w4', timestampSeconds: now(), secret })).to.include({ ok: true });
  });

  it('on close, cuts the request under way (a failed attempt) and withdraws those waiting (not attempted)', async () => {
    receiver.routes.set('/never', () => undefined);
    const http = client({ maxSocketsPerOrigin: 1 });
    const posts = [1, 2].map((n) => http.postSigned({ url: url('/never'), body: envelope(n), id: `msg_c${n}`, timestampSeconds: now(), secret }));
    await new Promise((r) => setTimeout(r, 100));
    http.close();
    const [cut, waiting] = await Promise.all(posts);
    expect(cut).to.include({ ok: false, status: null });
    expect(cut!.withdrawn).to.equal(undefined);
    expect(cut!.error).to.include('the HTTP client closed');
    expect(waiting).to.include({ ok: false, withdrawn: true });
  });
});
