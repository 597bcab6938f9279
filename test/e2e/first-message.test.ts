import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HEADING = '## First message in two minutes';

/** The shell block of the README's "First message in two minutes" section, as printed there. */
export function firstMessageScript(readme: string): string[] {
  const section = readme.slice(readme.indexOf(HEADING));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  if (!block || readme.indexOf(HEADING) < 0) throw new Error(`README.md has no shell block under "${HEADING}"`);
  return block[1]!.trimEnd().split('\n');
}

/** The default ports the README's commands use: they must be free for the commands to work as printed. */
const PORTS = [8080, 8081, 2525, 2526, 2587, 2465, 9464];

function portFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const probe = createServer();
    probe.once('error', () => done(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => done(true)));
  });
}

/**
 * Runs the README's first-send commands as printed in a copy of the checkout (its node_modules
 * linked, and `npm install` replaced by the build it runs), then the stop command the README
 * gives, and checks what they say they do: a DKIM-signed message in ./outbox, nothing left running.
 */
describe('README: first message in two minutes', function () {
  this.timeout(180_000);
  let dir: string;

  before(function () {
    dir = mkdtempSync(join(tmpdir(), 'postilion-readme-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('delivers a DKIM-signed message to ./outbox with the commands copied from the README', async () => {
    const busy = [];
    for (const port of PORTS) if (!(await portFree(port))) busy.push(port);
    expect(busy, `the README's commands use these default ports, which are in use on this machine: ${busy.join(', ')}`).to.deep.equal([]);

    const lines = firstMessageScript(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(lines[0]).to.equal('npm install');
    // The checkout as a clone has it: everything but what installing, building and running make.
    const made = new Set(['node_modules', 'dist', 'data', 'keys', 'outbox', '.git']);
    cpSync(ROOT, dir, { recursive: true, filter: (src) => src === ROOT || !made.has(relative(ROOT, src).split(sep)[0]!) });
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    // The checkout's own build, when it has one (`npm ci` made it): the `prepare` below brings it
    // up to date incrementally, in seconds, instead of compiling everything again (what the build
    // makes is compiled-build.test.ts's to check).
    if (existsSync(join(ROOT, 'dist', '.tsbuildinfo'))) cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
    // `npm install` is the one line not run as printed: the suite's own install already fetched
    // the packages (linked above) and a test must not reach the registry. What it does beyond
    // that, its `prepare` script (the build into dist/), is run instead.
    const script = ['set -e', 'npm run --silent prepare', ...lines.slice(1), 'kill %1 %2', 'wait'].join('\n');
    const shell = spawn('bash', ['-c', script], {
      cwd: dir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
    });
    let out = '';
    shell.stdout.on('data', (d: Buffer) => (out += d.toString()));
    shell.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => process.kill(-shell.pid!, 'SIGKILL'), 150_000);
    const code = await new Promise<number | null>((done) => shell.on('exit', done));
    clearTimeout(timer);
    // The README's stop left nothing running (no process of the group is alive); whatever
    // happened, nothing is left running after the test.
    let leftover = true;
    try {
      process.kill(-shell.pid!, 'SIGKILL');
    } catch {
      leftover = false; // the group is gone
    }
    const log = () =>
      `${out}\n--- postilion.log ---\n${safeRead(join(dir, 'postilion.log')).slice(-3000)}\n--- sink.log ---\n${safeRead(join(dir, 'sink.log'))}`;
    expect(code, log()).to.equal(0);
    expect(leftover, "processes were still running after the README's `kill %1 %2`").to.equal(false);

    const files = readdirSync(join(dir, 'outbox')).filter((f) => f.endsWith('.eml'));
    expect(files, log()).to.have.length(1);
    const message = readFileSync(join(dir, 'outbox', files[0]!), 'utf8');
    expect(message).to.match(/^X-Postilion-Sink: from=<bounces\+[0-9a-f]+@rp\.example\.test> to=<you@example\.org>\r\n/);
    expect(message).to.match(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=example\.test;/m);
    expect(message).to.match(/^Subject: First message\r$/m);
    // What the README's last line prints.
    expect(out).to.match(/DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=example\.test;/);
    expect(out).to.include('"message":"pong"');
    expect(safeRead(join(dir, 'sink.log'))).to.match(/^postilion sink: listening on 127\.0\.0\.1:2526/);
  });
});

function safeRead(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}
