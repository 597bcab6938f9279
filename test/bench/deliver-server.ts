/**
 * A Postilion daemon for the delivery benchmark, in its own process: the in-process test bed
 * (loopback DNS server, verified sending domain example.com with an RSA-2048 DKIM key, no
 * Ed25519), API on 127.0.0.1, logging off, the per-account rate limit raised, and delivery on:
 * everything goes to the smarthost 127.0.0.1:$BENCH_SINK_PORT (the sink), except mail for
 * `verify.test`, which goes to 127.0.0.1:$BENCH_CAPTURE_PORT (a sink that keeps what it gets,
 * so the benchmark can check the DKIM signature).
 *
 * With BENCH_SUBMISSION=1 (test/bench/smtp-relay.ts) SMTP submission listens too, STARTTLS only,
 * on a free port of 127.0.0.1 (AUTH in clear is allowed from loopback), and a global SMTP
 * credential is made; its port, username and password are in the READY line.
 * With BENCH_COUNTERS=off the statistics counters are not written (`statistics.counters: false`).
 *
 *   BENCH_SINK_PORT=… BENCH_CAPTURE_PORT=… BENCH_SESSIONS=20 node --import tsx test/bench/deliver-server.ts
 */
import { startMessageBed } from '../helpers/messages.ts';
import { serveUntilDone } from './serve.ts';

const port = (name: string): number => {
  const value = Number(process.env[name]);
  if (!Number.isInteger(value) || value <= 0 || value > 65535) throw new Error(`${name} must be a port, not ${process.env[name]}`);
  return value;
};
const sessions = Number(process.env.BENCH_SESSIONS ?? 20);
const submission = process.env.BENCH_SUBMISSION === '1';
/** BENCH_COUNTERS=off: no statistics counters (the baseline of `bench:deliver-counters`). */
const counters = process.env.BENCH_COUNTERS !== 'off';
const RAISED_RATE = { per_second: 1_000_000, burst: 1_000_000 };

const bed = await startMessageBed({
  api: { rate_limits: { general: RAISED_RATE } },
  log: { level: 'silent' },
  dkim: { ed25519: false },
  statistics: { counters },
  delivery: {
    enabled: true,
    // One destination (the sink's domain): every session may go to it.
    concurrency: sessions,
    per_destination: sessions,
    smarthost: { host: '127.0.0.1', port: port('BENCH_SINK_PORT'), tls: 'off' },
    transport: { 'verify.test': { host: '127.0.0.1', port: port('BENCH_CAPTURE_PORT'), tls: 'off' } },
  },
  ...(submission ? { smtp: { submission: { enabled: true, starttls_port: 0, tls_port: null } } } : {}),
});
// As in postilion-server.ts: from here on the bed's clock follows real time.
const startedAt = Date.now();
const clockAtStart = bed.clock.ms;
bed.clock.now = () => clockAtStart + (Date.now() - startedAt);

/** The SMTP submission port and a global credential for it, when BENCH_SUBMISSION=1. */
async function smtpCredential(): Promise<{ port: number; username: string; password: string }> {
  const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body: { name: 'bench', scope: 'global' } });
  if (res.status !== 201) throw new Error(`smtp credential: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  return { port: bed.server.daemon.parts.submission.ports[0]!.port, username: res.body.username, password: res.body.password };
}

const { store } = bed.server.daemon.core;
const scheduler = bed.server.daemon.parts.jobs.engine;
serveUntilDone(
  {
    url: bed.server.url,
    key: bed.server.adminKey,
    path: bed.messages,
    domainPath: `${bed.base}/${bed.domain.domain}`,
    from: `app@${bed.domain.domain}`,
    pid: process.pid,
    ...(submission ? { submission: await smtpCredential() } : {}),
  },
  () => {
    const queue = scheduler.snapshot();
    return { ...store.commitStats, running: queue.running, ready: queue.ready };
  },
  () => bed.stop(),
);
