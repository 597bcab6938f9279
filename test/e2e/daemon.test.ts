import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, run } from '../helpers/child.ts';

const KEY = /aha-sk-[A-Za-z0-9]{64}/;

describe('postilion daemon (child process)', function () {
  this.timeout(60_000);
  let dir: string;
  let configPath: string;
  const children: Child[] = [];

  function writeConfig(extra = ''): void {
    writeFileSync(
      configPath,
      `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\n${extra}shutdown:\n  grace_seconds: 5\ndelivery:\n  enabled: false\nsmtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\n`,
    );
  }

  function start(): Child {
    const child = new Child(['--config', configPath, 'start'], dir);
    children.push(child);
    return child;
  }

  async function apiUrl(child: Child): Promise<string> {
    return (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
  }

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-'));
    configPath = join(dir, 'postilion.yaml');
    writeConfig();
  });
  afterEach(async () => {
    for (const child of children.splice(0)) await child.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints a key on an empty data dir that answers ping, and stops cleanly on SIGTERM', async () => {
    const daemon = start();
    const key = (await daemon.waitFor(KEY))[0];
    const url = await apiUrl(daemon);
    const res = await fetch(`${url}/v2/ping`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).to.equal(200);
    expect(await res.json()).to.deep.equal({ message: 'pong' });
    // The secret is on the terminal once and in no log line.
    const logLines = daemon.stdout.split('\n').filter((l) => l.startsWith('{'));
    expect(logLines.some((l) => l.includes(key))).to.equal(false);
    // SMTP submission runs on the defaults too, with a certificate made on this first start.
    expect(daemon.stdout).to.contain('"msg":"self-signed SMTP certificate created"');
    expect(daemon.stdout).to.contain('"msg":"SMTP submission listening"');
    // libuv's pool: two threads per core (at least 4) unless the environment says otherwise.
    expect(daemon.stdout).to.contain(`"thread_pool":"${Math.max(4, 2 * availableParallelism())}"`);
    daemon.signal('SIGTERM');
    expect(await daemon.exited).to.equal(0);
    expect(daemon.stdout).to.contain('"msg":"stopped"');
  });

  it('keeps its state across a restart and bootstraps only once', async () => {
    const first = start();
    const key = (await first.waitFor(KEY))[0];
    const account = (await first.waitFor(/account id: ([0-9a-f-]{36})/))[1];
    const url = await apiUrl(first);
    const created = await fetch(`${url}/v2/accounts/${account}/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'kept', scopes: ['accounts:read'] }),
    });
    const second = (await created.json()) as { secret_key: string };
    first.signal('SIGINT');
    expect(await first.exited).to.equal(0);

    const again = start();
    const url2 = await apiUrl(again);
    expect(again.stdout).to.not.match(KEY);
    const res = await fetch(`${url2}/v2/accounts/${account}`, { headers: { authorization: `Bearer ${second.secret_key}` } });
    expect(res.status).to.equal(200);
  });

  it('refuses a second daemon on the same data directory with a clear message', async () => {
    const daemon = start();
    await apiUrl(daemon);
    const second = await run(['--config', configPath, 'start'], dir);
    expect(second.code).to.equal(2);
    expect(second.stderr).to.match(/data directory .* is in use by another process/);
  });

  it('applies a changed rate limit on SIGHUP and keeps running on a broken file', async () => {
    const daemon = start();
    const key = (await daemon.waitFor(KEY))[0];
    const url = await apiUrl(daemon);
    const ping = async () => (await fetch(`${url}/v2/ping`, { headers: { authorization: `Bearer ${key}` } })).status;
    writeConfig('  rate_limits:\n    general:\n      per_second: 0.01\n      burst: 1\n');
    daemon.signal('SIGHUP');
    await daemon.waitFor(/"msg":"configuration reloaded"/);
    expect(await ping()).to.equal(200);
    expect(await ping()).to.equal(429);

    writeFileSync(configPath, 'api:\n  nonsense: 1\n');
    daemon.signal('SIGHUP');
    await daemon.waitFor(/reload failed, configuration unchanged/);
    expect(daemon.stdout).to.contain('api.nonsense');
    expect(await ping()).to.equal(429);
  });

  it('stops with a message naming the option when the configuration is invalid', async () => {
    writeFileSync(configPath, 'api:\n  port: "eighty"\n  colour: blue\n');
    const res = await run(['--config', configPath, 'start'], dir);
    expect(res.code).to.equal(2);
    expect(res.stderr).to.contain('api.port');
    expect(res.stderr).to.contain('api.colour');
    const env = await run(['start'], dir, { POSTILION_API__PROT: '1' });
    expect(env.code).to.equal(2);
    expect(env.stderr).to.contain('POSTILION_API__PROT');
  });

  it('stops with the file and line when the bounce-rules file is bad or missing', async () => {
    const rules = join(dir, 'bounce-rules');
    writeFileSync(rules, '# rules\n5xx  bounce  InvalidRecipient  /user unknown/i\n4xx  sometimes  TransientFailure  /./\n');
    const config = (file: string) =>
      `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\nsmtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\ndelivery:\n  bounce_rules: ${file}\n`;
    writeFileSync(configPath, config(rules));
    const bad = await run(['--config', configPath, 'start'], dir);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.contain(`delivery.bounce_rules: ${rules}:3: expected`);
    expect(bad.stderr).to.not.contain('    at ');

    writeFileSync(configPath, config(join(dir, 'missing-rules')));
    const missing = await run(['--config', configPath, 'start'], dir);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.contain('delivery.bounce_rules: cannot read');
  });

  it('initialises with `init` once, and creates keys with `keys create`', async () => {
    const init = await run(['--config', configPath, 'init', '--name', 'Acme', '--owner-email', 'ops@acme.example'], dir);
    expect(init.code).to.equal(0);
    const account = /account id: ([0-9a-f-]{36})/.exec(init.stdout)![1]!;
    expect(init.stdout).to.match(KEY);
    const twice = await run(['--config', configPath, 'init'], dir);
    expect(twice.code).to.equal(1);
    expect(twice.stderr).to.contain('already initialised');

    const created = await run(
      ['--config', configPath, 'keys', 'create', '--account', account, '--label', 'cli', '--scope', 'accounts:read', '--ip', '127.0.0.1'],
      dir,
    );
    expect(created.code).to.equal(0);
    const key = KEY.exec(created.stdout)![0];
    const bad = await run(['--config', configPath, 'keys', 'create', '--account', account, '--label', 'x', '--scope', 'nope'], dir);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.contain('invalid scope "nope"');
    const listed = await run(['--config', configPath, 'accounts', 'list'], dir);
    expect(listed.stdout).to.contain(account);

    const daemon = start();
    const url = await apiUrl(daemon);
    expect(daemon.stdout).to.not.match(KEY);
    const res = await fetch(`${url}/v2/accounts/${account}`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).to.equal(200);
    expect(((await res.json()) as { name: string }).name).to.equal('Acme');
  });

  it('keeps every acknowledged write after kill -9', async () => {
    const daemon = start();
    const key = (await daemon.waitFor(KEY))[0];
    const account = (await daemon.waitFor(/account id: ([0-9a-f-]{36})/))[1];
    const url = await apiUrl(daemon);
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fetch(`${url}/v2/accounts/${account}/api-keys`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ label: `k${i}`, scopes: ['accounts:read'] }),
        }).then((r) => r.json() as Promise<{ id: string; secret_key: string }>),
      ),
    );
    daemon.signal('SIGKILL');
    await daemon.exited;

    const again = start();
    const url2 = await apiUrl(again);
    const list = (await (await fetch(`${url2}/v2/accounts/${account}/api-keys`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
      data: Array<{ id: string }>;
    };
    const ids = new Set(list.data.map((k) => k.id));
    for (const c of created) expect(ids.has(c.id), c.id).to.equal(true);
    const res = await fetch(`${url2}/v2/ping`, { headers: { authorization: `Bearer ${created[19]!.secret_key}` } });
    expect(res.status).to.equal(200);
  });
});
