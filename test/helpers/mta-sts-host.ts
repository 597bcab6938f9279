import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TestCa } from './tls.ts';

/** An MTA-STS policy host on loopback (https://mta-sts.<domain>/.well-known/mta-sts.txt) with a certificate of the test CA. */
export interface PolicyHost {
  port: number;
  /** Policy text per domain; absent: 404. */
  policies: Map<string, string>;
  /** Fetches per domain. */
  fetches: Map<string, number>;
  close(): Promise<void>;
}

/** Serves the policies of `domains` (one certificate naming mta-sts.<domain> for each). */
export async function startPolicyHost(ca: TestCa, domains: string[]): Promise<PolicyHost> {
  const issued = await ca.issue(domains.map((d) => `mta-sts.${d}`));
  const policies = new Map<string, string>();
  const fetches = new Map<string, number>();
  const server: Server = createServer({ key: issued.key, cert: issued.chain }, (req, res) => {
    const domain = (req.headers.host ?? '').replace(/:\d+$/, '').replace(/^mta-sts\./, '');
    fetches.set(domain, (fetches.get(domain) ?? 0) + 1);
    const text = req.url === '/.well-known/mta-sts.txt' ? policies.get(domain) : undefined;
    if (text === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    policies,
    fetches,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The text of an MTA-STS policy (RFC 8461 §3.2). */
export const stsPolicy = (mode: string, mx: string[], maxAge = 86_400) =>
  ['version: STSv1', `mode: ${mode}`, ...mx.map((m) => `mx: ${m}`), `max_age: ${maxAge}`, ''].join('\r\n');
