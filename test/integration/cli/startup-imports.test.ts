import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCliDaemon, type CliDaemon } from '../../helpers/cli-daemon.ts';
import { CLI } from '../../helpers/child.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const HOOK = join(ROOT, 'test/helpers/loaded-modules.mjs');

/**
 * Sources and packages that make up the daemon, and zod (the configuration's validation, which a
 * daemon that answers has done): the CLI's quick commands must load none of them.
 */
const DAEMON_SOURCES =
  /^src\/(daemon\.ts|store\/|api\/|smtp\/|queue\/|delivery\/|message\/|webhooks\/|inbound\/|tracking\/|stats\/|domains\/|bounce\/|metrics\/)/;
const DAEMON_PACKAGES =
  /\/node_modules\/(zod|level|classic-level|koa|@koa|smtp-server|mailauth|nodemailer|mailparser|pino|prom-client|minijinja-js|selfsigned)\//;

/** Runs `postilion …` with a loader hook; its exit, output and the files it loaded (sources relative to the checkout). */
async function runListing(
  args: string[],
  cwd: string,
): Promise<{ code: number | null; stdout: string; stderr: string; sources: string[]; packages: string[] }> {
  const log = join(cwd, `loaded-${process.hrtime.bigint()}.txt`);
  const child = spawn(process.execPath, ['--import', HOOK, CLI, ...args], {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TEST_LOADED_MODULES: log },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((done) => child.on('exit', done));
  const urls = readFileSync(log, 'utf8')
    .trim()
    .split('\n')
    .map((u) => fileURLToPath(u));
  const sources = [...new Set(urls.filter((f) => !f.includes('/node_modules/')).map((f) => relative(ROOT, f)))];
  return { code, stdout, stderr, sources, packages: urls.filter((f) => f.includes('/node_modules/')) };
}

/**
 * `postilion --version` and the control-socket commands load the modules they need, not the
 * daemon (which takes seconds to import): checked on the files a loader hook sees loaded.
 */
describe('postilion: what a command loads', function () {
  this.timeout(60_000);
  let dir: string;

  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'postilion-imports-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('--version and --help load the command table and nothing of any command', async () => {
    for (const args of [['--version'], ['--help']]) {
      const res = await runListing(args, dir);
      expect(res.code, res.stderr).to.equal(0);
      expect(res.sources.sort(), args[0]).to.deep.equal(['src/cli/commands.ts', 'src/cli/main.ts', 'src/cli/postilion.js']);
      expect(
        res.packages.filter((p) => /\/node_modules\/(zod|yaml)\//.test(p)),
        args[0],
      ).to.deep.equal([]);
    }
  });

  it('a usage error loads no command module either', async () => {
    const res = await runListing(['frobnicate'], dir);
    expect(res.code).to.equal(2);
    expect(res.stderr).to.equal("postilion: unknown command 'frobnicate'\n");
    expect(res.sources.filter((f) => DAEMON_SOURCES.test(f))).to.deep.equal([]);
  });

  describe('against a running daemon', () => {
    let daemon: CliDaemon;

    before(async () => (daemon = await startCliDaemon('postilion-imports-daemon-', 'delivery:\n  enabled: false\n')));
    after(async () => daemon?.stop());

    for (const args of [
      ['accounts', 'list'],
      ['webhooks', 'list'],
      ['messages', 'show'],
    ]) {
      it(`\`${args.join(' ')}\` asks the control socket without loading the daemon's modules`, async () => {
        const full = [...args, ...(args[0] === 'webhooks' ? ['--account', daemon.account] : args[0] === 'messages' ? [daemon.account] : [])];
        const res = await runListing(['--config', daemon.config, ...full], daemon.dir);
        // messages show of an account's id: no such message, answered by the daemon.
        expect(res.code, res.stderr).to.equal(args[0] === 'messages' ? 2 : 0);
        if (args[0] === 'accounts') expect(res.stdout).to.contain(daemon.account);
        if (args[0] === 'messages') expect(res.stderr).to.equal(`postilion: no such message: ${daemon.account}\n`);
        expect(res.sources.filter((f) => DAEMON_SOURCES.test(f))).to.deep.equal([]);
        expect(res.packages.filter((p) => DAEMON_PACKAGES.test(p))).to.deep.equal([]);
      });
    }
  });
});
