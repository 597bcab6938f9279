/**
 * Webhook delivery benchmark (issue 15). Prints three figures:
 *
 * 1. fan-out: BENCH_EVENTS (50,000) events fanned out to 2 webhooks on one loopback receiver
 *    answering 204: deliveries per second from the first send to the receiver having them all;
 *    in the same run the floor, as many signed POSTs of the same size made by a bare keep-alive
 *    HTTP client with the same concurrency (webhooks.per_origin, 4: both webhooks share one
 *    origin) and no store. Target ≥ 0.5 of the floor.
 * 2. mail with webhooks: BENCH_MESSAGES (10,000) messages through the API to an SMTP sink, timed
 *    until the sink has every message and, with a webhook on every message event, the receiver
 *    has every event (reception and delivered: 2 per message); runs with and without the webhook
 *    alternate. Target ≥ 0.6 of the rate without.
 * 3. a down endpoint: BENCH_PENDING (1,000,000) deliveries pending for a webhook whose port
 *    nobody listens on: the daemon's peak RSS; then it is killed and `postilion start` on the
 *    same data directory is timed until the API answers. Targets: ≤ 512 MB, ≤ 10 s.
 *
 * Knobs: BENCH_RUNS (3), BENCH_EVENTS, BENCH_MESSAGES, BENCH_PENDING, BENCH_PARTS (1,2,3).
 */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createWebhook, Daemon, peakRss, rssParts, startReceiver } from './webhooks-child.ts';
import { signatureHeaders, newWebhookSecret } from '../../src/delivery/signing.ts';
import { envNumber, withCleanup, type Defer } from './deliver-child.ts';
import { freePort, smtpSinkPath, startNodeSink, startPostfixSink, until, type Sink } from './deliver-sink.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');
const RUNS = Math.round(envNumber('BENCH_RUNS', 3));
const EVENTS = Math.round(envNumber('BENCH_EVENTS', 50_000, 100));
const MESSAGES = Math.round(envNumber('BENCH_MESSAGES', 10_000, 100));
const PENDING = Math.round(envNumber('BENCH_PENDING', 1_000_000, 100));
const PARTS = new Set((process.env.BENCH_PARTS ?? '1,2,3').split(',').map((p) => p.trim()));
const PER_ORIGIN = 4;
const BATCH = 100;
const IN_FLIGHT = 4;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const f0 = (n: number) => n.toFixed(0);
const f2 = (n: number) => n.toFixed(2);

