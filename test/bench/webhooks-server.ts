/**
 * A Postilion daemon for test/bench/webhooks.ts, in its own process: the in-process test bed
 * (loopback DNS server, verified sending domain example.com, RSA-2048 DKIM), logging off, rate
 * limits raised, webhook URLs on loopback allowed, and mail delivered to the smarthost
 * 127.0.0.1:$BENCH_SINK_PORT (without it, only sandbox mail is sent: played out, never sent).
 * `stats` answers with the engine's figures and, with `count`, the stored jobs.
 *
 *   BENCH_SINK_PORT=… node --import tsx test/bench/webhooks-server.ts
 */
import { startMessageBed } from '../helpers/messages.ts';
import { createInterface } from 'node:readline';
import { getHeapSpaceStatistics } from 'node:v8';
import { fenceKey } from '../../src/store/job-index.ts';

const sinkPort = process.env.BENCH_SINK_PORT ? Number(process.env.BENCH_SINK_PORT) : null;
const RAISED_RATE = { per_second: 1_000_000, burst: 1_000_000 };

const bed = await startMessageBed({
  api: { rate_limits: { general: RAISED_RATE } },
  log: { level: 'silent' },
  dkim: { ed25519: false },
  webhooks: { allow_networks: ['127.0.0.0/8'] },
  // BENCH_INBOUND=1 (test/bench/inbound.ts): the inbound MX on a free port of 127.0.0.1.
  ...(process.env.BENCH_INBOUND === '1' ? { smtp: { inbound: { enabled: true, port: 0, max_connections_per_address: 200 } } } : {}),
  // Without a sink only sandbox mail is sent: played out by the engine (reception, delivered), never sent.
  delivery: { enabled: true, concurrency: 20, per_destination: 20, smarthost: { host: '127.0.0.1', port: sinkPort ?? 9, tls: 'off' } },
});
// From here on the bed's clock follows real time (retries and pauses come due as they would).
const startedAt = Date.now();
const clockAtStart = bed.clock.ms;
bed.clock.now = () => clockAtStart + (Date.now() - startedAt);

const { daemon } = bed.server;
async function countKeys(
  family: { keys(range?: { gt?: string; gte?: string; lt?: string }): AsyncIterable<unknown> },
  range: { gt?: string; gte?: string; lt?: string } = {},
): Promise<number> {
  let n = 0;
  for await (const _ of family.keys(range)) n += 1;
  return n;
}
const stats = async (count: boolean) => {
  const destinations = daemon.parts.jobs.engine.destinations();
  const http = destinations.filter((d) => d.dispatcher === 'http');
  return {
    running: http.reduce((n, d) => n + d.running, 0),
    ready: http.reduce((n, d) => n + d.ready, 0),
    paused: http.filter((d) => d.pausedUntil !== null).length,
    // Counted key by key: a million keys read into one array would weigh on the very RSS measured.
    // Stored jobs: those pending (each with its one due-time entry), held, parked and failed.
    ...(count
      ? {
          jobs:
            (await countKeys(daemon.core.store.families.schedule, { gt: 'route:', lt: fenceKey('route') })) +
            (await countKeys(daemon.core.store.families.schedule, { gt: 'webhook:', lt: fenceKey('webhook') })) +
            (await countKeys(daemon.core.store.families.jobsHeld)) +
            (await countKeys(daemon.core.store.families.jobsParked)) +
            (await countKeys(daemon.core.store.families.jobsFailed)),
          parked: await countKeys(daemon.core.store.families.jobsParked),
        }
      : {}),
  };
};

let stopping = false;
const finish = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await bed.stop().catch(() => undefined);
  process.exit();
};
process.on('SIGTERM', () => void finish());
process.on('SIGINT', () => void finish());
createInterface({ input: process.stdin })
  .on('line', (line) => {
    const command = line.trim();
    // `suspend <destination>` / `resume <destination>`: as `postilion queue suspend|resume`.
    const m = /^(suspend|resume) (\S+)$/.exec(command);
    if (m) {
      if (m[1] === 'suspend') daemon.parts.jobs.engine.suspend(m[2]!);
      else daemon.parts.jobs.engine.resume(m[2]!);
      process.stdout.write(`DONE ${command}\n`);
      return;
    }
    if (command === 'mem') {
      const m = process.memoryUsage();
      const mb = (n: number) => Math.round(n / 1048576);
      process.stdout.write(
        `MEM ${JSON.stringify({ rss: mb(m.rss), heapTotal: mb(m.heapTotal), heapUsed: mb(m.heapUsed), external: mb(m.external), arrayBuffers: mb(m.arrayBuffers), spaces: Object.fromEntries(getHeapSpaceStatistics().map((sp) => [sp.space_name.replace('_space', ''), mb(sp.space_size)])) })}\n`,
      );
      return;
    }
    if (command === 'stats' || command === 'stats count') {
      void stats(command === 'stats count').then((s) => process.stdout.write(`STATS ${JSON.stringify(s)}\n`));
    }
  })
  .on('close', () => void finish());
process.stdout.write(
  `READY ${JSON.stringify({
    url: bed.server.url,
    key: bed.server.adminKey,
    accountId: bed.server.accountId,
    messages: bed.messages,
    from: `app@${bed.domain.domain}`,
    dir: bed.server.dir,
    inboundPort: bed.server.daemon.parts.inbound.port,
    pid: process.pid,
  })}\n`,
);
