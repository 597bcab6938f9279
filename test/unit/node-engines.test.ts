import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';

/**
 * package.json's `engines.node` is a promise to operators: every release of Node from its floor on
 * runs Postilion without an EBADENGINE warning at install. A production dependency that asks for
 * more (email-reply-parser 2.3.9 wants Node 22) breaks that promise, so each installed one is
 * checked against the floor and against the later lines DESIGN.md §6 says the code runs on.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const LATER_LINES = ['22.0.0', '24.0.0'];

interface LockEntry {
  dev?: boolean;
  optional?: boolean;
  devOptional?: boolean;
  engines?: { node?: string } | string[];
}

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

function floor(): string {
  const range = readJson<{ engines: { node: string } }>(join(ROOT, 'package.json')).engines.node;
  const min = semver.minVersion(range);
  if (!min) throw new Error(`package.json engines.node is not a range: ${range}`);
  return min.version;
}

/** Installed production packages (lockfile paths, not dev-only) with the node range each declares. */
function productionEngines(): Array<{ path: string; node: string | undefined; missing: boolean }> {
  const lock = readJson<{ packages: Record<string, LockEntry> }>(join(ROOT, 'package-lock.json'));
  const out: Array<{ path: string; node: string | undefined; missing: boolean }> = [];
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.dev) continue;
    const manifest = join(ROOT, path, 'package.json');
    if (!existsSync(manifest)) {
      // Optional packages (one per platform, e.g. esbuild's) are absent where they do not apply.
      out.push({ path, node: undefined, missing: !(entry.optional || entry.devOptional) });
      continue;
    }
    const engines = readJson<{ engines?: { node?: string } | string[] }>(manifest).engines;
    out.push({ path, node: Array.isArray(engines) ? undefined : engines?.node, missing: false });
  }
  return out;
}

function excluding(version: string): string[] {
  return productionEngines()
    .filter((p) => p.node !== undefined && !semver.satisfies(version, p.node))
    .map((p) => `${p.path} wants node ${p.node}`);
}

describe('Node version (package.json engines)', () => {
  it('reads a floor from package.json and the production tree from the lockfile', () => {
    expect(semver.valid(floor())).to.not.equal(null);
    const tree = productionEngines();
    expect(tree.map((p) => p.path)).to.include('node_modules/email-reply-parser');
    expect(
      tree.filter((p) => p.missing).map((p) => p.path),
      'lockfile packages not installed',
    ).to.deep.equal([]);
  });

  it('has no installed production dependency whose engines.node excludes the floor', () => {
    expect(excluding(floor())).to.deep.equal([]);
  });

  for (const line of LATER_LINES) {
    it(`has no installed production dependency whose engines.node excludes Node ${line}`, () => {
      expect(excluding(line)).to.deep.equal([]);
    });
  }

  it('is told to readers of the README as package.json says it', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const said = /Node\.js (\d+\.\d+) or newer/.exec(readme)?.[1];
    expect(said, 'README names a Node.js version').to.be.a('string');
    expect(semver.coerce(said)?.version).to.equal(floor());
  });

  it('judges a range that leaves out the floor as excluding it', () => {
    // The check itself: email-reply-parser 2.3.9 declares ">= 22.0.0".
    expect(semver.satisfies(floor(), '>= 22.0.0')).to.equal(false);
    expect(semver.satisfies(floor(), '^16 || ^18 || >=20')).to.equal(true);
  });
});
