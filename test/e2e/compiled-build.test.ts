import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const COMPILED = join(ROOT, 'dist', 'cli', 'postilion.js');
const KEY = /aha-sk-[A-Za-z0-9]{64}/;

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`],
  );
}

describe('the compiled build (dist/, what npm start, the bin and the systemd unit run)', function () {
  this.timeout(60_000);
  let dir: string;

  before(function () {
    // `npm run build` as npm start's prestart runs it: incremental, so it only costs a few seconds
    // when dist/ is up to date, and it brings a stale or missing dist/ up to date.
    this.timeout(180_000);
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    try {
      execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'pipe' });
    } catch (err) {
      throw new Error(`npm run build failed:\n${(err as { stdout?: Buffer }).stdout?.toString() ?? ''}${(err as Error).message}`, {
        cause: err,
      });
    }
  });
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'postilion-compiled-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is JavaScript only, with every relative import rewritten to .js', () => {
    const files = filesUnder(join(ROOT, 'dist'));
    expect(files).to.include('cli/postilion.js');
    expect(files.filter((f) => f.endsWith('.ts'))).to.deep.equal([]);
    for (const file of files.filter((f) => f.endsWith('.js'))) {
      const source = readFileSync(join(ROOT, 'dist', file), 'utf8');
      expect(source, file).to.not.match(/(?:from|import\()\s*['"]\.{1,2}\/[^'"]*\.ts['"]/);
    }
  });

  it('starts the daemon from dist/, answers /v2/ping with the bootstrap key, and stops with status 0 on SIGTERM', async () => {
    writeFileSync(
      join(dir, 'postilion.yaml'),
      `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\nmetrics:\n  port: 0\ntracking:\n  port: 0\nsmtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\n`,
    );
    // A service's environment: nothing inherited from mocha (no tsx loader, no NODE_OPTIONS).
    const proc = spawn(process.execPath, [COMPILED, '--config', join(dir, 'postilion.yaml'), 'start'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((done) => proc.once('exit', (code) => done(code)));
    try {
      const deadline = Date.now() + 20_000;
      while (!(KEY.test(stdout) && /"urls":\["http/.test(stdout)) && proc.exitCode === null && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 25));
      }
      const key = KEY.exec(stdout)?.[0];
      const url = /"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/.exec(stdout)?.[1];
      expect(key, `${stdout}\n${stderr}`).to.be.a('string');
      const res = await fetch(`${url}/v2/ping`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).to.equal(200);
      expect(await res.json()).to.deep.equal({ message: 'pong' });
      // The tracking listener's thread ran from dist/ (plain JavaScript, no tsx): it answers.
      const tracking = /"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"tracking listening"/.exec(stdout)?.[1];
      expect(tracking, stdout).to.be.a('string');
      const unknown = await fetch(`${tracking}/o/not-a-token`, { headers: { host: 'track.example.com' } });
      expect([unknown.status, await unknown.text()]).to.deep.equal([404, 'unknown host']);
      // The bounce rules (config/bounce-rules, read relative to the code) were found from dist/.
      expect(stdout).to.match(/"msg":"delivery started"/);
      expect(stdout).to.match(/"thread_pool":"\d+"/);
      proc.kill('SIGTERM');
      expect(await exited).to.equal(0);
      expect(stderr).to.equal('');
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await exited;
      }
    }
  });

  it('prints the version from dist/ too, without registering tsx (no main.ts beside the launcher)', () => {
    const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    expect(execFileSync(process.execPath, [COMPILED, '--version'], { cwd: dir, encoding: 'utf8' })).to.equal(`${version}\n`);
    // The launcher registers tsx (a development dependency) only when main.ts is beside it.
    expect(existsSync(join(ROOT, 'dist', 'cli', 'main.ts'))).to.equal(false);
  });
});