/** Sends `total` messages in batches of 100 recipients, 4 requests at once. */
async function sendAll(d: Daemon, total: number, sandbox: boolean, tag: string): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const first = next;
      const count = Math.min(BATCH, total - first);
      next += count;
      const recipients = Array.from({ length: count }, (_, i) => ({ email: `r${first + i}.${tag}@example.org` }));
      const res = await d.api('POST', d.info.messages, {
        from: { email: d.info.from },
        recipients,
        subject: 'Bench',
        text_content: 'Hello from the webhook benchmark',
        html_content: '<p>Hello from the webhook benchmark</p>',
        ...(sandbox ? { sandbox: true } : {}),
      });
      if (res.status !== 202) throw new Error(`send: HTTP ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

/** The floor: `total` signed POSTs of `bodyBytes` by a bare keep-alive client, `concurrency` at once. */
async function floor(port: number, total: number, bodyBytes: number, concurrency: number): Promise<number> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const secret = newWebhookSecret();
  const body = JSON.stringify({
    type: 'message.delivered',
    timestamp: new Date().toISOString(),
    webhook_id: 'x',
    data: { pad: 'x'.repeat(Math.max(0, bodyBytes - 90)) },
  });
  let next = 0;
  const started = performance.now();
  const one = (id: string) =>
    new Promise<void>((done, reject) => {
      const headers = {
        ...signatureHeaders(secret, id, Math.floor(Date.now() / 1000), body),
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
      };
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/floor', agent, headers }, (res) => {
        res.resume();
        res.on('end', () => done());
      });
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) await one(`msg_${next++}`);
    }),
  );
  agent.destroy();
  return total / ((performance.now() - started) / 1000);
}

const BODY_BYTES = 420;

interface FanOut {
  rate: number;
  deliveryOnly: number;
  floor: number;
  peakMb: number;
  /** The daemon's CPU time (every thread) per delivery, in µs: end to end, and delivery alone. */
  cpuUs: number;
  cpuAloneUs: number;
}

async function fanOutRun(defer: Defer, receiver: Awaited<ReturnType<typeof startReceiver>>): Promise<FanOut> {
  const d = new Daemon({});
  defer(() => d.stop());
  await d.ready();
  const url = `http://127.0.0.1:${receiver.port}`;
  // Sandbox mail makes message.reception and message.delivered: 2 events a message.
  await createWebhook(d, `${url}/a`, { on_reception: true, on_delivered: true });
  await createWebhook(d, `${url}/b`, { on_reception: true, on_delivered: true });
  receiver.reset();
  const posts = EVENTS * 2;
  const started = performance.now();
  const cpuStart = d.cpuSeconds();
  await sendAll(d, EVENTS / 2, true, 'f');
  const progress = setInterval(
    () =>
      void d
        .stats()
        .then((s) => process.stderr.write(`  … ${receiver.count()} of ${posts} received; engine ${JSON.stringify(s)}\n`))
        .catch(() => undefined),
    5000,
  );
  await until(`${posts} webhook requests`, () => receiver.count() >= posts, 600_000, 20).finally(() => clearInterval(progress));
  const rate = posts / ((performance.now() - started) / 1000);
  const cpuUs = ((d.cpuSeconds() - cpuStart) / posts) * 1e6;

  // Delivery alone: the same again with the origin suspended until every job is stored, then resumed.
  const origin = `http://127.0.0.1:${receiver.port}`;
  await d.command(`suspend ${origin}`);
  receiver.reset();
  await sendAll(d, EVENTS / 2, true, 'g');
  await until(`${posts} stored deliveries`, async () => ((await d.stats(true)).jobs ?? 0) >= posts, 600_000, 500);
  const resumed = performance.now();
  const cpuResumed = d.cpuSeconds();
  await d.command(`resume ${origin}`);
  await until(`${posts} webhook requests`, () => receiver.count() >= posts, 600_000, 20);
  const deliveryOnly = posts / ((performance.now() - resumed) / 1000);
  const cpuAloneUs = ((d.cpuSeconds() - cpuResumed) / posts) * 1e6;
  const peakMb = d.peakRssMb();
  await d.stop();
  receiver.reset();
  const bare = await floor(receiver.port, posts, BODY_BYTES, PER_ORIGIN);
  return { rate, deliveryOnly, floor: bare, peakMb, cpuUs, cpuAloneUs };
}

/** Messages a second, and the daemon's CPU time (every thread) a message in µs. */
async function mailRun(
  defer: Defer,
  sink: Sink,
  receiver: Awaited<ReturnType<typeof startReceiver>>,
  webhook: boolean,
): Promise<{ rate: number; cpuUs: number }> {
  const d = new Daemon({ BENCH_SINK_PORT: String(sink.port) });
  defer(() => d.stop());
  await d.ready();
  if (webhook)
    await createWebhook(d, `http://127.0.0.1:${receiver.port}/mail`, {
      on_reception: true,
      on_delivered: true,
      on_transient_error: true,
      on_bounced: true,
      on_failed: true,
    });
  receiver.reset();
  const sunkBefore = sink.count();
  const started = performance.now();
  const cpuStart = d.cpuSeconds();
  await sendAll(d, MESSAGES, false, webhook ? 'w' : 'n');
  await until('the sink to have every message', () => sink.count() - sunkBefore >= MESSAGES, 600_000, 10);
  if (webhook) {
    const progress = setInterval(
      () =>
        void d
          .stats()
          .then((s) => process.stderr.write(`  … ${receiver.count()} of ${MESSAGES * 2} events received; engine ${JSON.stringify(s)}\n`))
          .catch(() => undefined),
      5000,
    );
    await until('the receiver to have every event', () => receiver.count() >= MESSAGES * 2, 600_000, 10).finally(() => clearInterval(progress));
  }
  const rate = MESSAGES / ((performance.now() - started) / 1000);
  const cpuUs = ((d.cpuSeconds() - cpuStart) / MESSAGES) * 1e6;
  await d.stop();
  return { rate, cpuUs };
}

