import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

export interface ListenerSpec {
  host: string;
  port: number;
  tls?: { cert: Buffer; key: Buffer };
}

/**
 * One listening socket of the API, HTTP or HTTPS, that can stop accepting and drain: in-flight
 * requests get until the deadline, then remaining connections are cut.
 */
export class ApiListener {
  private inFlight = 0;
  private idle: (() => void) | null = null;

  private constructor(private readonly server: Server | HttpsServer) {}

  static async start(spec: ListenerSpec, handler: RequestListener): Promise<ApiListener> {
    const server = spec.tls
      ? createHttpsServer({ cert: spec.tls.cert, key: spec.tls.key }, handler)
      : createHttpServer(handler);
    server.headersTimeout = 30_000;
    server.requestTimeout = 120_000;
    server.keepAliveTimeout = 5_000;
    const listener = new ApiListener(server);
    // Requests Node refuses before the app sees them still get a JSON error body.
    server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      if (!socket.writable) return socket.destroy();
      const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
      const body = JSON.stringify({ message: tooLarge ? 'request headers too large' : 'bad request' });
      socket.end(
        `HTTP/1.1 ${tooLarge ? '431 Request Header Fields Too Large' : '400 Bad Request'}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    });
    server.on('request', (_req, res: ServerResponse) => {
      listener.inFlight++;
      res.once('close', () => {
        listener.inFlight--;
        if (listener.inFlight === 0) listener.idle?.();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(spec.port, spec.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return listener;
  }

  get address(): AddressInfo {
    return this.server.address() as AddressInfo;
  }

  get url(): string {
    const { address, port } = this.address;
    const host = address.includes(':') ? `[${address}]` : address;
    return `${'setSecureContext' in this.server ? 'https' : 'http'}://${host}:${port}`;
  }

  /** New certificate and key for new connections (HTTPS only). */
  reloadTls(tls: { cert: Buffer; key: Buffer }): void {
    if ('setSecureContext' in this.server) this.server.setSecureContext({ cert: tls.cert, key: tls.key });
  }

  /** Stops accepting, lets in-flight requests finish until `graceMs`, then cuts what is left. */
  async close(graceMs: number): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    if (this.inFlight > 0) {
      await Promise.race([
        new Promise<void>((resolve) => (this.idle = resolve)),
        new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref()),
      ]);
    }
    this.server.closeAllConnections();
    await closed;
  }
}
