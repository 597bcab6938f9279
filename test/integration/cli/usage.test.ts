import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type AddressInfo } from 'node:net';
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

  it("prints each usage error as one 'postilion: …' line on stderr, nothing on stdout, exit 2", async () => {
    const cases: Array<[string[], string]> = [
      [['frobnicate'], "postilion: unknown command 'frobnicate'"],
      [['--colour'], "postilion: unknown option '--colour'"],
      [['accounts', 'list', '--colour'], "postilion: unknown option '--colour'"],
      // commander's suggestion joins the same line.
      [['accounts', 'lst'], "postilion: unknown command 'lst' (Did you mean list?)"],
      [['keys', 'list'], "postilion: required option '--account <id>' not specified"],
      [['accounts', 'suspend', '--reason', 'x'], "postilion: missing required argument 'id'"],
      [['webhooks', 'show', '--account', 'a'], "postilion: missing required argument 'id'"],
      [['messages', 'show', 'a', 'b'], "postilion: too many arguments for 'show'. Expected 1 argument but got 2."],
      [['sink', '--port', 'eighty'], "postilion: option '--port <port>' argument 'eighty' is invalid. a port is a whole number from 0 to 65535"],
    ];
    for (const [args, line] of cases) {
      const res = await run(args, dir);
      expect(res, args.join(' ')).to.deep.equal({ code: 2, stdout: '', stderr: `${line}\n` });
    }
  });

  it('`sink` on a busy port: one line naming the address, exit 2', async () => {
    const busy = createServer();
    await new Promise<void>((done) => busy.listen(0, '127.0.0.1', done));
    try {
      const { port } = busy.address() as AddressInfo;
      const res = await run(['sink', '--port', String(port), '--dir', join(dir, 'outbox')], dir);
      expect(res).to.deep.equal({ code: 2, stdout: '', stderr: `postilion: cannot listen on 127.0.0.1:${port} (sink): address already in use\n` });
    } finally {
      await new Promise((done) => busy.close(done));
    }
  });
});
