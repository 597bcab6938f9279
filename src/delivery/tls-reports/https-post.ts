import https from 'node:https';
import type { LookupAddress, LookupOptions } from 'node:dns';
import type { Socket } from 'node:net';
import { rootCertificates } from 'node:tls';
import type { Cidr } from '../../util/cidr.ts';
import type { HostResolver } from '../http-target.ts';
import { bareHost, isIpLiteral, isLocalName, refusedAddress } from '../target-address.ts';

/**
 * One HTTPS POST of a TLS report (RFC 8460 §5.2): application/tlsrpt+gzip, certificate verified,
 * redirects not followed, bounded in time and in what is read back. As webhooks do
 * (delivery/http.ts), every address a name resolves to, and the address actually dialled, must
 * be public unless its network is allowed (tls_reporting.allow_networks).
 */

export interface PostSettings {
  resolver: HostResolver;
  allowNetworks: readonly Cidr[];
  timeoutMs: number;
  /** Extra CA certificates (PEM) trusted besides the system's. */
  ca?: Buffer | undefined;
}

/** Response bytes read at most; the status is what counts. */
const MAX_RESPONSE = 64 * 1024;

export type PostResult = { ok: true; status: number } | { ok: false; error: string };

export function postReport(target: string, body: Buffer, settings: PostSettings): Promise<PostResult> {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return Promise.resolve({ ok: false, error: 'not a URL' });
  }
  if (url.protocol !== 'https:') return Promise.resolve({ ok: false, error: 'only https: URLs are reporting targets' });
  const host = bareHost(url);
  if (isIpLiteral(host)) {
    const why = refusedAddress(host, settings.allowNetworks);
    if (why) return Promise.resolve({ ok: false, error: refused(host, why) });
  }
  type Callback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
  const lookup = (hostname: string, options: LookupOptions, callback: Callback): void => {
    const found = isLocalName(hostname) ? Promise.resolve(['127.0.0.1']) : settings.resolver.addresses(hostname);
    found.then(
      (addresses) => {
        if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
        for (const address of addresses) {
          const why = refusedAddress(address, settings.allowNetworks);
          if (why) return callback(Object.assign(new Error(refused(`${hostname} (${address})`, why)), { code: 'ETARGETREFUSED' }), '');
        }
        const list = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        if (options.all) callback(null, list);
        else callback(null, list[0]!.address, list[0]!.family);
      },
      (err: Error) => callback(Object.assign(new Error(`could not resolve ${hostname}: ${err.message}`), { code: 'EAI_AGAIN' }), ''),
    );
  };
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const req = https.request(url, {
      method: 'POST',
      lookup,
      agent: false,
      // An extra CA is trusted next to the system's, not instead of them.
      ...(settings.ca ? { ca: [...rootCertificates, settings.ca] } : {}),
      headers: { 'content-type': 'application/tlsrpt+gzip', 'content-length': String(body.length), 'user-agent': 'Postilion-TLSRPT/1' },
    });
    const timer = setTimeout(() => req.destroy(new Error(`timed out after ${settings.timeoutMs / 1000} s`)), settings.timeoutMs);
    req.on('socket', (socket: Socket) => {
      socket.once('connect', () => {
        const why = socket.remoteAddress ? refusedAddress(socket.remoteAddress, settings.allowNetworks) : null;
        if (why) req.destroy(new Error(refused(socket.remoteAddress!, why)));
      });
    });
    req.on('error', (err) => finish({ ok: false, error: err.message.slice(0, 300) }));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      let seen = 0;
      res.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen > MAX_RESPONSE) res.destroy();
      });
      const done = () => finish(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, error: `HTTP ${status}` });
      res.on('end', done);
      res.on('close', done);
      res.on('error', done);
    });
    req.end(body);
  });
}

function refused(what: string, why: string): string {
  return `refused to connect to ${what}: ${why}; such targets are refused unless listed in tls_reporting.allow_networks`;
}
