import { expect } from 'chai';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EVERY_GLOBAL_SCOPE } from '../../../src/accounts/scopes.ts';
import { main } from '../../../src/cli/main.ts';
import { run } from '../../helpers/child.ts';
import { printedRecords, publishRecords, startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';

/**
 * `postilion accounts|keys|domains …` through main(), against a daemon running in this process
 * (over its control socket) and against a stopped data directory (the store opened directly).
 * The same script runs both ways; what it prints, and its exit statuses, must be the same.
 */
const HOSTNAME = 'mx.postilion.test';
const SENDING_IP = '192.0.2.10';
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const SECRET = /aha-sk-[A-Za-z0-9]{64}/;
const UNKNOWN_ID = '01900000-0000-7000-8000-000000000000';

interface Result {
  code: number;
  out: string;
  err: string;
}

interface Transcript {
  lines: Array<{ args: string[] } & Result>;
  account: string;
  keys: { scoped: string; v1: string; deleted: string };
}

describe('postilion accounts, keys and domains (CLI), daemon running or stopped', function () {
  this.timeout(30_000);
  let dir: string;
  let dns: TestDnsServer;
  let configPath: string;
  let server: TestServer | null;
  let logLines: string[];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-admin-cli-'));
    dns = await startDnsServer();
    server = null;
    logLines = [];
    configPath = join(dir, 'postilion.yaml');
    writeFileSync(
      configPath,
      `server:\n  hostname: ${HOSTNAME}\n  sending_ips: [${SENDING_IP}]\ndns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1\n` +
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\nlog:\n  level: silent\n`,
    );
  });

  afterEach(async () => {
    await server?.stop();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The daemon in this process, on the directory and DNS the CLI's configuration names. */
  async function startDaemon(): Promise<TestServer> {
    server = await startServer({
      dir,
      logLines,
      config: { dns: { servers: [dns.address], timeout_ms: 500, tries: 1 }, server: { hostname: HOSTNAME, sending_ips: [SENDING_IP] } },
    });
    return server;
  }

  async function cli(...args: string[]): Promise<Result> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  /**
   * Every admin command, good and bad input, in one order. `effects` runs after each step that
   * changes something the HTTP API can see (only with the daemon running: it checks at once).
   */
  async function script(effects: (step: string, t: Transcript) => Promise<void>): Promise<Transcript> {
    const t: Transcript = { lines: [], account: '', keys: { scoped: '', v1: '', deleted: '' } };
    const step = async (...args: string[]) => {
      const res = await cli(...args);
      t.lines.push({ args, ...res });
      return res;
    };
    const ok = async (...args: string[]) => {
      const res = await step(...args);
      expect(res.code, `${args.join(' ')}: ${res.err}`).to.equal(0);
      expect(res.err).to.equal('');
      return res;
    };

    const init = await step('init');
    expect(init.code).to.equal(1);
    expect(init.err).to.contain('already initialised; use `postilion accounts create` and `postilion keys create`');

    const created = await ok('accounts', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example');
    expect(created.out).to.match(/^[0-9a-f-]{36}\tAcme\n$/);
    t.account = created.out.slice(0, 36);
    const listed = await ok('accounts', 'list');
    expect(listed.out.split('\n')).to.have.length(3);
    expect(listed.out).to.match(/^[0-9a-f-]{36}\tactive\t-\tPostilion\n/);
    expect(listed.out).to.contain(`${t.account}\tactive\t-\tAcme\n`);

    const scoped = await ok('keys', 'create', '--account', t.account, '--label', 'ci', '--scope', 'accounts:read', '--ip', '127.0.0.1');
    expect(scoped.out).to.match(/^key id: [0-9a-f-]{36}\nAPI key \(shown once\): aha-sk-[A-Za-z0-9]{64}\n$/);
    t.keys.scoped = SECRET.exec(scoped.out)![0];
    await effects('scoped key', t);
    const v1 = await ok('keys', 'create', '--account', t.account.toUpperCase(), '--label', 'legacy', '--v1');
    t.keys.v1 = SECRET.exec(v1.out)![0];
    const every = await ok('keys', 'create', '--account', t.account, '--label', 'everything');
    const everyId = /^key id: ([0-9a-f-]{36})$/m.exec(every.out)![1]!;
    t.keys.deleted = SECRET.exec(every.out)![0];
    const keys = await ok('keys', 'list', '--account', t.account);
    expect(
      keys.out
        .split('\n')
        .slice(0, -1)
        .map((line) => line.split('\t').slice(1)),
    ).to.deep.equal([
      ['ci', 'accounts:read'],
      ['legacy', 'messages:send:all'],
      ['everything', EVERY_GLOBAL_SCOPE.join(',')],
    ]);
    expect(keys.out).to.not.contain('*');
    await effects('keys', t);
    const deleted = await ok('keys', 'delete', '--account', t.account, '--key', everyId.toUpperCase());
    expect(deleted.out).to.equal(`deleted ${everyId} (everything)\n`);
    await effects('deleted', t);

    const added = await ok('domains', 'add', 'Example.COM.', '--account', t.account, '--rotation-days', '30');
    const records = printedRecords(added.out);
    expect(added.out).to.match(/^example\.com {2}dns_valid=false {2}last check: never\n/);
    expect(records.map((r) => r.type)).to.include.members(['TXT', 'CNAME', 'MX']);
    expect(records.every((r) => !r.ok)).to.equal(true);
    publishRecords(dns.zone, records);
    const checked = await ok('domains', 'check', 'example.com');
    expect(checked.out).to.match(/^example\.com {2}dns_valid=true {2}last check: \d{4}-/);
    expect(printedRecords(checked.out).every((r) => r.ok)).to.equal(true);
    await effects('domain valid', t);
    const domains = await ok('domains', 'list', '--account', t.account);
    expect(domains.out).to.match(/^example\.com\tdns_valid=true\t[0-9a-f-]{36}\n$/);
    const rotated = await ok('domains', 'rotate-dkim', 'example.com');
    expect(rotated.out).to.match(/^rotated: active selector now pst\w+; the old key stays published until \d{4}-\d\d-\d\dT/);
    // The next standby is new and unpublished: refused, with what to publish.
    const again = await step('domains', 'rotate-dkim', 'example.com');
    expect(again.code).to.equal(2);
    expect(again.err).to.match(/^not rotated: publish the standby key first, then run this again:\n {2}TXT pst\w+\._domainkey\.example\.com\n {6}v=DKIM1; /);
    expect(again.err).to.match(/postilion: standby DKIM key not published\n$/);

    // Verified by hand (a laptop): valid at once, shown as such, and cleared again.
    await ok('domains', 'add', 'laptop.test', '--account', t.account);
    const marked = await ok('domains', 'verify', 'laptop.test');
    expect(marked.out).to.match(/^laptop\.test: DNS marked as verified by hand \(\d{4}-\d\d-\d\dT[^)]+\); it may send now\./);
    expect((await ok('domains', 'list', '--account', t.account)).out).to.match(/^laptop\.test\tdns_valid=true \(verified by hand\)\t/m);
    const cleared = await ok('domains', 'verify', 'laptop.test', '--clear');
    expect(cleared.out).to.equal(
      'laptop.test: the verified-by-hand mark is cleared; dns_valid=false until its records are found (postilion domains check laptop.test)\n',
    );
    expect((await ok('domains', 'list', '--account', t.account)).out).to.match(/^laptop\.test\tdns_valid=false\t/m);

    // Bad input: exit 2 and the message, before anything is written.
    const refusals: Array<[string[], string]> = [
      [['domains', 'verify', 'nope.example'], 'postilion: domain nope.example not found\n'],
      [['keys', 'list', '--account', UNKNOWN_ID], 'postilion: account not found\n'],
      [['keys', 'list', '--account', 'not-an-id'], 'postilion: --account: "not-an-id" is not an account id\n'],
      [['keys', 'create', '--account', 'nope', '--label', 'x'], 'postilion: --account: "nope" is not an account id\n'],
      [['keys', 'create', '--account', t.account, '--label', 'x', '--scope', 'nope'], 'postilion: invalid scope "nope"'],
      [['keys', 'create', '--account', t.account, '--label', 'x', '--ip', '0.0.0.0/0'], 'postilion: ip_allow_list: "0.0.0.0/0" would allow every address\n'],
      [['keys', 'delete', '--account', t.account, '--key', 'zzz'], 'postilion: --key: "zzz" is not a key id\n'],
      [['keys', 'delete', '--account', t.account, '--key', UNKNOWN_ID], 'postilion: api key not found\n'],
      [['accounts', 'create', '--name', 'X', '--owner-email', 'not an address'], 'postilion: '],
      [['domains', 'add', 'example.com', '--account', t.account], 'postilion: domain already exists\n'],
      [['domains', 'add', 'not a domain', '--account', t.account], 'postilion: invalid domain name'],
      [['domains', 'add', 'other.example', '--account', UNKNOWN_ID], 'postilion: account not found\n'],
      [['domains', 'list', '--account', UNKNOWN_ID], 'postilion: account not found\n'],
      [['domains', 'check', 'nope.example'], 'postilion: domain nope.example not found\n'],
      [['domains', 'rotate-dkim', 'nope.example'], 'postilion: domain nope.example not found\n'],
    ];
    for (const [args, message] of refusals) {
      const res = await step(...args);
      expect(res.code, `${args.join(' ')}: ${res.err}`).to.equal(2);
      expect(res.out, args.join(' ')).to.equal('');
      expect(res.err, args.join(' ')).to.satisfy((e: string) => e.startsWith(message), `${args.join(' ')}: ${res.err}`);
    }
    expect((await ok('accounts', 'list')).out.split('\n')).to.have.length(3);
    expect((await ok('keys', 'list', '--account', t.account)).out.split('\n')).to.have.length(3);
    expect((await ok('domains', 'list', '--account', t.account)).out.split('\n')).to.have.length(3);
    return t;
  }

  /** What differs between two runs of the script by nature: ids, secrets, keys, selectors, times. */
  function normalised(t: Transcript): unknown[] {
    const clean = (text: string) =>
      text
        .replace(SECRET, '<secret>')
        .replace(/aha-sk-[A-Za-z0-9]{64}/g, '<secret>')
        .replace(UUID, '<id>')
        .replace(/p=[A-Za-z0-9+/=]+/g, 'p=<key>')
        .replace(/pst\d{8}[a-z0-9]{4}e?/g, '<selector>')
        .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>');
    return t.lines.map((l) => ({ args: l.args.map(clean), code: l.code, out: clean(l.out), err: clean(l.err) }));
  }

  /** The effects, seen through the daemon's HTTP API. */
  async function keyWorks(daemon: TestServer, t: Transcript): Promise<void> {
    const asScoped = await call(daemon, 'GET', `/v2/accounts/${t.account}`, { key: t.keys.scoped });
    expect(asScoped.status, JSON.stringify(asScoped.body)).to.equal(200);
    expect(asScoped.body.name).to.equal('Acme');
  }

  async function v1Sends(daemon: TestServer, t: Transcript): Promise<void> {
    const body = { from: { email: 'app@example.com' }, recipients: [{ email: 'rcpt@example.org' }], content: { subject: 'Hi', text_body: 'Hello' } };
    const res = await call(daemon, 'POST', '/v1/email/send', { key: null, headers: { 'x-api-key': t.keys.v1 }, body, operationId: null });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body).to.deep.include({ success_count: 1, fail_count: 0 });
  }

  it('runs every admin command over the control socket, identically to a stopped data directory, each effect live at once', async () => {
    const daemon = await startDaemon();
    const running = await script(async (step, t) => {
      switch (step) {
        case 'scoped key':
          return keyWorks(daemon, t);
        case 'keys': {
          // A v1 key authenticates on /v1 at once (the sender domain is not added yet: 400, not 403).
          const res = await call(daemon, 'POST', '/v1/email/send', { key: null, headers: { 'x-api-key': t.keys.v1 }, body: {}, operationId: null });
          expect(res.status, JSON.stringify(res.body)).to.equal(400);
          expect((await call(daemon, 'GET', '/v2/ping', { key: t.keys.deleted })).status).to.equal(200);
          return;
        }
        case 'deleted':
          expect((await call(daemon, 'GET', '/v2/ping', { key: t.keys.deleted })).status).to.equal(401);
          return;
        case 'domain valid':
          return v1Sends(daemon, t);
      }
    });
    // The daemon answered: had the CLI opened the store, it would have found it locked (exit 2).
    expect(statSync(join(dir, 'data', 'control.sock')).mode & 0o777).to.equal(0o600);
    const log = logLines.join('\n');
    for (const secret of Object.values(running.keys)) expect(log).to.not.contain(secret);
    const keyLines = logLines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'operator created an API key');
    expect(keyLines).to.have.length(3);
    expect(keyLines[0]).to.include({ op: 'createKey', account_id: running.account, kind: 'v2' });
    expect(logLines.some((l) => l.includes('"msg":"operator deleted an API key"'))).to.equal(true);
    await daemon.stop();
    server = null;

    // The same script on a fresh, stopped data directory (made by `init`, as the daemon makes it).
    rmSync(join(dir, 'data'), { recursive: true, force: true });
    rmSync(join(dir, 'keys'), { recursive: true, force: true });
    // The zone keeps the first run's records: the new DKIM selectors are unpublished until the script publishes them.
    const init = await cli('init');
    expect(init.code, init.err).to.equal(0);
    const stopped = await script(async () => {});
    expect(normalised(stopped)).to.deep.equal(normalised(running));

    // What the stopped run wrote serves the daemon once it starts.
    const after = await startDaemon();
    await keyWorks(after, stopped);
    await v1Sends(after, stopped);
    expect((await call(after, 'GET', '/v2/ping', { key: stopped.keys.deleted })).status).to.equal(401);
  });

  it('serves a `postilion` child process on the socket while the daemon holds the store', async () => {
    const daemon = await startDaemon();
    const created = await run(['--config', configPath, 'keys', 'create', '--account', daemon.accountId, '--label', 'child', '--scope', 'accounts:read'], dir);
    expect(created.code, created.stderr).to.equal(0);
    const secret = SECRET.exec(created.stdout)![0];
    expect((await call(daemon, 'GET', `/v2/accounts/${daemon.accountId}`, { key: secret })).status).to.equal(200);
    const bad = await run(['--config', configPath, 'keys', 'list', '--account', UNKNOWN_ID], dir);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.equal('postilion: account not found\n');
  });

  describe('the control socket', () => {
    let socket: string;

    beforeEach(async () => {
      await startDaemon();
      socket = join(dir, 'data', 'control.sock');
    });

    function raw(
      method: string,
      path: string,
      body?: string | Buffer,
      headers: Record<string, string> = {},
    ): Promise<{ status: number; body: string; connection: string | undefined }> {
      return new Promise((resolve, reject) => {
        const req = request({ socketPath: socket, method, path, agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }));
        });
        // The server may close while a refused body is still being written.
        req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? undefined : reject(err)));
        req.end(body);
      });
    }

    it('refuses oversized, malformed and mistyped requests with a clear status, and keeps serving', async () => {
      const big = await raw('POST', '/v1/admin/listAccounts', Buffer.alloc(65 * 1024, 0x20));
      expect(big.status).to.equal(413);
      expect(JSON.parse(big.body).message).to.match(/^request body too large/);
      expect(big.connection).to.equal('close');
      // Declared larger than the limit: refused before a byte of the body is read.
      const declared = await raw('POST', '/v1/admin/createKey', '{}', { 'content-length': String(1024 * 1024) });
      expect(declared.status).to.equal(413);

      const cases: Array<[string, string, number, RegExp]> = [
        ['/v1/admin/listAccounts', '{"accounts":', 400, /^the body is not valid JSON$/],
        ['/v1/admin/listAccounts', '[]', 400, /^listAccounts: /],
        ['/v1/admin/createKey', '{"account":"x","label":"y","scopes":"*","ip_allow_list":[],"v1":false}', 400, /^createKey: scopes: /],
        ['/v1/admin/createAccount', '{"name":"a","owner_email":"a@b.example","website":"https://a","admin":true}', 400, /^createAccount: .*admin/],
        ['/v1/admin/listKeys', '{}', 400, /^listKeys: account: /],
        ['/v1/admin/constructor', '{}', 404, /^no such control operation/],
        ['/v1/admin/__proto__', '{}', 404, /^no such control operation/],
      ];
      for (const [path, body, status, message] of cases) {
        const res = await raw('POST', path, body);
        expect(res.status, `${path} ${body}: ${res.body}`).to.equal(status);
        expect(JSON.parse(res.body).message, path).to.match(message);
      }
      const headers = await raw('POST', '/v1/admin/listAccounts', '{}', { 'x-filler': 'a'.repeat(16 * 1024) });
      expect(headers.status).to.equal(431);

      const list = await raw('POST', '/v1/admin/listAccounts', '{}');
      expect(list.status).to.equal(200);
      expect(JSON.parse(list.body).accounts).to.have.length(1);
      expect(statSync(socket).mode & 0o777).to.equal(0o600);
    });
  });
});
