/**
 * The Postilion side of test/bench/tracking.ts, in its own process: a daemon with one verified
 * sending domain (example.com), logging off, delivery off, the tracking listener on a free port
 * of 127.0.0.1 (plain HTTP), and BENCH_CLICK_MESSAGES (1000) messages accepted with click
 * tracking through the API. The READY line carries the listener's URL, the Host of the tracking
 * links, and each message's click path, as read back from the stored HTML. `stats` answers how
 * many `message.clicked` events have landed in the store.
 *
 *   BENCH_CLICK_MESSAGES=1000 node --import tsx test/bench/tracking-server.ts
 */
import { startMessageBed } from '../helpers/messages.ts';
import { trackingUrls } from '../helpers/tracking.ts';
import { serveUntilDone } from './serve.ts';

const MESSAGES = Number(process.env.BENCH_CLICK_MESSAGES ?? 1000);
const RAISED_RATE = { per_second: 1_000_000, burst: 1_000_000 };
export const TARGET = 'https://shop.example.net/orders/7?from=mail';

const bed = await startMessageBed({ api: { rate_limits: { general: RAISED_RATE } }, log: { level: 'silent' }, tracking: { port: 0, link_scheme: 'http' } });
const ids: string[] = [];
for (let first = 0; first < MESSAGES; first += 100) {
  const recipients = Array.from({ length: Math.min(100, MESSAGES - first) }, (_, i) => ({ email: `r${first + i}@example.org` }));
  const res = await bed.send({
    recipients,
    html_content: `<html><body><p>Your order</p><a href="${TARGET}">See it</a></body></html>`,
    tracking: { click: true, open: false },
  });
  if (res.status !== 202) throw new Error(`send: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  ids.push(...res.body.data.map((d: { id: string }) => d.id));
}
const paths: string[] = [];
let host = '';
for (const id of ids) {
  const message = await bed.read(id);
  const html = message.content_parsed.parts.find((p: { content_type: string }) => p.content_type.startsWith('text/html')).content as string;
  const link = new URL(trackingUrls(html).links[0]!);
  host = link.host;
  paths.push(link.pathname);
}

// Every click must be recorded, not only answered: the parent compares this with its 302s.
let clicked = 0;
bed.server.daemon.core.store.onPut('events', (_key, value) => {
  if ((value as { type: string }).type === 'message.clicked') clicked += 1;
});
serveUntilDone(
  { url: bed.server.daemon.parts.tracking.url!, host, paths, target: TARGET, pid: process.pid },
  () => ({ clicked }),
  () => bed.stop(),
);
