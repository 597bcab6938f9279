import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../helpers/child.ts';
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
    expect(res.stderr).to.match(new RegExp(`^postilion: cannot start: \\d+\\.\\d MiB free on the filesystem of ${join(dir, 'data')}, below storage\\.min_free_bytes 64\\.0 MiB; free some space there or lower the setting\\n$`));
    // Nothing was started: no store, no listener.
    expect(res.stdout).to.not.match(/store opened|listening/);
    rmSync(dir, { recursive: true, force: true });
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
      bed = await startMessageBed({
        ...POLLING,
        delivery: { enabled: true, mx_port: sink.port },
        // The guard closes on the first failed write (the floor is off): LevelDB meets ENOSPC itself.
        storage: { min_free_bytes: 0, min_free_percent: 0, check_interval_ms: 100 },
      }, undefined, { dir: join(mnt!, 'bed') });
      bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
      bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
      // Leave about 3 MiB.
      const free = statfsSync(mnt!).bavail * statfsSync(mnt!).bsize;
      writeFileSync(filler(), Buffer.alloc(Math.max(0, free - 3 * MiB)));
      const accepted = new Map<string, string>();
      let refused = 0;
      for (let i = 0; i < 200 && refused < 3; i++) {
        const marker = `body-${i}-${randomBytes(8).toString('hex')}`;
        const res = await bed.send({ recipients: [{ email: `r${i}@example.org` }], text_content: `${marker}\n${randomBytes(96 * 1024).toString('base64')}`, html_content: null }, { operationId: null });
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
