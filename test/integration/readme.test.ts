import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { main } from '../../src/cli/main.ts';

/**
 * The README as a newcomer follows it: its command table against the real `postilion` command
 * (read from its own --help), its shell blocks' loops bounded, and its "Start again" line run.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/**
 * Top-level commands the README lists that other work of the same round adds (issue 31, items 6
 * and 7): they need not exist in the CLI yet, and their rows need not name each option. Every
 * command the CLI has must still have a row. Drop them from here once that work is merged and
 * their rows name their options.
 */

async function help(args: string[]): Promise<string> {
  let out = '';
  await main(['node', 'postilion', ...args, '--help'], { out: (t) => (out += t), err: (t) => (out += t) });
  return out;
}

/** The lines of one section (`Commands:`, `Options:`) of a commander help text, continuation lines dropped. */
function section(text: string, title: string): string[] {
  const at = text.indexOf(`\n${title}\n`);
  if (at < 0) return [];
  const lines = text.slice(at + title.length + 2).split('\n');
  const end = lines.findIndex((l) => l.trim() === '');
  return (end < 0 ? lines : lines.slice(0, end)).filter((l) => /^ {2}\S/.test(l));
}

/** Every command of the CLI (`domains add`), with its long options, from --help. */
async function cliCommands(prefix: string[] = []): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const text = await help(prefix);
  const subcommands = section(text, 'Commands:')
    .map((l) => l.trim().split(/\s+/)[0]!)
    .filter((name) => name !== 'help');
  if (prefix.length > 0 && subcommands.length === 0) {
    const options = section(text, 'Options:')
      .flatMap((l) => /--[a-z][a-z-]*/.exec(l.trim().split(/ {2,}/)[0]!)?.[0] ?? [])
      .filter((o) => o !== '--help');
    out.set(prefix.join(' '), options);
  }
  for (const name of subcommands) for (const [command, options] of await cliCommands([...prefix, name])) out.set(command, options);
  return out;
}

/** `a|b c|d` → `a c`, `a d`, `b c`, `b d`. */
function expand(words: string[]): string[] {
  return words.reduce<string[]>((acc, word) => acc.flatMap((head) => word.split('|').map((w) => (head ? `${head} ${w}` : w))), ['']);
}

