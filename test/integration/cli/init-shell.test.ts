import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { failingStatement } from '../../../src/cli/init.ts';
import { CLI } from '../../helpers/child.ts';

/** Runs `script` in bash with $CLI set to the postilion launcher; what it printed and its status. */
function bash(script: string, cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME, CLI: `${process.execPath} ${CLI}`, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The README's line, then what the shell has: eval's status, $ACCOUNT and the start of $KEY. */
const EVAL = (args: string) => `eval "$($CLI ${args} init --shell)"; s=$?; echo "status=$s account=$ACCOUNT key=\${KEY:0:7}"`;

describe('postilion init --shell under eval', function () {
  this.timeout(60_000);
  let dir: string;
  let config: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-init-shell-'));
    config = join(dir, 'postilion.yaml');
    writeFileSync(config, `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\n`);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('sets ACCOUNT and KEY on an empty data directory, and eval returns 0', async () => {
    const res = await bash(EVAL(`--config ${config}`), dir);
    expect(res.stderr).to.equal('');
    expect(res.stdout).to.match(/^status=0 account=[0-9a-f-]{36} key=aha-sk-\n$/);
  });

  it('makes eval fail (status 1) with the message once on stderr when the data directory is initialised already', async () => {
    const res = await bash(EVAL(`--config ${config}`), dir);
    expect(res.stdout).to.equal('status=1 account= key=\n');
    expect(res.stderr).to.equal('postilion: this data directory is already initialised; use `postilion accounts create` and `postilion keys create`\n');
  });

  it('makes eval fail (status 2) when the configuration does not load', async () => {
    const res = await bash(EVAL(`--config ${join(dir, 'missing.yaml')}`), dir);
    expect(res.stdout).to.equal('status=2 account= key=\n');
    expect(res.stderr).to.equal(`postilion: config file ${join(dir, 'missing.yaml')} does not exist\n`);
  });

  it('exits with the same status when run without eval, and prints only the failing statement', async () => {
    const res = await bash(`$CLI --config ${config} init --shell`, dir);
    expect(res.code).to.equal(1);
    expect(res.stderr).to.equal('');
    expect(res.stdout).to.match(/^echo 'postilion: this data directory is already initialised; .*' >&2; \(exit 1\)\n$/);
  });

  it('quotes a message with quotes, dollars and backticks so that the shell prints it as it is', async () => {
    const message = 'postilion: it\'s $HOME and `id` \\ "here"\nsecond line\n';
    const res = await bash('eval "$STATEMENT"; echo "status=$?"', dir, { STATEMENT: failingStatement(message, 2) });
    expect(res.stderr).to.equal(message);
    expect(res.stdout).to.equal('status=2\n');
  });
});
