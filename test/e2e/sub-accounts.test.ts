import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkedCli, Child, initialised } from '../helpers/child.ts';
import { startSink, type SmtpSink } from '../helpers/smtp-sink.ts';

/**
 * The bootstrap flow of reference-api §10 against the daemon as a child process: the parent
 * creates a sub account (Idempotency-Key A) and its key (Idempotency-Key B); the child adds its
 * domain and sends from it; the operator suspends it with `postilion accounts suspend` against the
 * running daemon (its key gets 401, `accounts list` shows it with its parent) and unsuspends it.
 */
describe('e2e: a platform runs a customer as a sub account', function () {
  this.timeout(60_000);
  let sink: SmtpSink;
  let dir: string;
  let child: Child | null = null;

  before(async () => {
    sink = await startSink();
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-sub-'));
  });

  after(async () => {
    await child?.kill();
    await sink?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('bootstraps the sub account, sends from its domain, and the operator suspends and unsuspends it', async () => {
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      [
        'server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]',
        'api:\n  port: 0',
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}`,
        `delivery:\n  enabled: true\n  transport:\n    example.org:\n      host: 127.0.0.1\n      port: ${sink.port}\n      tls: "off"`,
        'tracking:\n  enabled: false',
        'smtp:\n  submission:\n    enabled: false\n  inbound:\n    enabled: false',
        'shutdown:\n  grace_seconds: 2',
        '',
      ].join('\n'),
    );
    const cli = checkedCli(config, dir);
    const { accountId: parentId, key: parentKey } = initialised(await cli('init'));

    child = new Child(['--config', config, 'start'], dir);
    const api = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
    await child.waitFor(/"msg":"delivery started"/);
    const call = async (
      key: string,
      method: string,
      path: string,
      body?: unknown,
      headers: Record<string, string> = {},
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes
    ): Promise<{ status: number; body: any }> => {
      const res = await fetch(`${api}/v2/accounts/${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: await res.json() };
    };

    const create = () =>
      call(parentKey, 'POST', `${parentId}/sub-accounts`, { name: 'Customer One', website: 'customer-one.example' }, { 'idempotency-key': 'A' });
    const sub = await create();
    expect(sub.status, JSON.stringify(sub.body)).to.equal(201);
    expect((await create()).body.id).to.equal(sub.body.id);
    const subId = sub.body.id as string;
    const keyBody = { label: 'customer app', scopes: ['domains:write', 'domains:read', 'messages:send:all', 'messages:read:all'] };
    const createKey = () => call(parentKey, 'POST', `${parentId}/sub-accounts/${subId}/api-keys`, keyBody, { 'idempotency-key': 'B' });
    const key = await createKey();
    expect(key.status, JSON.stringify(key.body)).to.equal(201);
    const secret = key.body.secret_key as string;
    // A replay inside the window returns the same key.
    expect((await createKey()).body.id).to.equal(key.body.id);

    expect((await call(secret, 'POST', `${subId}/domains`, { domain: 'customer-one.example' })).status).to.equal(201);
    // The operator vouches for the DNS (no public DNS in a test).
    await cli('domains', 'verify', 'customer-one.example');
    const sent = await call(secret, 'POST', `${subId}/messages`, {
      from: { email: 'orders@customer-one.example' },
      recipients: [{ email: 'buyer@example.org' }],
      subject: 'Your order',
      text_content: 'Thanks!',
    });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const [delivered] = await sink.waitFor(1);
    expect(delivered!.raw.toString()).to.match(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=customer-one\.example;/m);
    const figures = await call(parentKey, 'GET', `${parentId}/sub-accounts/${subId}`);
    expect(figures.body).to.include({ domain_count: 1, status: 'active' });
    expect(figures.body.last_activity_at).to.be.a('string');

    // The operator, against the running daemon.
    expect(await cli('accounts', 'suspend', subId, '--reason', 'chargeback')).to.equal(`${subId}\tsuspended\n`);
    const refused = await call(secret, 'GET', `${subId}/messages`);
    expect(refused.status).to.equal(401);
    expect(refused.body.message).to.equal('Account is suspended');
    const list = await cli('accounts', 'list');
    expect(list).to.contain(`${subId}\tsuspended\t${parentId}\tCustomer One\t(suspended by operator: chargeback)`);
    expect(list).to.contain(`${parentId}\tactive\t-\t`);
    expect(await cli('accounts', 'unsuspend', subId)).to.equal(`${subId}\tactive\n`);
    expect((await call(secret, 'GET', `${subId}/messages`)).status).to.equal(200);

    child.signal('SIGTERM');
    expect(await child.exited).to.equal(0);
  });
});
