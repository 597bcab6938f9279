import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** How long a closing connection goes on reading what its client still sends, at most. */
export const LINGER_MS = 10_000;

/**
 * A staged close (RFC 9112 §9.6) for the connections of an HTTP server. Node closes a connection
 * right after a response that ends it (the client sent `Connection: close`, spoke HTTP/1.0, or the
 * server said close) by ending it and destroying the socket once the response is flushed. When
 * the client is still sending a body that was refused unread (413, 401, …), the kernel answers
 * the bytes that arrive after that with a reset, which can discard the response before the
 * client reads it. Here the socket is only half-closed: Node's parser goes on reading and
 * dropping the rest of the body, and the socket is destroyed once the client closes its side,
 * or after `lingerMs`.
 *
 * Node's server calls `destroySoon()` for that close when a socket has it (else `end()`), so
 * the staged close replaces it on each socket.
 */
export function closeInStages(socket: Socket, lingerMs = LINGER_MS): void {
  socket.destroySoon = function destroySoonStaged(this: Socket): void {
    if (this.destroyed) return;
    if (this.writable) this.end();
    destroyWhenClientCloses(this, lingerMs);
  };
}

/**
 * For a socket no parser reads any more (Node let go of it after a parse error): after `end()`,
 * what the client still sends is read and dropped until it closes, or `lingerMs` passed.
 */
export function drainAndLinger(socket: Duplex, lingerMs = LINGER_MS): void {
  socket.on('data', () => {});
  socket.resume();
  destroyWhenClientCloses(socket, lingerMs);
}

function destroyWhenClientCloses(socket: Duplex, lingerMs: number): void {
  const timer = setTimeout(() => socket.destroy(), lingerMs).unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', () => socket.destroy());
}
