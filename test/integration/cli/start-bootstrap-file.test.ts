import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, CLI } from '../../helpers/child.ts';

const KEY = /aha-sk-[A-Za-z0-9]{64}/;

describe('postilion start under systemd: the bootstrap key goes to a file, not to the journal', function () {
  this.timeout(30_000);
  let dir: string;
  const children: Child[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-bootstrap-'));
    writeFileSync(
      join(dir, 'postilion.yaml'),
      `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\ndelivery:\n  enabled: false\nsmtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\n`,
    );
  });
  afterEach(async () => {
    for (const child of children.splice(0)) await child.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  function start(env: NodeJS.ProcessEnv): Child {
    const child = new Child(['--config', join(dir, 'postilion.yaml'), 'start'], dir, env);
    children.push(child);
    return child;
  }

  // systemd sets INVOCATION_ID for every service, and JOURNAL_STREAM when stdout is the journal.
  for (const env of [{ INVOCATION_ID: '0123456789abcdef0123456789abcdef' }, { JOURNAL_STREAM: '8:12345' }]) {
    it(`writes it to <data.dir>/bootstrap-key.txt, mode 0600, and logs only the path (${Object.keys(env)[0]} set, stdout not a terminal)`, async () => {
      const daemon = start(env);
      const file = join(dir, 'data', 'bootstrap-key.txt');
      const logged = JSON.parse((await daemon.waitFor(/^.*bootstrap API key written to this file.*$/m))[0]) as { file: string; level: number };
      expect(logged.file).to.equal(file);
      const url = (await daemon.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;

      expect(statSync(file).mode & 0o777).to.equal(0o600);
      const text = readFileSync(file, 'utf8');
      const key = KEY.exec(text)?.[0];
      expect(key, text).to.be.a('string');
      expect(text).to.match(/account id: [0-9a-f-]{36}/);
      // Nothing of the key on stdout or stderr, which systemd sends to the journal.
      expect(daemon.stdout).to.not.match(/aha-sk-/);
      expect(daemon.stderr).to.not.match(/aha-sk-/);
      expect(daemon.stdout).to.not.contain('Postilion: created the first account');

      const ping = await fetch(`${url}/v2/ping`, { headers: { authorization: `Bearer ${key}` } });
      expect(ping.status).to.equal(200);
      daemon.signal('SIGTERM');
      expect(await daemon.exited).to.equal(0);
    });
  }

  it('prints it on a terminal as before, even with INVOCATION_ID set (a shell in a systemd session)', async function () {
    // script(1) from util-linux gives the daemon a pseudo-terminal as stdout.
    if (spawnSync('script', ['--version']).status !== 0) this.skip();
    const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
    const command = [process.execPath, CLI, '--config', join(dir, 'postilion.yaml'), 'start'].map(quote).join(' ');
    const proc = spawn('script', ['-qefc', `exec ${command}`, '/dev/null'], {
      cwd: dir,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        POSTILION_METRICS__PORT: '0',
        POSTILION_TRACKING__PORT: '0',
        INVOCATION_ID: '0123456789abcdef0123456789abcdef',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise((done) => proc.once('exit', done));
    let output = '';
    proc.stdout.on('data', (d: Buffer) => (output += d.toString()));
    try {
      const deadline = Date.now() + 15_000;
      // Whichever way the key goes: on the terminal, or a log line naming the file.
      while (!KEY.test(output) && !output.includes('bootstrap API key written') && Date.now() < deadline && proc.exitCode === null) {
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(output).to.match(KEY);
      expect(existsSync(join(dir, 'data', 'bootstrap-key.txt'))).to.equal(false);
    } finally {
      proc.kill('SIGTERM');
      await exited;
    }
  });

  it('prints it on stdout as before when systemd is not running the daemon', async () => {
    const daemon = start({});
    await daemon.waitFor(KEY);
    await daemon.waitFor(/"msg":"API listening"/);
    expect(existsSync(join(dir, 'data', 'bootstrap-key.txt'))).to.equal(false);
    daemon.signal('SIGTERM');
    expect(await daemon.exited).to.equal(0);
  });

  it('a SIGTERM while the daemon starts stops it in order once it is up, with status 0', async () => {
    const daemon = start({});
    await daemon.waitFor(/"msg":"starting"/);
    daemon.signal('SIGTERM');
    expect(await daemon.exited).to.equal(0);
    expect(daemon.stdout).to.match(/"msg":"signal received"/);
    expect(daemon.stdout).to.match(/"msg":"stopped"/);
  });
});
