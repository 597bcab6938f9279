import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { BoundSocket } from '../util/bound-socket.ts';
import type { Metrics } from './metrics.ts';

/** What `/readyz` asks: each check is a name and whether it holds now. */
export type ReadinessCheck = () => Array<{ name: string; ok: boolean }>;

/**
 * The operator's listener, apart from the API: `GET /metrics` (Prometheus text), `/healthz` (the
 * process answers) and `/readyz` (store open and every listener bound; 503 naming what is not).
 * No authentication: bind it to loopback or a management network (metrics.host).
 */
export class MetricsListener {
  private constructor(private readonly server: Server) {}

  /** `bound`: the socket the daemon's bind phase bound at host:port. */
  static async start(host: string, port: number, metrics: Metrics, ready: ReadinessCheck, log: Logger, bound?: BoundSocket): Promise<MetricsListener> {
    const server = createServer((req, res) => {
      handle(req, res, metrics, ready).catch((err: unknown) => {
        log.error({ err }, 'metrics request failed');
        if (!res.headersSent) send(res, 500, 'internal error\n');
        else res.destroy();
      });
    });
    server.headersTimeout = 10_000;
    server.requestTimeout = 30_000;
    if (bound) await bound.handTo(server);
    else {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    }
    return new MetricsListener(server);
  }

  get address(): AddressInfo {
    return this.server.address() as AddressInfo;
  }

  get url(): string {
    const { address, port } = this.address;
    return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }
}

async function handle(req: IncomingMessage, res: ServerResponse, metrics: Metrics, ready: ReadinessCheck): Promise<void> {
  // Requests carry no body here; whatever a client sends is drained and ignored.
  req.resume();
  const path = (req.url ?? '/').split('?', 1)[0];
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    return send(res, 405, 'method not allowed\n');
  }
  switch (path) {
    case '/metrics': {
      const text = await metrics.render();
      res.setHeader('Content-Type', metrics.contentType);
      return send(res, 200, text, req.method === 'HEAD');
    }
    case '/healthz':
      return send(res, 200, 'ok\n', req.method === 'HEAD');
    case '/readyz': {
      const failing = ready()
        .filter((c) => !c.ok)
        .map((c) => c.name);
      return failing.length === 0
        ? send(res, 200, 'ready\n', req.method === 'HEAD')
        : send(res, 503, `not ready: ${failing.join(', ')}\n`, req.method === 'HEAD');
    }
    default:
      return send(res, 404, 'not found: try /metrics, /healthz or /readyz\n');
  }
}

function send(res: ServerResponse, status: number, body: string, headOnly = false): void {
  res.statusCode = status;
  if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(headOnly ? undefined : body);
}
