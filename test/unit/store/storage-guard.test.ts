import { expect } from 'chai';
import { createLogger } from '../../../src/logging/logger.ts';
import { outcomeRetryDelayMs } from '../../../src/queue/retry-policy.ts';
import {
  describeWriteError,
  InsufficientStorageError,
  isLow,
  recoveryDelayMs,
  requiredFreeBytes,
  StorageGuard,
  type SpaceReading,
} from '../../../src/store/storage-guard.ts';

const MiB = 1024 * 1024;
const settings = { minFreeBytes: 64 * MiB, minFreePercent: 1, checkIntervalMs: 1000 };

describe('storage guard policy', () => {
  it('requires the larger of min_free_bytes and min_free_percent of the filesystem', () => {
    expect(requiredFreeBytes(1000 * MiB, settings)).to.equal(64 * MiB);
    expect(requiredFreeBytes(100_000 * MiB, settings)).to.equal(1000 * MiB);
    expect(isLow({ free: 63 * MiB, total: 1000 * MiB }, settings)).to.equal(true);
    expect(isLow({ free: 64 * MiB, total: 1000 * MiB }, settings)).to.equal(false);
  });

  it("tells a full disk, a read-only filesystem and a permission error apart in LevelDB's and Node's errors", () => {
    expect(describeWriteError(new Error('IO error: /d/000005.log: No space left on device'), '/d').kind).to.equal('full');
    expect(describeWriteError(Object.assign(new Error('write'), { code: 'ENOSPC' }), '/d').kind).to.equal('full');
    expect(describeWriteError(new Error('IO error: /d/LOCK: Read-only file system'), '/d').kind).to.equal('read-only');
    expect(describeWriteError(Object.assign(new Error('open'), { code: 'EACCES' }), '/d').kind).to.equal('permission');
    expect(describeWriteError(new Error('outer', { cause: new Error('IO error: /d/x: Permission denied') }), '/d').text).to.equal(
      'permission denied writing in /d',
    );
    expect(describeWriteError(new Error('Corruption: bad block'), '/d')).to.deep.equal({ kind: 'io', text: 'a write to /d failed: Corruption: bad block' });
  });

  it('backs off: recovery probes 1 s doubling to 30 s, outcome writes 0.5 s doubling to 30 s', () => {
    expect([1, 2, 3, 6, 7, 50].map(recoveryDelayMs)).to.deep.equal([1000, 2000, 4000, 30_000, 30_000, 30_000]);
    expect([1, 2, 3, 7, 8, 100].map(outcomeRetryDelayMs)).to.deep.equal([500, 1000, 2000, 30_000, 30_000, 30_000]);
  });
});

describe('storage guard', () => {
  function guardWith(readings: SpaceReading[], recover: () => Promise<void> = async () => undefined) {
    const lines: Array<{ msg: string; reason?: string }> = [];
    const changes: boolean[] = [];
    let now = 0;
    let recoveries = 0;
    const guard = new StorageGuard('/data', settings, {
      log: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }),
      recover: async () => {
        recoveries += 1;
        await recover();
      },
      onChange: (ok) => changes.push(ok),
      readSpace: async () => readings[0]!,
      now: () => now,
    });
    return {
      guard,
      lines,
      changes,
      readings,
      recoveries: () => recoveries,
      advance: (ms: number) => (now += ms),
    };
  }
  const roomy: SpaceReading = { free: 500 * MiB, total: 1000 * MiB };
  const low: SpaceReading = { free: 10 * MiB, total: 1000 * MiB };

  it('closes below the floor with one warn line whatever the number of checks, and opens again after a probe write once room is back', async () => {
    const t = guardWith([low]);
    await t.guard.check();
    await t.guard.check();
    await t.guard.check();
    expect(t.guard.ok).to.equal(false);
    expect(t.guard.reason).to.equal('10.0 MiB free on the filesystem of /data, below storage.min_free_bytes 64.0 MiB');
    expect(() => t.guard.assertWritable()).to.throw(InsufficientStorageError, /insufficient storage/);
    expect(t.lines.filter((l) => l.msg.startsWith('storage refuses writes'))).to.have.length(1);
    expect(t.changes).to.deep.equal([false]);
    t.readings[0] = roomy;
    await t.guard.check();
    expect(t.recoveries()).to.equal(1);
    expect(t.guard.ok).to.equal(true);
    expect(t.changes).to.deep.equal([false, true]);
  });

  it('closes on a failed write though space looks fine, and stays closed while the probe fails, trying again with back-off', async () => {
    let fails = true;
    const t = guardWith([roomy], async () => {
      if (fails) throw new Error('IO error: /data/000001.log: Read-only file system');
    });
    await t.guard.check();
    expect(t.guard.ok).to.equal(true);
    t.guard.writeFailed(new Error('IO error: /data/000001.log: Read-only file system'));
    expect(t.guard.ok).to.equal(false);
    expect(t.guard.reason).to.equal('the filesystem of /data is read-only');
    await t.guard.check();
    expect(t.recoveries()).to.equal(1);
    // Within the back-off no probe is made: no busy loop on a filesystem that stays read-only.
    t.advance(500);
    await t.guard.check();
    expect(t.recoveries()).to.equal(1);
    t.advance(600);
    await t.guard.check();
    expect(t.recoveries()).to.equal(2);
    expect(t.guard.ok).to.equal(false);
    fails = false;
    t.advance(2100);
    await t.guard.check();
    expect(t.guard.ok).to.equal(true);
    expect(t.changes).to.deep.equal([false, true]);
  });
});
