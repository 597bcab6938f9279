/**
 * The floor of the click-redirect benchmark: a bare node:http server on 127.0.0.1 that answers
 * every request with a 302 to a fixed URL and the tracking listener's no-cache headers. HTTP and
 * a redirect, nothing else: no token check, no lookup, no recording.
 *
 *   node --import tsx test/bench/redirect-floor.ts
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveUntilDone } from './serve.ts';

const TARGET = 'https://shop.example.net/orders/7?from=mail';
const server = createServer((req, res) => {
  res.writeHead(302, {
    location: TARGET,
    'cache-control': 'no-store, no-cache, must-revalidate, max-age=0',
    pragma: 'no-cache',
    expires: '0',
    'content-length': '0',
  });
  res.end();
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
serveUntilDone(
  { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, pid: process.pid },
  () => ({}),
  () => new Promise<void>((resolve) => server.close(() => resolve())),
);