async function downRun(defer: Defer): Promise<{
  jobs: number;
  parked: number;
  fillSeconds: number;
  peakMb: number;
  anonMb: number;
  fileMb: number;
  atPeak: Awaited<ReturnType<Daemon['memory']>> | null;
  restartMs: number;
  restartRssMb: number;
}> {
  const d = new Daemon({});
  defer(() => d.stop());
  await d.ready();
  const closed = await freePort();
  await createWebhook(d, `http://127.0.0.1:${closed}/down`, { on_reception: true, on_delivered: true });
  const started = performance.now();
  let peak = 0;
  // The daemon's own account of its memory, at the largest resident set seen.
  let atPeak: Awaited<ReturnType<Daemon['memory']>> | null = null;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, d.peakRssMb());
    } catch {
      // gone
    }
    void d
      .memory()
      .then((m) => {
        if (process.env.BENCH_VERBOSE) process.stderr.write(`  … memory ${JSON.stringify(m)}\n`);
        if (!atPeak || m.rss > atPeak.rss) atPeak = m;
      })
      .catch(() => undefined);
  }, 1000);
  await sendAll(d, Math.ceil(PENDING / 2), true, 'd');
  // Until every event has its job (fan-out done) and the engine holds nothing in memory.
  let last = { jobs: 0, parked: 0 } as { jobs?: number; parked?: number; ready: number; running: number };
  const progress = setInterval(() => process.stderr.write(`  … sent; engine ${JSON.stringify(last)}\n`), 15_000);
  await until(
    `${PENDING} pending deliveries`,
    async () => {
      last = await d.stats(true);
      return (last.jobs ?? 0) >= PENDING && last.ready === 0;
    },
    1_800_000,
    2000,
  ).finally(() => clearInterval(progress));
  const fillSeconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peak = Math.max(peak, d.peakRssMb());
  const parts = { ...rssParts(d.info.pid), atPeak: atPeak as Awaited<ReturnType<Daemon['memory']>> | null };
  const dir = d.info.dir;
  await d.kill();

  // `postilion start` on the same data directory: time to the API's first answer.
  const port = await freePort();
  const config = join(dir, 'restart.yaml');
  writeFileSync(
    config,
    [
      `data:\n  dir: ${join(dir, 'data')}`,
      `keys:\n  dir: ${join(dir, 'keys')}`,
      `api:\n  port: ${port}`,
      'metrics:\n  enabled: false',
      'log:\n  level: warn',
      'delivery:\n  enabled: false',
      'smtp:\n  submission:\n    enabled: false\n  inbound:\n    enabled: false',
      "webhooks:\n  allow_networks: ['127.0.0.0/8']",
    ].join('\n') + '\n',
  );
  const t0 = performance.now();
  const proc = spawn(process.execPath, [join(ROOT, 'src/cli/postilion.js'), '--config', config, 'start'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  defer(
    () =>
      new Promise<void>((done) => {
        if (proc.exitCode !== null) return done();
        proc.once('exit', () => done());
        proc.kill('SIGTERM');
        setTimeout(() => proc.kill('SIGKILL'), 30_000).unref();
      }),
  );
  // Killed, the first daemon left its data directory (most of a gigabyte) behind: removed once the
  // restarted one has stopped (the stops run in the order they were deferred).
  defer(() => rmSync(dir, { recursive: true, force: true }));
  await until(
    'the restarted API to answer',
    async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/v2/ping`)).status < 500;
      } catch {
        return false;
      }
    },
    120_000,
    20,
  );
  const restartMs = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 10_000));
  const restartRssMb = peakRss(proc.pid!);
  return { jobs: last.jobs ?? 0, parked: last.parked ?? 0, fillSeconds, peakMb: peak, ...parts, restartMs, restartRssMb };
}

async function main(defer: Defer): Promise<void> {
  const receiver = await startReceiver();
  defer(() => new Promise<void>((done) => receiver.server.close(() => done())));
  receiver.server.closeIdleConnections?.();

  if (PARTS.has('1')) {
    const runs: FanOut[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await fanOutRun(defer, receiver);
      runs.push(r);
      console.log(
        `fan-out run ${i + 1}: postilion ${f0(r.rate)} deliveries/s end to end, ${f0(r.deliveryOnly)} delivery alone; floor ${f0(r.floor)} POSTs/s; ratios ${f2(r.rate / r.floor)} / ${f2(r.deliveryOnly / r.floor)}; daemon CPU ${f0(r.cpuUs)} / ${f0(r.cpuAloneUs)} µs a delivery; daemon peak RSS ${f0(r.peakMb)} MB`,
      );
    }
    const rate = median(runs.map((r) => r.rate));
    const alone = median(runs.map((r) => r.deliveryOnly));
    const bare = median(runs.map((r) => r.floor));
    console.log(`\n== fan-out: ${EVENTS} events × 2 webhooks (${EVENTS * 2} signed POSTs), one origin, ${PER_ORIGIN} at once, median of ${RUNS}`);
    console.log(
      `  postilion, end to end (API sends of sandbox mail → events → jobs → POSTs)  ${f0(rate)} deliveries/s   per run: ${runs.map((r) => f0(r.rate)).join(' ')}`,
    );
    console.log(
      `  postilion, delivery alone (jobs stored, origin resumed → POSTs)           ${f0(alone)} deliveries/s   per run: ${runs.map((r) => f0(r.deliveryOnly)).join(' ')}`,
    );
    console.log(
      `  floor (bare keep-alive client, ${PER_ORIGIN} sockets, no store)                        ${f0(bare)} POSTs/s        per run: ${runs.map((r) => f0(r.floor)).join(' ')}`,
    );
    console.log(
      `  daemon CPU (every thread) a delivery: ${f0(median(runs.map((r) => r.cpuUs)))} µs end to end, ${f0(median(runs.map((r) => r.cpuAloneUs)))} µs delivery alone`,
    );
    console.log(
      `  ratio end to end ${f2(rate / bare)}, delivery alone ${f2(alone / bare)}   target ≥ 0.5 (end to end): ${rate / bare >= 0.5 ? 'MET' : 'NOT MET'}\n`,
    );
  }

  if (PARTS.has('2')) {
    const path = process.env.BENCH_SINK === 'node' ? null : smtpSinkPath();
    const sink = path ? await startPostfixSink(path) : await startNodeSink();
    defer(() => sink.close());
    const without: number[] = [];
    const withHooks: number[] = [];
    const cpu: Array<[number, number]> = [];
    for (let i = 0; i < RUNS; i++) {
      const a = await mailRun(defer, sink, receiver, false);
      const b = await mailRun(defer, sink, receiver, true);
      without.push(a.rate);
      withHooks.push(b.rate);
      cpu.push([a.cpuUs, b.cpuUs]);
      console.log(
        `mail run ${i + 1}: without webhooks ${f0(without.at(-1)!)} msgs/s, with ${f0(withHooks.at(-1)!)} msgs/s (ratio ${f2(withHooks.at(-1)! / without.at(-1)!)}); daemon CPU ${f0(a.cpuUs)} / ${f0(b.cpuUs)} µs a message`,
      );
    }
    const a = median(without);
    const b = median(withHooks);
    console.log(
      `\n== mail with webhooks: ${MESSAGES} messages to ${sink.name}, until the sink has all and the receiver every event (2 a message), median of ${RUNS}`,
    );
    console.log(`  without webhooks ${f0(a)} msgs/s   per run: ${without.map(f0).join(' ')}`);
    console.log(`  with a webhook   ${f0(b)} msgs/s   per run: ${withHooks.map(f0).join(' ')}`);
    console.log(`  daemon CPU (every thread) a message: without ${f0(median(cpu.map((c) => c[0])))} µs, with ${f0(median(cpu.map((c) => c[1])))} µs`);
    console.log(`  ratio ${f2(b / a)}   target ≥ 0.6: ${b / a >= 0.6 ? 'MET' : 'NOT MET'}\n`);
  }

  if (PARTS.has('3')) {
    const r = await downRun(defer);
    console.log(`\n== down endpoint: ${r.jobs} deliveries pending (${r.parked} parked off the index), made in ${f0(r.fillSeconds)} s`);
    console.log(
      `  daemon peak RSS ${f0(r.peakMb)} MB   target ≤ 512: ${r.peakMb <= 512 ? 'MET' : 'NOT MET'};  at the end of the fill ${f0(r.anonMb)} MB anonymous + ${f0(r.fileMb)} MB file-backed (mapped table files, the node binary)`,
    );
    if (r.atPeak)
      console.log(
        `  at the largest sample (${r.atPeak.rss} MB): V8 heap ${r.atPeak.heapUsed} MB used of ${r.atPeak.heapTotal} MB, external ${r.atPeak.external} MB (array buffers ${r.atPeak.arrayBuffers} MB); the rest is LevelDB's own memory, mapped files and the binary`,
      );
    console.log(
      `  restart to the API answering ${f0(r.restartMs)} ms   target ≤ 10 s: ${r.restartMs <= 10_000 ? 'MET' : 'NOT MET'};  RSS 10 s after ${f0(r.restartRssMb)} MB\n`,
    );
  }
}

await withCleanup(main);
