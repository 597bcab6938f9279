import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Delivery {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** The parsed body when the `standardwebhooks` package verified it, else null. */
  payload: Record<string, any> | null; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON of many shapes, asserted by tests
  error?: string;
}

/**
 * A webhook receiver on 127.0.0.1 that verifies every request with the `standardwebhooks`
 * package in raw-key mode (the key is the secret's UTF-8 bytes), as an application would. Each
 * path has its own secret; `answer` decides the status (204 by default, 400 when verification
 * fails).
 */
export class WebhookReceiver {
  readonly received: Delivery[] = [];
  readonly secrets = new Map<string, string>();
  /**
   * The status to answer for a request; null drops the connection, 'hang' never answers, a
   * promise answers when it settles (a receiver the test holds and lets go).
   */
  answer: (delivery: Delivery) => number | null | 'hang' | Promise<number | null> = (d) => (d.payload ? 204 : 400);
  private readonly sockets = new Set<Socket>();
  private readonly waiters = new Set<() => void>();
  private server!: Server;
  port = 0;

  /** Listens on 127.0.0.1, on `port` when given (a receiver coming back), else a free one. */
  static async start(port = 0): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    receiver.server = createServer((req, res) => receiver.handle(req, res));
    receiver.server.on('connection', (socket: Socket) => {
      receiver.sockets.add(socket);
      socket.on('close', () => receiver.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => receiver.server.listen(port, '127.0.0.1', resolve));
    receiver.port = (receiver.server.address() as AddressInfo).port;
    return receiver;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Verified deliveries to `path`. */
  verified(path?: string): Delivery[] {
    return this.received.filter((d) => d.payload !== null && (path === undefined || d.path === path));
  }

  /** Waits until `probe` holds over what was received (checked on every request). */
  async until(probe: (received: Delivery[]) => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!probe(this.received)) {
      if (Date.now() > deadline)
        throw new Error(
          `receiver: condition not met in ${timeoutMs} ms; ${this.received.length} received: ${this.received
            .slice(-5)
            .map((d) => d.body.slice(0, 200))
            .join('\n')}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        this.waiters.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '/';
      const delivery: Delivery = { path, headers: req.headers, body, payload: null };
      const secret = this.secrets.get(path);
      try {
        if (!secret) throw new Error(`no secret for ${path}`);
        delivery.payload = new Webhook(secret, { format: 'raw' }).verify(body, req.headers as Record<string, string>) as Record<string, unknown>;
      } catch (err) {
        delivery.error = (err as Error).message;
      }
      this.received.push(delivery);
      const reply = (status: number | null | 'hang') => {
        // A held answer may come after the client (or stop()) has closed the connection.
        if (res.destroyed) return;
        if (status === null) res.socket?.destroy();
        else if (status !== 'hang') res.writeHead(status).end();
      };
      const status = this.answer(delivery);
      if (status instanceof Promise) void status.then(reply);
      else reply(status);
      for (const wake of this.waiters) wake();
      this.waiters.clear();
    });
  }
}
