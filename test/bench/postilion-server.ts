/**
 * A Postilion daemon for the accept benchmark, in its own process: the in-process test bed
 * (loopback DNS server, verified sending domain example.com), API on 127.0.0.1, logging off,
 * the per-account general rate limit raised so that it does not cap the load.
 *
 *   node --import tsx test/bench/postilion-server.ts
 */
import { startMessageBed } from '../helpers/messages.ts';
import { serveUntilDone } from './serve.ts';

export const RAISED_RATE = { per_second: 1_000_000, burst: 1_000_000 };

const bed = await startMessageBed({
  api: { rate_limits: { general: RAISED_RATE } },
  log: { level: 'silent' },
});
// The bed's clock is moved by hand (the domain check needed that); from here on it follows real
// time, so that timestamps are realistic and the token bucket refills.
const startedAt = Date.now();
const clockAtStart = bed.clock.ms;
bed.clock.now = () => clockAtStart + (Date.now() - startedAt);

const store = bed.server.daemon.core.store;
serveUntilDone(
  {
    url: bed.server.url,
    key: bed.server.adminKey,
    accountId: bed.server.accountId,
    path: bed.messages,
    from: `app@${bed.domain.domain}`,
    rateLimit: RAISED_RATE,
    pid: process.pid,
  },
  () => ({ ...store.commitStats }),
  () => bed.stop(),
);
