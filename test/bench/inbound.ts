/**
 * Inbound benchmark (issue 16): Postfix `smtp-source` → Postilion's inbound MX → a route POST to a
 * loopback receiver answering 204, 5 KB messages, 20 sessions: messages per second from the
 * client's start until the receiver has every POST. In the same run the floor: `smtp-source`
 * into a bare smtp-server that writes each message to LevelDB with a synced batch
 * (test/bench/inbound-floor.ts). Target ≥ 0.5 of the floor. Medians of BENCH_RUNS (3).
 *
 * Knobs: BENCH_RUNS (3), BENCH_MESSAGES (5000), BENCH_SESSIONS (20), BENCH_BYTES (5120).
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { envNumber, withCleanup, type Defer } from './deliver-child.ts';
import { until } from './deliver-sink.ts';
import { Daemon, startReceiver } from './webhooks-child.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const RUNS = Math.round(envNumber('BENCH_RUNS', 3));
const MESSAGES = Math.round(envNumber('BENCH_MESSAGES', 5000, 100));
const SESSIONS = Math.round(envNumber('BENCH_SESSIONS', 20));
const BYTES = Math.round(envNumber('BENCH_BYTES', 5120, 100));

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const f0 = (n: number) => n.toFixed(0);
const f2 = (n: number) => n.toFixed(2);

function smtpSource(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v smtp-source'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('smtp-source (Postfix) is not installed: apt-get install postfix');
  }
}

/** smtp-source sending `count` messages of BYTES to `to` at 127.0.0.1:`port`; resolves when it exits. */
function source(port: number, count: number, to: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      smtpSource(),
      ['-c', '-l', String(BYTES), '-m', String(count), '-s', String(SESSIONS), '-f', 'customer@example.net', '-t', to, `127.0.0.1:${port}`],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    proc.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`smtp-source exited ${code}: ${stderr.slice(0, 500)}`))));
  });
}

/** The floor server in its own process. */
async function startFloor(defer: Defer): Promise<{ port: number; stop: () => Promise<void> }> {
  const proc: ChildProcess = spawn(process.execPath, ['--import', 'tsx', join(HERE, 'inbound-floor.ts')], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((done) => proc.once('exit', () => done()));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await exited;
  };
  defer(stop);
  const line = await new Promise<string>((resolve) => createInterface({ input: proc.stdout! }).once('line', resolve));
  return { port: (JSON.parse(line.slice(6)) as { port: number }).port, stop };
}

async function postilionRun(defer: Defer, receiver: Awaited<ReturnType<typeof startReceiver>>): Promise<number> {
  const d = new Daemon({ BENCH_INBOUND: '1' });
  defer(() => d.stop());
  await d.ready();
  const created = await d.api('POST', `/v2/accounts/${d.info.accountId}/routes`, {
    name: 'bench',
    url: `http://127.0.0.1:${receiver.port}/route`,
    recipient: 'support@example.com',
  });
  if (created.status !== 201) throw new Error(`route: HTTP ${created.status} ${JSON.stringify(created.body)}`);
  // Warm-up: a few messages through the whole path.
  receiver.reset();
  await source(d.info.inboundPort!, 100, 'support@example.com');
  await until('the warm-up POSTs', () => receiver.count() >= 100, 60_000, 10);
  receiver.reset();
  const started = performance.now();
  await source(d.info.inboundPort!, MESSAGES, 'support@example.com');
  await until(`${MESSAGES} route POSTs`, () => receiver.count() >= MESSAGES, 600_000, 10);
  const rate = MESSAGES / ((performance.now() - started) / 1000);
  await d.stop();
  return rate;
}

async function floorRun(defer: Defer): Promise<number> {
  const floor = await startFloor(defer);
  await source(floor.port, 100, 'support@example.com');
  const started = performance.now();
  await source(floor.port, MESSAGES, 'support@example.com');
  const rate = MESSAGES / ((performance.now() - started) / 1000);
  await floor.stop();
  return rate;
}

async function main(defer: Defer): Promise<void> {
  smtpSource();
  const receiver = await startReceiver();
  defer(() => new Promise<void>((done) => receiver.server.close(() => done())));
  const ours: number[] = [];
  const floors: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    ours.push(await postilionRun(defer, receiver));
    floors.push(await floorRun(defer));
    console.log(
      `round ${i + 1}: postilion ${f0(ours.at(-1)!)} msgs/s (smtp-source → inbound → route POST), floor ${f0(floors.at(-1)!)} msgs/s (smtp-source → smtp-server → synced LevelDB batch)`,
    );
  }
  const a = median(ours);
  const b = median(floors);
  console.log(`\n== inbound: ${MESSAGES} messages of ${BYTES} bytes, ${SESSIONS} sessions, median of ${RUNS}`);
  console.log(`  postilion ${f0(a)} msgs/s   per run: ${ours.map(f0).join(' ')}`);
  console.log(`  floor     ${f0(b)} msgs/s   per run: ${floors.map(f0).join(' ')}`);
  console.log(`  ratio ${f2(a / b)}   per round: ${ours.map((x, i) => f2(x / floors[i]!)).join(' ')}   target ≥ 0.5: ${a / b >= 0.5 ? 'MET' : 'NOT MET'}\n`);
}

await withCleanup(main);
