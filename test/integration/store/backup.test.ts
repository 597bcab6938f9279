import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupStreamError, encodeFile, MAGIC } from '../../../src/backup/format.ts';
import { backupStream } from '../../../src/backup/producer.ts';
import { restoreBackup } from '../../../src/backup/restore.ts';
import { writeBackup } from '../../../src/backup/writer.ts';
import { readRawStore } from '../../../src/store/raw-copy.ts';
import { Store } from '../../../src/store/store.ts';
import { AppError } from '../../../src/util/errors.ts';

/** The backup stream, its writer and restore on real LevelDB stores in a temp dir. */
const clock = { now: () => Date.parse('2026-11-27T12:00:00Z') };

async function collect(stream: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

async function* replay(chunks: Buffer[]): AsyncGenerator<Buffer> {
  for (const c of chunks) yield c;
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('did not fail');
}

async function rawRecords(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const chunk of readRawStore(dir)) for (const [k, v] of chunk) out.set(k.toString('latin1'), v.toString('latin1'));
  return out;
}

describe('backup and restore (store, stream, files)', function () {
  this.timeout(20_000);
  let dir: string;
  let store: Store;
  let keys: string;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-backup-'));
    store = await Store.open(join(dir, 'data'));
    keys = join(dir, 'keys');
    mkdirSync(join(keys, 'dkim', 'd1'), { recursive: true });
    writeFileSync(join(keys, 'README.md'), 'repository file');
    writeFileSync(join(keys, 'verp.key'), 'a'.repeat(64), { mode: 0o600 });
    writeFileSync(join(keys, 'dkim', 'd1', 's1.pem'), 'PEM', { mode: 0o600 });
    writeFileSync(join(keys, 'dkim', 'd1', 's2.pem.123.tmp'), 'half-written');
    await store.commit([
      { type: 'put', family: 'messages', key: 'm1', value: { id: 'm1' } },
      { type: 'put', family: 'bodies', key: 'b1', value: Buffer.from([0, 1, 2, 255]) },
    ]);
  });

  afterEach(async () => {
    await store.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('copies the store as it stood when the stream was made, not the writes that landed while it was read', async () => {
    const stream = backupStream(store, keys, clock);
    // Written after the snapshot, before a byte of it was read: not in the backup.
    await store.commit([
      { type: 'put', family: 'messages', key: 'm2', value: { id: 'm2' } },
      { type: 'del', family: 'messages', key: 'm1' },
    ]);
    const summary = await writeBackup(join(dir, 'backup'), stream);
    expect(summary.records).to.equal(2);
    expect(summary.files.map((f) => f.path)).to.deep.equal(['dkim/d1/s1.pem', 'verp.key']);
    const copied = await rawRecords(join(dir, 'backup', 'data'));
    expect([...copied.keys()].some((k) => k.endsWith('m1'))).to.equal(true);
    expect([...copied.keys()].some((k) => k.endsWith('m2'))).to.equal(false);
    expect(readFileSync(join(dir, 'backup', 'keys', 'verp.key'), 'utf8')).to.equal('a'.repeat(64));
    expect(statSync(join(dir, 'backup', 'keys', 'dkim', 'd1', 's1.pem')).mode & 0o777).to.equal(0o600);
    expect(readdirSync(join(dir, 'backup')).sort()).to.deep.equal(['data', 'keys', 'postilion-backup.json']);
  });

  it('refuses a stream cut short, tampered with, or naming a path outside keys.dir, and leaves no directory behind', async () => {
    const frames = await collect(backupStream(store, keys, clock));
    const cut = await rejection(writeBackup(join(dir, 'cut'), replay(frames.slice(0, -1))));
    expect(cut).to.be.instanceOf(BackupStreamError);
    expect(cut.message).to.contain('cut short');
    expect(existsSync(join(dir, 'cut'))).to.equal(false);

    const tampered = frames.map((f) => Buffer.from(f));
    const records = tampered.find((f) => f[0] === 'R'.charCodeAt(0))!;
    records.writeUInt8(records.at(-1)! ^ 1, records.length - 1);
    expect((await rejection(writeBackup(join(dir, 'tampered'), replay(tampered)))).message).to.match(
      /the records received \(2\) are not the 2 the daemon sent/,
    );
    expect(existsSync(join(dir, 'tampered'))).to.equal(false);

    const escape = [MAGIC, encodeFile({ path: '../evil', mode: 0o600, data: Buffer.from('x') })];
    expect((await rejection(writeBackup(join(dir, 'escape'), replay(escape)))).message).to.contain('leaves keys.dir');
    expect(existsSync(join(dir, 'evil'))).to.equal(false);

    expect((await rejection(writeBackup(join(dir, 'junk'), replay([Buffer.from('HTTP/1.1 200 OK\r\n')])))).message).to.contain('not a Postilion backup');
    const noEnd = await rejection(writeBackup(join(dir, 'noend'), replay([MAGIC])));
    expect(noEnd.message).to.contain('cut short');

    writeFileSync(join(dir, 'file'), 'x');
    const notDir = await rejection(writeBackup(join(dir, 'file'), replay(frames)));
    expect(notDir).to.be.instanceOf(AppError);
    expect(notDir.message).to.contain('is not a directory');
  });

  it('restores onto an empty data directory, and refuses a running daemon, a data directory in use, a key it would overwrite and a damaged backup, writing nothing', async () => {
    const backup = join(dir, 'backup');
    await writeBackup(backup, backupStream(store, keys, clock));
    const to = (name: string, daemon = false) => ({ dataDir: join(dir, name, 'data'), keysDir: join(dir, name, 'keys'), daemonRuns: async () => daemon });

    const running = await rejection(restoreBackup(backup, to('a', true)));
    expect(running).to.be.instanceOf(AppError);
    expect(running.message).to.match(/^a daemon is running on .*: stop it first/);

    mkdirSync(join(dir, 'b', 'data'), { recursive: true });
    writeFileSync(join(dir, 'b', 'data', 'CURRENT'), 'x');
    expect((await rejection(restoreBackup(backup, to('b')))).message).to.match(
      /^data\.dir .* is not empty \(CURRENT\): restore only onto an empty data directory/,
    );

    mkdirSync(join(dir, 'c', 'keys'), { recursive: true });
    writeFileSync(join(dir, 'c', 'keys', 'verp.key'), 'other');
    expect((await rejection(restoreBackup(backup, to('c')))).message).to.match(/keys\.dir .* already holds verp\.key: restore would overwrite them/);
    expect(existsSync(join(dir, 'c', 'data'))).to.equal(false);

    expect((await rejection(restoreBackup(join(dir, 'keys'), to('d')))).message).to.contain('is not a Postilion backup: it has no postilion-backup.json');
    expect((await rejection(restoreBackup(join(dir, 'nowhere'), to('d')))).message).to.contain('is not a directory');

    const result = await restoreBackup(backup, to('ok'));
    expect(result.summary.records).to.equal(2);
    await store.close();
    expect(await rawRecords(join(dir, 'ok', 'data'))).to.deep.equal(await rawRecords(join(dir, 'data')));
    expect(readFileSync(join(dir, 'ok', 'keys', 'dkim', 'd1', 's1.pem'), 'utf8')).to.equal('PEM');
    expect(statSync(join(dir, 'ok', 'keys', 'verp.key')).mode & 0o777).to.equal(0o600);

    // A manifest that does not match the store it sits next to: the copy is checked, and goes.
    const manifestPath = join(backup, 'postilion-backup.json');
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    writeFileSync(manifestPath, JSON.stringify({ ...manifest, records: 3 }));
    expect((await rejection(restoreBackup(backup, to('f')))).message).to.match(/is damaged: its store holds 2 records, not the 3 the backup took/);
    expect(existsSync(join(dir, 'f'))).to.equal(true);
    expect(existsSync(join(dir, 'f', 'data'))).to.equal(false);
    expect(existsSync(join(dir, 'f', 'keys'))).to.equal(false);
    writeFileSync(manifestPath, JSON.stringify({ ...manifest, files: [{ path: '../x', sha256: 'a', mode: '0600', bytes: 1 }] }));
    expect((await rejection(restoreBackup(backup, to('g')))).message).to.contain('a key file entry is malformed or leaves keys.dir');
    writeFileSync(manifestPath, JSON.stringify(manifest));

    writeFileSync(join(backup, 'keys', 'verp.key'), 'b'.repeat(64));
    expect((await rejection(restoreBackup(backup, to('e')))).message).to.contain('is damaged: keys/verp.key is not the file the backup took');
    expect(existsSync(join(dir, 'e'))).to.equal(false);
  });
});
