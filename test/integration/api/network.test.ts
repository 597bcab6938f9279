import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { writeTestCertificate } from '../../helpers/tls.ts';

/** GET /v2/ping over HTTPS trusting `ca`; returns the status and the certificate the server showed. */
function httpsPing(url: string, ca: string, key: string): Promise<{ status: number; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${url}/v2/ping`, { ca, agent: false, headers: { authorization: `Bearer ${key}` } }, (res) => {
      const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, fingerprint }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A request from a given local address (the whole 127.0.0.0/8 is loopback). */
function fromAddress(url: string, localAddress: string, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v2/ping`, { localAddress, headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('client address, allow lists and HTTPS', () => {
  describe('IP allow list', () => {
    let server: TestServer;
    let base: string;
    before(async () => {
      server = await startServer();
      base = `/v2/accounts/${server.accountId}/api-keys`;
    });
    after(async () => {
      await server.stop();
    });

    async function keyWithList(list: string[], scopes = ['api-keys:read', 'api-keys:write']) {
      const res = await call(server, 'POST', base, { body: { label: 'ip', scopes, ip_allow_list: list }, operationId: 'createAPIKey' });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      return res.body as { id: string; secret_key: string; ip_allow_list: string[] };
    }

    it('canonicalises and de-duplicates entries', async () => {
      const key = await keyWithList(['127.0.0.1', '10.1.2.3/8', '10.0.0.0/8', '2001:DB8:0:0::1', '::ffff:192.0.2.1']);
      expect(key.ip_allow_list).to.deep.equal(['127.0.0.1/32', '10.0.0.0/8', '2001:db8::1/128', '192.0.2.1/32']);
    });

    it('refuses allow-all prefixes, garbage and more than 100 entries with 400', async () => {
      for (const list of [['0.0.0.0/0'], ['::/0'], ['not-an-ip'], ['10.0.0.0/33']]) {
        const res = await call(server, 'POST', base, { body: { label: 'x', scopes: ['api-keys:read'], ip_allow_list: list }, operationId: 'createAPIKey' });
        expect(res.status, list[0]).to.equal(400);
      }
      const many = Array.from({ length: 101 }, (_, i) => `10.0.${i}.1`);
      const res = await call(server, 'POST', base, { body: { label: 'x', scopes: ['api-keys:read'], ip_allow_list: many } });
      expect(res.status).to.equal(400);
      expect(res.body.message).to.contain('100');
      const dupes = [...Array.from({ length: 100 }, (_, i) => `10.0.${i}.1`), '10.0.0.1'];
      expect((await call(server, 'POST', base, { body: { label: 'x', scopes: ['api-keys:read'], ip_allow_list: dupes } })).status).to.equal(201);
    });

    it('answers 403 on every endpoint to a client outside the list, and lets a covered one in', async () => {
      const key = await keyWithList(['127.0.0.2/32']);
      expect(await fromAddress(server.url, '127.0.0.1', key.secret_key)).to.equal(403);
      expect(await fromAddress(server.url, '127.0.0.2', key.secret_key)).to.equal(200);
      const res = await call(server, 'GET', base, { key: key.secret_key, operationId: 'getAPIKeys' });
      expect(res.status).to.equal(403);
    });

    it('refuses with 409 an update that would lock the calling key out, and saves nothing', async () => {
      const key = await keyWithList([]);
      const res = await call(server, 'PUT', `${base}/${key.id}`, { key: key.secret_key, body: { ip_allow_list: ['10.0.0.0/8'] }, operationId: 'updateAPIKey' });
      expect(res.status).to.equal(409);
      expect(res.headers.get('idempotent-replayed')).to.equal(null);
      const got = await call(server, 'GET', `${base}/${key.id}`);
      expect(got.body.ip_allow_list).to.deep.equal([]);
      const ok = await call(server, 'PUT', `${base}/${key.id}`, { key: key.secret_key, body: { ip_allow_list: ['127.0.0.0/8'] }, operationId: 'updateAPIKey' });
      expect(ok.status).to.equal(200);
    });

    it('lets another key set a list that excludes the caller', async () => {
      const target = await keyWithList([]);
      const res = await call(server, 'PUT', `${base}/${target.id}`, { body: { ip_allow_list: ['10.0.0.0/8'] }, operationId: 'updateAPIKey' });
      expect(res.status).to.equal(200);
    });
  });

  describe('behind a trusted proxy', () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ config: { api: { trusted_proxies: ['127.0.0.1'] } } });
    });
    after(async () => {
      await server.stop();
    });

    it('takes the client address from X-Forwarded-For of a trusted peer', async () => {
      const res = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, {
        body: { label: 'xff', scopes: ['api-keys:read'], ip_allow_list: ['198.51.100.7'] },
      });
      const key = res.body.secret_key;
      const headers = (xff: string) => ({ 'x-forwarded-for': xff, 'x-forwarded-proto': 'https' });
      expect((await call(server, 'GET', '/v2/ping', { key, headers: headers('198.51.100.7') })).status).to.equal(200);
      expect((await call(server, 'GET', '/v2/ping', { key, headers: headers('198.51.100.8') })).status).to.equal(403);
      // A spoofed left-most hop does not help: the right-most untrusted hop is the client.
      expect((await call(server, 'GET', '/v2/ping', { key, headers: headers('198.51.100.7, 203.0.113.9') })).status).to.equal(403);
    });

    it('refuses plain HTTP relayed for a remote client, accepts it relayed as HTTPS', async () => {
      const plain = await call(server, 'GET', '/v2/ping', { headers: { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'http' } });
      expect(plain.status).to.equal(403);
      expect(plain.body.message).to.equal('HTTPS is required');
      const relayed = await call(server, 'GET', '/v2/ping', { headers: { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'https' } });
      expect(relayed.status).to.equal(200);
    });

    it('fails closed on an unreadable X-Forwarded-For hop', async () => {
      const res = await call(server, 'GET', '/v2/ping', { headers: { 'x-forwarded-for': 'unknown' } });
      expect(res.status).to.equal(400);
      expect(res.body.message).to.contain('unknown');
    });

    it('refuses a remote client whose proxy says nothing about the protocol', async () => {
      const res = await call(server, 'GET', '/v2/ping', { headers: { 'x-forwarded-for': '203.0.113.9' } });
      expect(res.status).to.equal(403);
    });
  });

  describe('without a trusted proxy', () => {
    let server: TestServer;
    before(async () => {
      server = await startServer();
    });
    after(async () => {
      await server.stop();
    });

    it('ignores X-Forwarded-For and X-Forwarded-Proto from an untrusted peer', async () => {
      const res = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, {
        body: { label: 'spoof', scopes: ['api-keys:read'], ip_allow_list: ['127.0.0.1'] },
      });
      const spoofed = await call(server, 'GET', '/v2/ping', {
        key: res.body.secret_key,
        headers: { 'x-forwarded-for': '198.51.100.7', 'x-forwarded-proto': 'http' },
      });
      expect(spoofed.status).to.equal(200);
    });
  });

  describe('on an IPv6 listener', () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ config: { api: { host: '::1' } } });
    });
    after(async () => {
      await server.stop();
    });

    it('matches an IPv6 client against IPv6 entries', async () => {
      const url = server.url;
      expect(url).to.match(/^http:\/\/\[::1\]:/);
      const inList = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, {
        body: { label: 'v6', scopes: ['api-keys:read'], ip_allow_list: ['::1'] },
      });
      const outList = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, {
        body: { label: 'v4', scopes: ['api-keys:read'], ip_allow_list: ['127.0.0.1'] },
      });
      expect((await call(server, 'GET', '/v2/ping', { key: inList.body.secret_key })).status).to.equal(200);
      expect((await call(server, 'GET', '/v2/ping', { key: outList.body.secret_key })).status).to.equal(403);
    });
  });

  describe('HTTPS listener', () => {
    let server: TestServer;
    let ca: string;
    let dir: string;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'postilion-tls-'));
      ca = (await writeTestCertificate(join(dir, 'keys'))).cert;
      server = await startServer({ dir, config: { api: { tls: { enabled: true, port: 0 } } } });
    });
    after(async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('serves the API with the certificate from keys/', async () => {
      const httpsUrl = server.daemon.parts.api.urls.find((u) => u.startsWith('https://'))!;
      expect(httpsUrl).to.be.a('string');
      const res = await httpsPing(httpsUrl.replace('127.0.0.1', 'localhost'), ca, server.adminKey);
      expect(res.status).to.equal(200);
    });

    it('presents a new certificate after a reload', async () => {
      const httpsUrl = server.daemon.parts.api.urls.find((u) => u.startsWith('https://'))!.replace('127.0.0.1', 'localhost');
      const before = await httpsPing(httpsUrl, ca, server.adminKey);
      const next = await writeTestCertificate(join(dir, 'keys'));
      server.daemon.reload(server.config);
      const after = await httpsPing(httpsUrl, next.cert, server.adminKey);
      expect(after.status).to.equal(200);
      expect(after.fingerprint).to.not.equal(before.fingerprint);
    });
  });
});
