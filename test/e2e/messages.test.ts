import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, run } from '../helpers/child.ts';
import { printedRecords, publishRecords, startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';

describe('e2e: sending through the running daemon', function () {
  this.timeout(60_000);
  let dir: string;
  let dns: TestDnsServer;
  let config: string;
  const children: Child[] = [];
  const cli = (...args: string[]) => run(['--config', config, ...args], dir);
  const start = () => {
    const child = new Child(['--config', config, 'start'], dir);
    children.push(child);
    return child;
  };
  const urlOf = async (child: Child) => (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-messages-'));
    dns = await startDnsServer();
    config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      `server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]\ndns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1\n` +
        `api:\n  port: 0\nsmtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\ndata:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\ndelivery:\n  enabled: false\n`,
    );
  });
  after(async () => {
    for (const child of children) await child.kill();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('accepts v2 and v1 sends, reads them back, and still has them after kill -9 and a restart', async () => {
    const init = await cli('init');
    const account = /account id: ([0-9a-f-]{36})/.exec(init.stdout)![1]!;
    const key = /aha-sk-[A-Za-z0-9]{64}/.exec(init.stdout)![0];
    const v1 = await cli('keys', 'create', '--account', account, '--label', 'legacy', '--v1');
    expect(v1.code, v1.stderr).to.equal(0);
    const v1Key = /aha-sk-[A-Za-z0-9]{64}/.exec(v1.stdout)![0];
    const added = await cli('domains', 'add', 'example.com', '--account', account);
    expect(added.code, added.stderr).to.equal(0);
    publishRecords(dns.zone, printedRecords(added.stdout));
    expect((await cli('domains', 'check', 'example.com')).stdout).to.contain('dns_valid=true');

    let daemon = start();
    let url = await urlOf(daemon);
    const messages = `${url}/v2/accounts/${account}/messages`;
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const sent = await fetch(messages, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        from: { email: 'app@example.com', name: 'App' },
        recipients: [{ email: 'ann@example.org', name: 'Ann', substitutions: { first: 'Ann' } }, { email: 'bob@example.org' }],
        subject: 'Hi {{ first | default("there") }}',
        html_content: '<p>Hello {{ first | default("you") }}</p>',
      }),
    });
    expect(sent.status).to.equal(202);
    const data = ((await sent.json()) as { data: Array<{ id: string; status: string }> }).data;
    expect(data.map((d) => d.status)).to.deep.equal(['queued', 'queued']);

    const legacy = await fetch(`${url}/v1/email/send`, {
      method: 'POST',
      headers: { 'x-api-key': v1Key, 'content-type': 'application/json' },
      body: JSON.stringify({
        from: { email: 'app@example.com' },
        recipients: [{ email: 'cid@example.org' }],
        content: { subject: 'Legacy', text_body: 'plain' },
      }),
    });
    expect(legacy.status).to.equal(201);
    expect(await legacy.json()).to.deep.equal({ success_count: 1, fail_count: 0, failed_recipients: [], errors: [] });

    const ann = await fetch(`${messages}/${encodeURIComponent(data[0]!.id)}`, { headers: auth });
    const body = (await ann.json()) as { subject: string; status: string; content: string };
    expect(body.subject).to.equal('Hi Ann');
    expect(body.status).to.equal('Received');
    expect(body.content).to.contain('Hello Ann').and.to.contain('To: "Ann" <ann@example.org>');

    // A 202/201 means synced to disk: the messages survive a kill -9 right after.
    await daemon.kill();
    daemon = start();
    url = await urlOf(daemon);
    const list = await fetch(`${url}/v2/accounts/${account}/messages?sender=app@example.com`, { headers: auth });
    const listed = (await list.json()) as { data: Array<{ recipient: string; subject: string }> };
    expect(listed.data.map((m) => `${m.recipient} ${m.subject}`).sort()).to.deep.equal([
      'ann@example.org Hi Ann',
      'bob@example.org Hi there',
      'cid@example.org Legacy',
    ]);
    daemon.signal('SIGTERM');
    expect(await daemon.exited).to.equal(0);
  });
});
