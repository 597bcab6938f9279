import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TestCa } from './tls.ts';

/** One POST the receiver took. */
export interface ReceivedReport {
  contentType: string | undefined;
  body: Buffer;
}

/** An HTTPS receiver of TLS reports (an https rua) on loopback; it answers `status` (302: a redirect elsewhere). */
export interface ReportReceiver {
  port: number;
  received: ReceivedReport[];
  status: number;
  close(): Promise<void>;
}

/** Starts a receiver with a certificate of the test CA for `name`. */
export async function startReportReceiver(ca: TestCa, name: string): Promise<ReportReceiver> {
  const leaf = await ca.issue([name]);
  const state = { received: [] as ReceivedReport[], status: 200 };
  const server = https.createServer({ cert: leaf.cert, key: leaf.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.received.push({ contentType: req.headers['content-type'], body: Buffer.concat(chunks) });
      res.writeHead(state.status, state.status === 302 ? { location: 'https://elsewhere.example/' } : {}).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get received() {
      return state.received;
    },
    get status() {
      return state.status;
    },
    set status(value: number) {
      state.status = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
