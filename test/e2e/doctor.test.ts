import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, run } from '../helpers/child.ts';
import { printedRecords, publishRecords, startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';

interface Checked {
  check: string;
  status: string;
  reason: string;
}

describe('postilion doctor against a running daemon (child processes)', function () {
  this.timeout(120_000);
  let dir: string;
  let dns: TestDnsServer;
  let daemon: Child | null = null;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-doctor-'));
    dns = await startDnsServer();
  });
  after(async () => {
    await daemon?.kill();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("checks the listeners the daemon holds and each domain's DNS records, DKIM keys and served certificates, without stopping it", async () => {
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      `server:\n  hostname: mx.doctor.test\ndns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1\n` +
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\ndelivery:\n  enabled: false\n` +
        'smtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\n',
    );
    const cli = (...args: string[]) => run(['--config', config, ...args], dir);
    const init = await cli('init');
    expect(init.code, init.stderr).to.equal(0);
    const account = /account id: ([0-9a-f-]{36})/.exec(init.stdout)![1]!;
    const added = await cli('domains', 'add', 'example.com', '--account', account);
    expect(added.code, added.stderr).to.equal(0);
    publishRecords(dns.zone, printedRecords(added.stdout));

    daemon = new Child(['--config', config, 'start'], dir);
    await daemon.waitFor(/"msg":"metrics listening"/, 60_000);
    const res = await cli('doctor', '--json');
    const report = JSON.parse(res.stdout) as { status: string; checks: Checked[] };
    const line = (name: string) => {
      const found = report.checks.find((c) => c.check === name);
      expect(found, `${name} in ${res.stdout}`).to.not.equal(undefined);
      return found!;
    };
    // No sending_ips in this configuration: the reverse DNS is a warning, nothing fails.
    expect(res.code, res.stdout + res.stderr).to.equal(0);
    expect(report.checks.filter((c) => c.status === 'FAIL')).to.deep.equal([]);
    expect(line('daemon').reason).to.match(/^running: it answers on /);
    for (const name of ['smtp-starttls', 'smtp-tls', 'inbound', 'api', 'tracking', 'metrics']) {
      expect(line(`listener ${name}`), name).to.deep.include({ status: 'OK' });
      expect(line(`listener ${name}`).reason).to.match(/ is 0: the running daemon picked 127\.0\.0\.1:\d+$/);
    }
    expect(line('listener control').status).to.equal('OK');
    expect(line('tls smtp-submission served')).to.deep.include({ status: 'OK' });
    for (const name of ['dns example.com spf', 'dns example.com dmarc', 'dns example.com mx']) expect(line(name).status, name).to.equal('OK');
    const dkim = report.checks.filter((c) => c.check.startsWith('dkim example.com '));
    expect(dkim).to.have.length(1);
    expect(dkim[0]!.status, dkim[0]!.reason).to.equal('OK');
    expect(report.checks.some((c) => c.check === 'domains')).to.equal(false);

    // It changed nothing: the daemon still runs and answers the CLI.
    expect(daemon.stdout).to.not.match(/"level":50/);
    const list = await cli('domains', 'list', '--account', account);
    expect(list.code, list.stderr).to.equal(0);
    expect(list.stdout).to.match(/^example\.com\tdns_valid=/m);
  });
});
