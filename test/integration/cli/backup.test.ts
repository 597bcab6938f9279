import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import { openCore } from '../../../src/assemblies/core.ts';
import { loadConfig } from '../../../src/config/load.ts';

/** `postilion backup` and `restore` through main(), with no daemon running: the store is read directly. */
describe('postilion backup / restore (CLI, no daemon)', function () {
  this.timeout(20_000);
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-cli-backup-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function config(name: string): string {
    const path = join(dir, `${name}.yaml`);
    writeFileSync(path, `data:\n  dir: ${join(dir, name, 'data')}\nkeys:\n  dir: ${join(dir, name, 'keys')}\nlog:\n  level: silent\n`);
    return path;
  }

  async function cli(configPath: string, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  it('backs up a stopped store and restores it elsewhere; bad input gets one line and exit 2', async () => {
    const first = config('first');
    const nothing = await cli(first, 'backup', join(dir, 'b0'));
    expect(nothing, nothing.err).to.deep.include({ code: 2, out: '' });
    expect(nothing.err).to.match(/^postilion: no daemon runs and data\.dir \S+ holds no store: nothing to back up\n$/);

    // A store with its keys, as the first start makes them.
    const core = await openCore(loadConfig({ path: first }).config);
    await core.store.close();
    const made = await cli(first, 'backup', join(dir, 'b1'));
    expect(made.code, made.err).to.equal(0);
    expect(made.out).to.match(
      /^backup of \S+ from the store \(no daemon runs\) written to \S+b1\nstore: \d+ records\nkey files: [^\n]*route-secrets\.key, secret-box\.key, tracking\.key, verp\.key, webhook-secrets\.key\n$/,
    );

    mkdirSync(join(dir, 'full'));
    writeFileSync(join(dir, 'full', 'x'), 'x');
    const full = await cli(first, 'backup', join(dir, 'full'));
    expect(full.code).to.equal(2);
    expect(full.err).to.match(/^postilion: \S+full is not empty \(x\): back up into a new or empty directory\n$/);
    expect((await cli(first, 'backup')).code).to.equal(2);

    const second = config('second');
    const restored = await cli(second, 'restore', join(dir, 'b1'));
    expect(restored.code, restored.err).to.equal(0);
    expect(readdirSync(join(dir, 'second', 'keys')).sort()).to.deep.equal(readdirSync(join(dir, 'first', 'keys')).sort());
    const opened = await openCore(loadConfig({ path: second }).config);
    expect(await opened.accounts.hasAny()).to.equal(false);
    await opened.store.close();

    const twice = await cli(second, 'restore', join(dir, 'b1'));
    expect(twice.code).to.equal(2);
    expect(twice.err).to.match(/^postilion: data\.dir \S+ is not empty \([^\n]*\): restore only onto an empty data directory \(move this one away first\)\n$/);
    const notBackup = await cli(config('third'), 'restore', join(dir, 'full'));
    expect(notBackup.code).to.equal(2);
    expect(notBackup.err).to.match(
      /^postilion: \S+full is not a Postilion backup: it has no postilion-backup\.json \(not a backup, or one that did not finish\)\n$/,
    );
  });
});
