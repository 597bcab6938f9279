import type { AddressInfo, Server } from 'node:net';

/** Starts `server` listening; rejects with the listen error (a port in use, an address not here). */
export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** `http(s)://<address>:<port>` of a listening HTTP or HTTPS (TLS) server, IPv6 in brackets. */
export function listeningUrl(server: Server): string {
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return `${'setSecureContext' in server ? 'https' : 'http'}://${host}:${port}`;
}
