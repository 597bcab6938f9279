import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, run } from '../../helpers/child.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * The data directory on a real small filesystem (a 48 MiB tmpfs) that fills up: LevelDB's own
 * write errors, its kept error state, and the store reopened once there is room again. Mounting
 * needs root (CI runs as root); elsewhere these are skipped with the reason, and the same
 * behaviours are covered by injected store faults (storage-faults.test.ts).
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const MiB = 1024 * 1024;
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a full filesystem under the data directory (tmpfs)', function () {
  this.timeout(60_000);
  let mnt: string | null = null;

  before(function () {
    if (process.getuid?.() !== 0) {
      console.log('      skipped: mounting a tmpfs needs root');
      this.skip();
    }
    const dir = mkdtempSync(join(tmpdir(), 'postilion-tmpfs-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=48m', 'tmpfs', dir], { stdio: 'pipe' });
      mnt = dir;
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      console.log(`      skipped: cannot mount a tmpfs here (${(err as Error).message.split('\n')[0]})`);
      this.skip();
    }
  });
  after(() => {
    if (!mnt) return;
    execFileSync('umount', ['-l', mnt], { stdio: 'pipe' });
    rmSync(mnt, { recursive: true, force: true });
  });

  it('refuses to start below storage.min_free_bytes: one line naming the data directory, the free space and the setting, exit 2', async () => {
    const dir = join(mnt!, 'start');
    mkdirSync(dir, { recursive: true });
    const config = join(dir, 'postilion.yaml');
    writeFileSync(config, `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\n`);
    const res = await run(['--config', config, 'start'], dir);
    expect(res.code).to.equal(2);
    expect(res.stderr).to.match(
      new RegExp(
        `^postilion: cannot start: \\d+\\.\\d MiB free on the filesystem of ${join(dir, 'data')}, below storage\\.min_free_bytes 64\\.0 MiB; free some space there or lower the setting\\n$`,
      ),
    );
    // Nothing was started: no store, no listener.
    expect(res.stdout).to.not.match(/store opened|listening/);
    rmSync(dir, { recursive: true, force: true });
  });

  /** A config for a child daemon with its data and keys in `dir` (on the tmpfs), listeners on free ports. */
  function childConfig(dir: string, extra = ''): string {
    mkdirSync(dir, { recursive: true });
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\nsmtp:\n  submission:\n    enabled: false\n  inbound:\n    enabled: false\nshutdown:\n  grace_seconds: 2\n${extra}`,
    );
    return config;
  }

  it('exits within the grace period on SIGTERM while every write fails on a full filesystem', async () => {
    const dir = join(mnt!, 'sigterm');
    const config = childConfig(dir, 'storage:\n  min_free_bytes: 0\n  min_free_percent: 0\n  check_interval_ms: 100\n');
    // The keys (a new domain's DKIM key) elsewhere: the write that fails is the store's.
    const keys = mkdtempSync(join(tmpdir(), 'postilion-keys-'));
    writeFileSync(config, readFileSync(config, 'utf8').replace(`dir: ${join(dir, 'keys')}`, `dir: ${keys}`));
    const child = new Child(['--config', config, 'start'], dir);
    try {
      const key = (await child.waitFor(/aha-sk-[A-Za-z0-9]{64}/))[0];
      const accountId = (await child.waitFor(/account id: ([0-9a-f-]{36})/))[1]!;
      const url = (await child.waitFor(/"urls":\["(http:\/\/[^"]+)"/))[1]!;
      const free = statfsSync(mnt!).bavail * statfsSync(mnt!).bsize;
      writeFileSync(join(mnt!, 'sigterm-filler'), Buffer.alloc(free));
      let status = 0;
      for (let i = 0; i < 20 && status !== 507; i++) {
        const res = await fetch(`${url}/v2/accounts/${accountId}/domains`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ domain: `d${i}-${'x'.repeat(40)}.example` }),
        });
        status = res.status;
      }
      expect(status, 'a write failed on the full filesystem').to.equal(507);
      const started = Date.now();
      child.signal('SIGTERM');
      const code = await child.exited;
      expect(Date.now() - started, child.stdout.slice(-2000)).to.be.below(5000);
      expect(
        code,
        child.stdout
          .split('\n')
          .filter((l) => /stop|"level":[45]0/.test(l))
          .join('\n')
          .slice(0, 3000) + child.stderr.slice(0, 3000),
      ).to.equal(0);
    } finally {
      await child.kill();
      rmSync(join(mnt!, 'sigterm-filler'), { force: true });
      rmSync(dir, { recursive: true, force: true });
      rmSync(keys, { recursive: true, force: true });
    }
  });

  it('refuses to start on a read-only filesystem with one line, and starts once it is writable again', async () => {
    const dir = join(mnt!, 'ro');
    const config = childConfig(dir, 'storage:\n  min_free_bytes: 0\n  min_free_percent: 0\n');
    mkdirSync(join(dir, 'data'), { recursive: true });
    mkdirSync(join(dir, 'keys'), { recursive: true });
    execFileSync('mount', ['-o', 'remount,ro', mnt!], { stdio: 'pipe' });
    let res;
    try {
      res = await run(['--config', config, 'start'], dir);
    } finally {
      execFileSync('mount', ['-o', 'remount,rw', mnt!], { stdio: 'pipe' });
    }
    expect(res.code).to.equal(2);
    expect(res.stderr).to.equal(`postilion: cannot start: the filesystem of ${join(dir, 'data')} is read-only (data.dir)\n`);
    expect(existsSync(join(dir, 'data', 'CURRENT'))).to.equal(false);
    const child = new Child(['--config', config, 'start'], dir);
    try {
      await child.waitFor(/API listening/);
    } finally {
      await child.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('filled under load and freed again', () => {
    let bed: MessageBed | null = null;
    let sink: SmtpSink;
    const filler = () => join(mnt!, 'filler');

    afterEach(async () => {
      await bed?.stop();
      bed = null;
      await sink?.close();
      rmSync(filler(), { force: true });
      rmSync(join(mnt!, 'bed'), { recursive: true, force: true });
    });

    it('refuses with 507 while full, delivers every acknowledged message once with its body, and accepts again without a restart', async () => {
      sink = await startSink();
      bed = await startMessageBed(
        {
          ...POLLING,
          delivery: { enabled: true, mx_port: sink.port },
          // The guard closes on the first failed write (the floor is off): LevelDB meets ENOSPC itself.
          storage: { min_free_bytes: 0, min_free_percent: 0, check_interval_ms: 100 },
        },
        undefined,
        { dir: join(mnt!, 'bed') },
      );
      bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
      bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
      // Leave about 3 MiB.
      const free = statfsSync(mnt!).bavail * statfsSync(mnt!).bsize;
      writeFileSync(filler(), Buffer.alloc(Math.max(0, free - 3 * MiB)));
      const accepted = new Map<string, string>();
      let refused = 0;
      for (let i = 0; i < 200 && refused < 3; i++) {
        const marker = `body-${i}-${randomBytes(8).toString('hex')}`;
        const res = await bed.send(
          { recipients: [{ email: `r${i}@example.org` }], text_content: `${marker}\n${randomBytes(96 * 1024).toString('base64')}`, html_content: null },
          { operationId: null },
        );
        if (res.status === 202) accepted.set(`r${i}@example.org`, marker);
        else {
          expect(res.status, JSON.stringify(res.body)).to.equal(507);
          expect(res.body.message).to.match(/insufficient storage/);
          refused += 1;
        }
      }
      expect(refused, 'the filesystem filled').to.equal(3);
      expect(bed.server.daemon.storage.ok).to.equal(false);
      expect(bed.server.daemon.storage.reason).to.match(/no space left/);
      rmSync(filler());
      const deadline = Date.now() + 20_000;
      while (!bed.server.daemon.storage.ok) {
        if (Date.now() > deadline) throw new Error(`storage did not recover: ${bed.server.daemon.storage.reason}`);
        await wait(50);
      }
      await sink.waitFor(accepted.size, 20_000);
      await wait(1000);
      const to = sink.received.map((r) => r.to[0]!);
      expect(to.length, 'each acknowledged message once').to.equal(new Set(to).size);
      expect(new Set(to)).to.deep.equal(new Set(accepted.keys()));
      for (const r of sink.received) expect(r.raw).to.contain(accepted.get(r.to[0]!));
      const again = await bed.send({ recipients: [{ email: 'after@example.org' }] });
      expect(again.status).to.equal(202);
      await bed.until(again.body.data[0].id, 'Delivered');
    });
  });
});
