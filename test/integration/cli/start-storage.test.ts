import { expect } from 'chai';
import { existsSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../helpers/child.ts';

/**
 * A start on a data directory whose filesystem is below the storage guard's floor: one line
 * naming the directory, the free space and the setting, exit status 2, nothing started. (The
 * floor is raised above what this filesystem has: no mount needed; full-disk-tmpfs.test.ts
 * does the same on a real full filesystem where it may mount one.)
 */
describe('postilion start: a data directory short of space', function () {
  this.timeout(30_000);
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-start-storage-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is one line naming the data directory, its free space and storage.min_free_bytes, and exit status 2', async () => {
    const s = statfsSync(dir);
    const above = s.blocks * s.bsize + 1024 ** 3;
    const config = join(dir, 'postilion.yaml');
    writeFileSync(config, `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\nstorage:\n  min_free_bytes: ${above}\n`);
    const res = await run(['--config', config, 'start'], dir);
    expect(res.code).to.equal(2);
    expect(res.stderr).to.match(
      new RegExp(
        `^postilion: cannot start: [0-9.]+ [GM]iB free on the filesystem of ${join(dir, 'data')}, below storage\\.min_free_bytes [0-9.]+ GiB; free some space there or lower the setting\\n$`,
      ),
    );
    expect(existsSync(join(dir, 'data')), 'the store was not opened').to.equal(false);
  });
});
