import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config/load.ts';
import { Child } from '../helpers/child.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PRODUCTION = join(ROOT, 'config/postilion.production.yaml');

/** The first line a server sends on a new connection to 127.0.0.1:`port`. */
function greeting(port: number): Promise<string> {
  return new Promise((done, fail) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString();
      if (text.includes('\r\n')) {
        socket.destroy();
        done(text.split('\r\n')[0]!);
      }
    });
    socket.on('error', fail);
  });
}

/**
 * The production configuration the README installs (config/postilion.production.yaml):
 * listeners on the public interface for mail (inbound 25, submission 587 and 465), the API and
 * tracking on loopback behind the HTTPS proxy. It validates as shipped, and a daemon starts with
 * it, every port moved to a free one and every address to loopback by POSTILION_* variables,
 * as the unit moves data.dir and keys.dir.
 */
describe('config/postilion.production.yaml', function () {
  this.timeout(60_000);

  it('validates, with mail on the public interface and the HTTP listeners behind the proxy', () => {
    const { config } = loadConfig({ path: PRODUCTION, env: {} });
    expect(config.smtp.inbound).to.include({ enabled: true, host: '0.0.0.0', port: 25 });
    expect(config.smtp.submission).to.include({ enabled: true, host: '0.0.0.0', starttls_port: 587, tls_port: 465 });
    expect(config.api).to.include({ host: '127.0.0.1', port: 8080 });
    expect(config.api.trusted_proxies).to.include('127.0.0.1/32');
    expect(config.tracking).to.include({ enabled: true, host: '127.0.0.1', port: 8081, link_scheme: 'https' });
    expect(config.metrics).to.include({ enabled: true, host: '127.0.0.1', port: 9464 });
    expect(config.data.dir).to.equal('/var/lib/postilion/data');
    expect(config.keys.dir).to.equal('/var/lib/postilion/keys');
    expect(config.server.hostname).to.not.equal('localhost');
  });

  it('is the file the README and the systemd unit install', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).to.include('cp config/postilion.production.yaml /etc/postilion/postilion.yaml');
    const unit = readFileSync(join(ROOT, 'systemd/postilion.service'), 'utf8');
    expect(unit).to.include('config/postilion.production.yaml');
    // The unit runs what the README's build step makes, with the file where the README puts it.
    expect(unit).to.match(/^ExecStart=\/usr\/bin\/node \/opt\/postilion\/dist\/cli\/postilion\.js --config \/etc\/postilion\/postilion\.yaml start$/m);
    expect(readme).to.include('(cd /opt/postilion && npm ci && npm prune --omit=dev)');
  });

  describe('a daemon started with it (ports and addresses moved to free loopback ones)', () => {
    let dir: string;
    let child: Child | null = null;

    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'postilion-production-'));
    });
    after(async () => {
      await child?.kill();
      rmSync(dir, { recursive: true, force: true });
    });

    it('starts, is ready, answers the API, SMTP and tracking, and stops with status 0', async () => {
      child = new Child(['--config', PRODUCTION, 'start'], dir, {
        POSTILION_DATA__DIR: join(dir, 'data'),
        POSTILION_KEYS__DIR: join(dir, 'keys'),
        POSTILION_API__PORT: '0',
        POSTILION_SMTP__SUBMISSION__HOST: '127.0.0.1',
        POSTILION_SMTP__SUBMISSION__STARTTLS_PORT: '0',
        POSTILION_SMTP__SUBMISSION__TLS_PORT: '0',
        POSTILION_SMTP__INBOUND__HOST: '127.0.0.1',
        POSTILION_SMTP__INBOUND__PORT: '0',
        POSTILION_TRACKING__PORT: '0',
        POSTILION_METRICS__PORT: '0',
      });
      const api = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
      const metrics = (await child.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"metrics listening"/))[1]!;
      const tracking = (await child.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"tracking listening"/))[1]!;
      const inbound = Number((await child.waitFor(/"port":(\d+),"msg":"inbound SMTP listening"/))[1]);
      const submission = Number((await child.waitFor(/"ports":\[\{"port":(\d+),"tls":"starttls"\}/))[1]);
      const key = (await child.waitFor(/aha-sk-[A-Za-z0-9]{64}/))[0];
      expect(child.stdout).to.match(/"config":"[^"]*config\/postilion\.production\.yaml"/);

      expect((await fetch(`${metrics}/readyz`)).status).to.equal(200);
      const ping = await fetch(`${api}/v2/ping`, { headers: { authorization: `Bearer ${key}` } });
      expect(ping.status).to.equal(200);
      expect(await greeting(inbound)).to.match(/^220 mail\.example\.com /);
      expect(await greeting(submission)).to.match(/^220 mail\.example\.com /);
      expect((await fetch(`${tracking}/o/unknown`, { headers: { host: 'track.example.com' } })).status).to.equal(404);

      child.signal('SIGTERM');
      expect(await child.exited).to.equal(0);
    });
  });
});
