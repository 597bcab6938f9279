import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../helpers/child.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

describe('postilion: --version and usage errors', function () {
  this.timeout(30_000);
  let dir: string;

  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'postilion-version-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("prints package.json's version and exits 0, from any directory and without a configuration", async () => {
    for (const flag of ['--version', '-V']) {
      const res = await run([flag], dir);
      expect(res, flag).to.deep.equal({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
    }
  });

  it('exits with status 2 on an unknown command or option and on a missing required option, saying which', async () => {
    const cases: Array<[string[], string]> = [
      [['frobnicate'], "unknown command 'frobnicate'"],
      [['keys', 'list'], "required option '--account <id>' not specified"],
      [['accounts', 'list', '--colour'], "unknown option '--colour'"],
    ];
    for (const [args, message] of cases) {
      const res = await run(args, dir);
      expect(res.code, args.join(' ')).to.equal(2);
      expect(res.stderr, args.join(' ')).to.contain(message);
    }
    expect((await run(['--help'], dir)).code).to.equal(0);
  });
});