/** The rows of the README's command table: each command a row names, with the row's text. */
function tableRows(): Map<string, string> {
  const start = README.indexOf('| command | options |');
  expect(start, 'README.md has its command table').to.be.greaterThan(0);
  const rows = new Map<string, string>();
  for (const line of README.slice(start).split('\n').slice(2)) {
    if (!line.startsWith('|')) break;
    const row = line.replace(/\\\|/g, '|');
    const first = line.split(/(?<!\\)\|/)[1]!;
    for (const span of first.matchAll(/`([^`]+)`/g)) {
      const words: string[] = [];
      for (const word of span[1]!.replace(/\\\|/g, '|').split(/\s+/)) {
        if (/^[<[-]/.test(word)) break;
        words.push(word);
      }
      for (const command of expand(words)) rows.set(command, row);
    }
  }
  return rows;
}

/** The fenced code blocks of the README, with their language and first line number. */
function codeBlocks(): Array<{ lang: string; line: number; text: string }> {
  const blocks: Array<{ lang: string; line: number; text: string }> = [];
  const lines = README.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    blocks.push({ lang: open[1]!, line: i + 1, text: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return blocks;
}

describe('README.md, as a newcomer follows it', function () {
  this.timeout(60_000);
  let cli: Map<string, string[]>;
  let table: Map<string, string>;

  before(async () => {
    cli = await cliCommands();
    table = tableRows();
  });

  it('lists every command of the CLI in its command table', () => {
    expect(cli.size).to.be.greaterThan(20);
    expect([...cli.keys()].filter((c) => !table.has(c))).to.deep.equal([]);
  });

  it('lists only commands the CLI has', () => {
    expect([...table.keys()].filter((c) => !cli.has(c))).to.deep.equal([]);
  });

  it('names every option of each command in its row', () => {
    const missing = [...cli].flatMap(([command, options]) =>
      !table.has(command) ? [] : options.filter((o) => !table.get(command)!.includes(`\`${o}`)).map((o) => `${command} ${o}`),
    );
    expect(missing).to.deep.equal([]);
  });

  it('runs only commands the CLI has in its shell blocks', () => {
    const run: string[] = [];
    for (const block of codeBlocks()) {
      for (const m of block.text.matchAll(/(?:npx postilion|postilion\.js)((?: --config \S+)?)((?: [a-z][a-z-]*){1,2})/g)) {
        const words = m[2]!.trim().split(' ');
        run.push(cli.has(words[0]!) ? words[0]! : words.join(' '));
      }
    }
    expect(run.length).to.be.greaterThan(5);
    expect([...new Set(run)].filter((c) => !cli.has(c))).to.deep.equal([]);
  });

  it('bounds every wait loop of its code blocks (for … in $(seq N); no until or while)', () => {
    const unbounded = codeBlocks().flatMap((b) =>
      b.text.split('\n').flatMap((l, i) => (/(^|[;&|(]\s*|\bdo\s+)(until|while)\s/.test(l) ? [`line ${b.line + 1 + i}: ${l.trim()}`] : [])),
    );
    expect(unbounded).to.deep.equal([]);
    const loops = codeBlocks().flatMap((b) => b.text.split('\n').filter((l) => /(^|[;&|]\s*)for\s/.test(l.trim())));
    for (const loop of loops) expect(loop, 'a loop runs a counted number of times').to.match(/\bfor \w+ in \$\(seq \d+\); do\b/);
  });

  describe('Start again', () => {
    let dir: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'postilion-readme-again-'));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    it("removes what the first message made and keeps the checkout's keys/README.md, and git ignores all of it", () => {
      const heading = README.indexOf('### Start again');
      expect(heading, 'README.md has a "Start again" section').to.be.greaterThan(0);
      const block = /```sh\n([\s\S]*?)```/.exec(README.slice(heading))![1]!;
      // What a daemon, a sink and the first message leave in the checkout.
      for (const d of ['data', 'outbox', 'keys/dkim/0192', 'keys/tls', 'src']) mkdirSync(join(dir, d), { recursive: true });
      const made = [
        'data/CURRENT',
        'outbox/1.eml',
        'keys/dkim/0192/default.pem',
        'keys/tls/smtp.crt',
        'keys/tls/smtp.key',
        'keys/secret-box.key',
        'keys/tracking.key',
        'keys/verp.key',
        'keys/webhook-secrets.key',
        'keys/route-secrets.key',
        'sink.log',
        'postilion.log',
      ];
      const tracked = ['keys/README.md', 'README.md', 'src/daemon.ts'];
      for (const f of [...made, ...tracked]) writeFileSync(join(dir, f), 'x');

      // The checkout's .gitignore, asked in a repository of its own: CI runs the tests in a copy
      // of the tracked files, with no .git beside them.
      const repo = join(dir, '.ignore-check');
      mkdirSync(repo);
      expect(spawnSync('git', ['init', '-q', repo]).status, 'git init').to.equal(0);
      writeFileSync(join(repo, '.gitignore'), readFileSync(join(ROOT, '.gitignore')));
      const ignored = spawnSync('git', ['check-ignore', '--no-index', ...made], { cwd: repo, encoding: 'utf8' });
      expect(ignored.stdout.trim().split('\n').sort(), 'git ignores what running the README makes').to.deep.equal([...made].sort());
      const kept = spawnSync('git', ['check-ignore', '--no-index', ...tracked], { cwd: repo, encoding: 'utf8' });
      rmSync(repo, { recursive: true, force: true });
      expect(kept.stdout, 'git tracks keys/README.md').to.equal('');

      const res = spawnSync('bash', ['-e', '-c', block], { cwd: dir, encoding: 'utf8' });
      expect(res.status, res.stderr).to.equal(0);
      for (const f of made) expect(existsSync(join(dir, f)), f).to.equal(false);
      for (const f of tracked) expect(existsSync(join(dir, f)), f).to.equal(true);
      expect(readdirSync(join(dir, 'keys'))).to.deep.equal(['README.md']);
    });
  });
});
