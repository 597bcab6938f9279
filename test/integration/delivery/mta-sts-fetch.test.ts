import { expect } from 'chai';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { fetchPolicyText, PolicyFetchError, type PolicyFetchOptions } from '../../../src/delivery/tls-policy/policy-fetch.ts';
import { startTestCa, type TestCa } from '../../helpers/tls.ts';

/** The policy fetch against a real HTTPS server on loopback with a certificate of a test CA. */
describe('MTA-STS policy fetch', function () {
  this.timeout(20_000);
  let ca: TestCa;
  let server: Server;
  let port: number;
  let answer: (res: import('node:http').ServerResponse) => void;

  before(async () => {
    ca = await startTestCa();
    const issued = await ca.issue(['mta-sts.example.org']);
    server = createServer({ key: issued.key, cert: issued.chain }, (_req, res) => answer(res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const options = (over: Partial<PolicyFetchOptions> = {}): PolicyFetchOptions => ({
    resolver: { addresses: async (name) => (name === 'mta-sts.example.org' ? ['127.0.0.1'] : []) },
    port,
    timeoutMs: 1000,
    extraCa: ca.cert,
    allowPrivate: true,
    ...over,
  });
  const failure = (p: Promise<string>) =>
    p.then(
      (text) => expect.fail(`fetched ${text}`),
      (err: unknown) => {
        expect(err).to.be.instanceOf(PolicyFetchError);
        return err as PolicyFetchError;
      },
    );

  it('fetches the policy over HTTPS with a certificate valid for mta-sts.<domain>', async () => {
    answer = (res) => res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('version: STSv1\n');
    expect(await fetchPolicyText('example.org', options())).to.equal('version: STSv1\n');
  });

  it('refuses a loopback policy host unless allowed, and a certificate it cannot verify', async () => {
    answer = (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('version: STSv1\n');
    expect((await failure(fetchPolicyText('example.org', options({ allowPrivate: false })))).message).to.match(/127\.0\.0\.1, a loopback address/);
    const untrusted = await failure(fetchPolicyText('example.org', options({ extraCa: null })));
    expect(untrusted.webpki).to.equal(true);
  });

  it('follows no redirect, takes only text/plain, at most 64 KiB, within the time', async () => {
    answer = (res) => res.writeHead(301, { location: 'https://elsewhere.example/' }).end();
    expect((await failure(fetchPolicyText('example.org', options()))).message).to.contain('HTTP 301');
    answer = (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<p>');
    expect((await failure(fetchPolicyText('example.org', options()))).message).to.contain('not text/plain');
    answer = (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(70_000));
    expect((await failure(fetchPolicyText('example.org', options()))).message).to.contain('larger than 65536 bytes');
    answer = (res) => res.writeHead(200, { 'content-type': 'text/plain' }).write('version: STSv1\n');
    expect((await failure(fetchPolicyText('example.org', options({ timeoutMs: 300 })))).message).to.contain('within 300 ms');
  });
});
