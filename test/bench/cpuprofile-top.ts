/**
 * Summarises a V8 .cpuprofile (node --cpu-prof): top functions by self time, top files/packages
 * by self time, and top functions by inclusive (total) time.
 *
 *   node --import tsx test/bench/cpuprofile-top.ts <file.cpuprofile> [count=30] [filter] [--from=S] [--to=S]
 *
 * --from/--to keep only the samples between those seconds after the profile started (e.g. the
 * measured run, not start-up); a per-second busy timeline is printed to find the window.
 * Percentages are of the busy (non-idle) time in the window.
 * With a filter, the inclusive table lists only functions whose file path (relative to the repo
 * or to node_modules) starts with it, e.g. "src/".
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const flags = new Map(
  process.argv
    .slice(2)
    .filter((a) => a.startsWith('--'))
    .map((a) => a.slice(2).split('=') as [string, string]),
);
const [file, countArg, filter] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const fromUs = Number(flags.get('from') ?? 0) * 1e6;
const toUs = Number(flags.get('to') ?? Infinity) * 1e6;
if (!file) {
  console.error('usage: cpuprofile-top.ts <file.cpuprofile> [count] [filter]');
  process.exit(2);
}
const count = Number(countArg ?? 30);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const isIdle = (id: number): boolean => byId.get(id)!.callFrame.functionName === '(idle)';
const selfUs = new Map<number, number>();
const timeline: Array<[number, number]> = [];
let at = 0;
let windowUs = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i]!;
  const dt = profile.timeDeltas[i] ?? 0;
  at += dt;
  const second = Math.floor(at / 1e6);
  timeline[second] ??= [0, 0];
  timeline[second][isIdle(id) ? 1 : 0] += dt;
  if (at < fromUs || at > toUs) continue;
  windowUs += dt;
  if (!isIdle(id)) selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
}
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

const short = (url: string): string => {
  if (!url) return '(native)';
  const u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('/node_modules/');
  if (nm >= 0) return u.slice(nm + '/node_modules/'.length);
  const root = u.indexOf('/work/main/');
  return root >= 0 ? u.slice(root + '/work/main/'.length) : u;
};
const fnKey = (n: ProfileNode): string =>
  `${n.callFrame.functionName || '(anonymous)'}  ${short(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`;
const pkgKey = (n: ProfileNode): string => {
  const s = short(n.callFrame.url);
  if (s === '(native)') return n.callFrame.functionName.startsWith('(') ? n.callFrame.functionName : '(native/builtin)';
  if (s.startsWith('node:')) return s;
  if (s.startsWith('src/') || s.startsWith('test/')) return s;
  const parts = s.split('/');
  return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
};

const selfBy = (key: (n: ProfileNode) => string): Array<[string, number]> => {
  const acc = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const k = key(byId.get(id)!);
    acc.set(k, (acc.get(k) ?? 0) + us);
  }
  return [...acc].sort((a, b) => b[1] - a[1]);
};

// Inclusive: each sample counts once for every distinct function on its stack.
const inclusive = new Map<string, number>();
const fileOf = new Map<string, string>();
for (const [id, us] of selfUs) {
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const node = byId.get(cur)!;
    const k = fnKey(node);
    if (seen.has(k)) continue;
    fileOf.set(k, short(node.callFrame.url));
    seen.add(k);
    inclusive.set(k, (inclusive.get(k) ?? 0) + us);
  }
}

const pct = (us: number): string => `${((100 * us) / totalUs).toFixed(1).padStart(5)}%`;
const ms = (us: number): string => `${(us / 1000).toFixed(0).padStart(7)} ms`;

console.log(`${file}: ${profile.samples.length} samples`);
console.log(`busy % per second: ${timeline.map(([busy, idle], sec) => `${sec}:${Math.round((100 * busy) / (busy + idle || 1))}`).join(' ')}`);
console.log(
  `window ${fromUs / 1e6}–${toUs === Infinity ? 'end' : toUs / 1e6} s: ${(windowUs / 1e6).toFixed(2)} s, busy ${(totalUs / 1e6).toFixed(2)} s (percentages below are of busy time)`,
);
console.log('\nself time by function:');
for (const [k, us] of selfBy(fnKey).slice(0, count)) console.log(`  ${pct(us)} ${ms(us)}  ${k}`);
console.log('\nself time by file / package:');
for (const [k, us] of selfBy(pkgKey).slice(0, count)) console.log(`  ${pct(us)} ${ms(us)}  ${k}`);
console.log(`\ninclusive time by function${filter ? ` (files under "${filter}")` : ''}:`);
const inc = [...inclusive].filter(([k]) => !filter || fileOf.get(k)!.startsWith(filter)).sort((a, b) => b[1] - a[1]);
for (const [k, us] of inc.slice(0, count)) console.log(`  ${pct(us)} ${ms(us)}  ${k}`);
