import { request } from 'node:https';
import { rootCertificates } from 'node:tls';
import type { HostResolver } from '../http-target.ts';
import { refusedAddress } from '../target-address.ts';

/** RFC 8461 §3.3 suggests 64 KiB as the largest policy a sender need read. */
export const MAX_POLICY_BYTES = 64 * 1024;

export interface PolicyFetchOptions {
  resolver: HostResolver;
  /** 443; another port only in test set-ups. */
  port: number;
  timeoutMs: number;
  /** PEM certificates trusted besides the system's roots (a private PKI, tests). */
  extraCa: string | null;
  /** Fetch from private, loopback and other special-purpose addresses too. */
  allowPrivate: boolean;
}

/** Why a policy could not be had; `invalid` (TLS reporting's sts-webpki-invalid) when the certificate failed. */
export class PolicyFetchError extends Error {
  override name = 'PolicyFetchError';
  constructor(
    message: string,
    readonly webpki = false,
  ) {
    super(message);
  }
}

/**
 * GETs `https://mta-sts.<domain>/.well-known/mta-sts.txt` (RFC 8461 §3.3): the certificate
 * verified for that name, no redirect followed, 200 and text/plain only, at most 64 KiB, within
 * the time. The host's addresses come from the configured resolver and are checked as webhook
 * targets are, unless private addresses are allowed.
 */
export async function fetchPolicyText(domain: string, options: PolicyFetchOptions): Promise<string> {
  const host = `mta-sts.${domain}`;
  let addresses: string[];
  try {
    addresses = await options.resolver.addresses(host);
  } catch (err) {
    throw new PolicyFetchError(`could not resolve ${host}: ${(err as Error).message}`);
  }
  if (addresses.length === 0) throw new PolicyFetchError(`${host} has no address`);
  if (!options.allowPrivate) {
    for (const address of addresses) {
      const why = refusedAddress(address, []);
      if (why) throw new PolicyFetchError(`${host} resolves to ${address}, ${why} (delivery.mta_sts.allow_private)`);
    }
  }
  const ca = options.extraCa ? [...rootCertificates, options.extraCa] : undefined;
  return new Promise<string>((resolve, reject) => {
    const req = request(
      {
        host: addresses[0],
        port: options.port,
        servername: host,
        path: '/.well-known/mta-sts.txt',
        method: 'GET',
        headers: { host: options.port === 443 ? host : `${host}:${options.port}`, 'user-agent': 'Postilion MTA-STS' },
        ...(ca ? { ca } : {}),
        minVersion: 'TLSv1.2',
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return fail(new PolicyFetchError(`${host} answered HTTP ${res.statusCode} (a policy needs 200, redirects are not followed)`));
        }
        if (!/^text\/plain\b/i.test(res.headers['content-type'] ?? '')) {
          res.resume();
          return fail(new PolicyFetchError(`${host} served ${res.headers['content-type'] ?? 'no Content-Type'}, not text/plain`));
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_POLICY_BYTES) return fail(new PolicyFetchError(`${host} served a policy larger than ${MAX_POLICY_BYTES} bytes`));
          chunks.push(chunk);
        });
        res.on('end', () => {
          clearTimeout(timer);
          resolve(Buffer.concat(chunks).toString('utf8'));
        });
        res.on('error', (err) => fail(new PolicyFetchError(`${host}: ${err.message}`)));
      },
    );
    const fail = (err: PolicyFetchError) => {
      clearTimeout(timer);
      req.destroy();
      reject(err);
    };
    const timer = setTimeout(() => fail(new PolicyFetchError(`${host} did not serve the policy within ${options.timeoutMs} ms`)), options.timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => {
      const webpki = /CERT|SELF_SIGNED|UNABLE_TO|ERR_TLS_CERT_ALTNAME/.test(err.code ?? '');
      fail(new PolicyFetchError(`${host}: ${err.code ? `${err.code}: ` : ''}${err.message}`, webpki));
    });
    req.end();
  });
}
