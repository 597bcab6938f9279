import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../helpers/child.ts';
import { printedRecords, publishRecords, startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';

describe('postilion domains (CLI)', function () {
  this.timeout(60_000);
  let dir: string;
  let dns: TestDnsServer;
  let config: string;
  let account: string;
  const cli = (...args: string[]) => run(['--config', config, ...args], dir);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-domains-cli-'));
    dns = await startDnsServer();
    config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      `server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]\ndns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1\n` +
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\n`,
    );
    const init = await cli('init');
    account = /account id: ([0-9a-f-]{36})/.exec(init.stdout)![1]!;
  });
  after(async () => {
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('adds a domain, prints its records, and sees them published after `check`', async () => {
    const added = await cli('domains', 'add', 'Example.COM.', '--account', account, '--rotation-days', '30');
    expect(added.code).to.equal(0);
    const records = printedRecords(added.stdout);
    expect(records.map((r) => r.type)).to.include.members(['TXT', 'CNAME', 'MX']);
    expect(records.every((r) => !r.ok)).to.equal(true);

    publishRecords(dns.zone, records);
    const checked = await cli('domains', 'check', 'example.com');
    expect(checked.code).to.equal(0);
    expect(checked.stdout).to.contain('dns_valid=true');
    expect(printedRecords(checked.stdout).every((r) => r.ok)).to.equal(true);

    const list = await cli('domains', 'list', '--account', account);
    expect(list.stdout).to.match(/^example\.com\tdns_valid=true\t/m);
  });

  it('`check` exits 1 naming a required record that is missing, 0 when only an optional one is', async () => {
    const dmarc = dns.zone.get('_dmarc.example.com', 'TXT')!;
    dns.zone.delete('_dmarc.example.com');
    try {
      const res = await cli('domains', 'check', 'example.com');
      expect(res.code, res.stdout + res.stderr).to.equal(1);
      expect(res.stdout).to.contain('dns_valid=false');
      expect(res.stderr).to.equal('postilion: example.com: required DNS record TXT _dmarc.example.com missing\n');
      expect(printedRecords(res.stdout).find((r) => r.host === '_dmarc.example.com')!.ok).to.equal(false);
    } finally {
      dns.zone.set('_dmarc.example.com', 'TXT', dmarc);
    }
    // The MX (only for inbound routes) is optional: missing, it is shown but fails nothing.
    const mx = dns.zone.get('example.com', 'MX')!;
    dns.zone.delete('example.com', 'MX');
    try {
      const res = await cli('domains', 'check', 'example.com');
      expect(res.code, res.stdout + res.stderr).to.equal(0);
      expect(res.stderr).to.equal('');
      expect(printedRecords(res.stdout).find((r) => r.type === 'MX')!.ok).to.equal(false);
    } finally {
      dns.zone.set('example.com', 'MX', mx);
    }
  });

  it('rotates on demand once the standby is published, and refuses an unknown domain', async () => {
    const rotated = await cli('domains', 'rotate-dkim', 'example.com');
    expect(rotated.code).to.equal(0);
    expect(rotated.stdout).to.match(/^rotated: active selector now pst/);
    // The next standby is new and unpublished: a second rotation is refused and says what to publish.
    const again = await cli('domains', 'rotate-dkim', 'example.com');
    expect(again.code).to.equal(2);
    expect(again.stderr).to.contain('publish the standby key first');
    expect(again.stderr).to.match(/TXT pst\w+\._domainkey\.example\.com/);
    const unknown = await cli('domains', 'check', 'nope.example');
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.contain('not found');
  });

  it('names the question, the resolver asked and its error code when DNS does not answer a check', async () => {
    dns.failing = true;
    try {
      const res = await cli('domains', 'check', 'example.com');
      expect(res.code).to.equal(2);
      expect(res.stderr).to.contain('DNS could not be asked: DNS lookup failed: ESERVFAIL');
      expect(res.stderr).to.contain(`asked dns.servers ${dns.address}`);
      expect(res.stderr, res.stderr).to.match(/\((TXT|CNAME|MX) ([a-z0-9_-]+\.)*example\.com, asked/);
    } finally {
      dns.failing = false;
    }
    // What the last check found is kept.
    const list = await cli('domains', 'list', '--account', account);
    expect(list.stdout).to.match(/^example\.com\tdns_valid=true\t/m);
  });

  it('`check` of a domain verified by hand exits 1 while a required record is missing, and says it is verified by hand on that line', async () => {
    const added = await cli('domains', 'add', 'byhand.example', '--account', account);
    expect(added.code).to.equal(0);
    expect((await cli('domains', 'verify', 'byhand.example')).code).to.equal(0);
    const res = await cli('domains', 'check', 'byhand.example');
    expect(res.code, res.stdout + res.stderr).to.equal(1);
    expect(res.stdout).to.match(/^byhand\.example {2}dns_valid=true \(verified by hand\) {2}last check: /);
    expect(res.stderr).to.match(
      /^postilion: byhand\.example: verified by hand; DNS records TXT byhand\.example, TXT pst\w+\._domainkey\.byhand\.example, TXT _dmarc\.byhand\.example missing\n$/,
    );

    publishRecords(dns.zone, printedRecords(added.stdout));
    const published = await cli('domains', 'check', 'byhand.example');
    expect(published.code, published.stdout + published.stderr).to.equal(0);
    expect(published.stderr).to.equal('');
  });

  it('refuses a bad domain name with a clear message', async () => {
    const res = await cli('domains', 'add', 'not a domain', '--account', account);
    expect(res.code).to.equal(2);
    expect(res.stderr).to.contain('invalid domain name');
  });
});
