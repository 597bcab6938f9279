import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** The body as JSON, or undefined when it is empty or not JSON. */
  json: unknown;
}

/**
 * A plain TCP connection to an HTTP server, for what client libraries hide: odd methods and
 * request lines, interim responses, bodies cut short. Responses are parsed as they arrive.
 */
export class RawConnection {
  readonly socket: Socket;
  private buffer = Buffer.alloc(0);
  private readonly parsed: RawResponse[] = [];
  private waiters: Array<() => void> = [];
  closed = false;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (data: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, data]);
      this.parse();
      this.wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static open(url: string, localAddress?: string): Promise<RawConnection> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = connect({ host: hostname.replace(/^\[|\]$/g, ''), port: Number(port), ...(localAddress ? { localAddress } : {}) });
      socket.once('connect', () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket.write(data)) resolve();
      else this.socket.once('drain', resolve);
    });
  }

  /** The responses received so far (interim 1xx ones included). */
  get responses(): RawResponse[] {
    return this.parsed;
  }

  /** Waits for the n-th response (1-based), or for the connection to close; null if it closed first. */
  async response(n = 1, timeoutMs = 5_000): Promise<RawResponse | null> {
    const deadline = Date.now() + timeoutMs;
    while (this.parsed.length < n && !this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no response ${n} within ${timeoutMs} ms (got ${this.parsed.length})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.parsed[n - 1] ?? null;
  }

  /** Waits until the server closes the connection. */
  async closedByServer(timeoutMs = 5_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    return this.closed;
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private parse(): void {
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.buffer.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head[0]!)?.[1] ?? 0);
      const headers: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = status < 200 ? 0 : Number(headers['content-length'] ?? 0);
      if (this.buffer.length < end + 4 + length) return;
      const text = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
      this.buffer = this.buffer.subarray(end + 4 + length);
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      this.parsed.push({ status, headers, text, json });
    }
  }
}

/** One request over a fresh connection; the first final (non-1xx) response, or null if none came. */
export async function rawRequest(url: string, request: string | Buffer, timeoutMs = 5_000): Promise<RawResponse | null> {
  const conn = await RawConnection.open(url);
  try {
    await conn.write(request);
    for (let n = 1; ; n++) {
      const res = await conn.response(n, timeoutMs);
      if (!res || res.status >= 200) return res;
    }
  } finally {
    conn.destroy();
  }
}
