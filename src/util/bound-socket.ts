import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP socket bound and listening ahead of the server that will answer on it (the daemon's bind
 * phase, src/bind-phase.ts): a busy address stops the start before the store is opened or any
 * file is made. Connections arriving meanwhile wait, accepted and unanswered, and go with the
 * socket to that server (`handTo`), which takes it over through Node's `server.listen(handle)`:
 * the one socket bound at the start is the one served, with no moment where it is free.
 */
export class BoundSocket {
  private readonly held = new Set<Socket>();
  private state: 'bound' | 'handed' | 'closed' = 'bound';

  private constructor(private readonly server: Server) {
    server.on('connection', (socket) => this.hold(socket));
  }

  /** Binds host:port (0: any free port); rejects with the listen error (EADDRINUSE, EACCES, …). */
  static bind(host: string, port: number): Promise<BoundSocket> {
    const server = createServer();
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port }, () => {
        server.off('error', reject);
        resolve(new BoundSocket(server));
      });
    });
  }

  get address(): AddressInfo {
    return this.server.address() as AddressInfo;
  }

  /** Whether no server has taken it (yet). */
  get bound(): boolean {
    return this.state === 'bound';
  }

  /**
   * `target` listens on this socket from now on; the connections that were waiting are handed to
   * it as if just accepted. Once only.
   */
  async handTo(target: Server): Promise<void> {
    if (this.state !== 'bound') throw new Error(`a bound socket ${this.state === 'handed' ? 'is handed over only once' : 'was closed'}`);
    this.state = 'handed';
    await new Promise<void>((resolve, reject) => {
      target.once('error', reject);
      target.listen(this.server, () => {
        target.off('error', reject);
        resolve();
      });
    });
    // The listening handle is the target's now; this server is an empty shell, never closed (that would close the handle).
    this.server.removeAllListeners('connection');
    for (const socket of this.held) {
      socket.removeAllListeners('error');
      socket.removeAllListeners('close');
      target.emit('connection', socket);
    }
    this.held.clear();
  }

  /** Lets the socket go (a start that failed after the bind phase); waiting connections are cut. */
  async close(): Promise<void> {
    if (this.state !== 'bound') return;
    this.state = 'closed';
    for (const socket of this.held) socket.destroy();
    this.held.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private hold(socket: Socket): void {
    // A client that gives up while waiting must not take the process down with an unhandled error.
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.held.delete(socket));
    this.held.add(socket);
  }
}
