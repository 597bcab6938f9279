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
  private buffer: Buffer = Buffer.alloc(0);
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
      const next = parseResponse(this.buffer);
      if (!next) return;
      this.buffer = next.rest;
      this.parsed.push(next.response);
    }
  }
}

/** The first whole response at the start of `buffer` and what follows it, or null if it is not all there. */
function parseResponse(buffer: Buffer): { response: RawResponse; rest: Buffer } | null {
  const end = buffer.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const head = buffer.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head[0]!)?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = status < 200 ? 0 : Number(headers['content-length'] ?? 0);
  if (buffer.length < end + 4 + length) return null;
  const text = buffer.subarray(end + 4, end + 4 + length).toString('utf8');
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { response: { status, headers, text, json }, rest: buffer.subarray(end + 4 + length) };
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

/**
 * A client that writes its whole request, however large, before it reads the answer (as simple
 * clients do), on a connection it keeps half-open, so that it reads whatever the server sent
 * before closing. `body` bytes are sent in 64 KiB pieces, as chunks when `chunked`. Resolves to
 * the first final response, or to the error that ended the connection first ("EPIPE", …).
 */
export async function sendWhole(url: string, head: string, bodyBytes: number, chunked = false): Promise<RawResponse | { error: string }> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname.replace(/^\[|\]$/g, ''), port: Number(port), allowHalfOpen: true });
  let received = Buffer.alloc(0);
  let failure: string | null = null;
  socket.on('data', (data: Buffer) => (received = Buffer.concat([received, data])));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('error', (err: NodeJS.ErrnoException) => (failure ??= err.code ?? err.message));
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const write = (data: string | Buffer) =>
      new Promise<void>((resolve) => {
        if (socket.write(data)) resolve();
        else {
          socket.once('drain', resolve);
          socket.once('close', resolve);
        }
      });
    await write(head);
    const piece = Buffer.alloc(64 * 1024, 0x61);
    for (let sent = 0; sent < bodyBytes && failure === null && !socket.destroyed; sent += piece.length) {
      const part = piece.subarray(0, Math.min(piece.length, bodyBytes - sent));
      await write(chunked ? Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]) : part);
    }
    if (chunked && failure === null) await write('0\r\n\r\n');
    if (failure !== null) return { error: failure };
    // The answer, read now that everything was sent.
    const deadline = Date.now() + 5_000;
    for (;;) {
      const parsed = parseResponse(received);
      if (parsed) return parsed.response;
      if (failure !== null) return { error: failure };
      if (socket.destroyed || Date.now() > deadline) return { error: `no complete answer (${received.length} bytes)` };
      await Promise.race([new Promise((r) => setTimeout(r, 10)), closed]);
    }
  } finally {
    socket.destroy();
  }
}
