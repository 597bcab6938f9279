import { createPrivateKey, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from '../config/schema.ts';
import { days, daysBetween, fail, ok, warn, type Check } from './check.ts';

/** A certificate expiring sooner than this is a warning. */
export const EXPIRY_WARNING_DAYS = 14;

/** A certificate and key pair the daemon serves, as the configuration names it. */
export interface CertificateSpec {
  name: string;
  certPath: string;
  keyPath: string;
  /** When neither file exists the daemon makes a self-signed pair on start (SMTP submission). */
  madeOnStart: boolean;
  /** A host name the certificate should name (clients check it), or null. */
  hostname: string | null;
}

/** The certificates of the listeners this configuration turns on. */
export function configuredCertificates(config: Config): CertificateSpec[] {
  const specs: CertificateSpec[] = [];
  const s = config.smtp.submission;
  // The inbound listener offers STARTTLS with the submission's certificate.
  if ((s.enabled && (s.starttls_port !== null || s.tls_port !== null)) || config.smtp.inbound.enabled) {
    specs.push({
      name: 'smtp-submission',
      certPath: resolve(config.keys.dir, s.cert),
      keyPath: resolve(config.keys.dir, s.key),
      madeOnStart: true,
      hostname: config.server.hostname,
    });
  }
  if (config.api.tls.enabled) {
    specs.push({
      name: 'api',
      certPath: resolve(config.keys.dir, config.api.tls.cert),
      keyPath: resolve(config.keys.dir, config.api.tls.key),
      madeOnStart: false,
      hostname: null,
    });
  }
  if (config.tracking.enabled && config.tracking.tls.enabled) {
    specs.push({
      name: 'tracking',
      certPath: resolve(config.keys.dir, config.tracking.tls.cert),
      keyPath: resolve(config.keys.dir, config.tracking.tls.key),
      madeOnStart: false,
      hostname: null,
    });
  }
  return specs;
}

/** What was found on disk for one certificate. */
export type CertificateFiles =
  { kind: 'none' } | { kind: 'half'; missing: string } | { kind: 'unreadable'; reason: string } | { kind: 'read'; cert: X509Certificate; keyMatches: boolean };

export function readCertificate(spec: CertificateSpec): CertificateFiles {
  const haveCert = existsSync(spec.certPath);
  const haveKey = existsSync(spec.keyPath);
  if (!haveCert && !haveKey) return { kind: 'none' };
  if (!haveCert) return { kind: 'half', missing: spec.certPath };
  if (!haveKey) return { kind: 'half', missing: spec.keyPath };
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(readFileSync(spec.certPath));
  } catch (err) {
    return { kind: 'unreadable', reason: `${spec.certPath}: ${(err as Error).message}` };
  }
  try {
    const key = createPrivateKey(readFileSync(spec.keyPath));
    return { kind: 'read', cert, keyMatches: cert.checkPrivateKey(key) };
  } catch (err) {
    return { kind: 'unreadable', reason: `${spec.keyPath}: ${(err as Error).message}` };
  }
}

/**
 * The verdict on one certificate at `now`: FAIL when missing (unless the daemon makes it: WARN),
 * half there, unreadable, not matching its key, not yet valid or expired; WARN when it expires
 * within 14 days or does not name the host clients ask for; OK otherwise.
 */
export function judgeCertificate(spec: CertificateSpec, files: CertificateFiles, now: number): Check {
  const name = `tls ${spec.name}`;
  switch (files.kind) {
    case 'none':
      return spec.madeOnStart
        ? warn(
            name,
            `${spec.certPath} does not exist yet: the daemon makes a self-signed certificate${spec.hostname ? ` for ${spec.hostname}` : ''} when it starts`,
          )
        : fail(name, `${spec.certPath} does not exist: the daemon cannot start with TLS on`);
    case 'half':
      return fail(name, `${files.missing} is missing while its pair exists: give both files or neither`);
    case 'unreadable':
      return fail(name, `cannot be read: ${files.reason}`);
    case 'read': {
      const { cert } = files;
      const notBefore = Date.parse(cert.validFrom);
      const notAfter = Date.parse(cert.validTo);
      const until = new Date(notAfter).toISOString();
      if (!files.keyMatches) return fail(name, `${spec.keyPath} is not the private key of ${spec.certPath}`);
      if (now > notAfter) return fail(name, `${spec.certPath} expired on ${until} (${days(daysBetween(notAfter, now))} ago)`);
      if (now < notBefore) return fail(name, `${spec.certPath} is not valid before ${new Date(notBefore).toISOString()}`);
      const left = daysBetween(now, notAfter);
      if (left < EXPIRY_WARNING_DAYS) return warn(name, `${spec.certPath} expires on ${until}, in ${days(left)}: renew it`);
      if (spec.hostname !== null && cert.checkHost(spec.hostname) === undefined) {
        return warn(name, `${spec.certPath} does not name ${spec.hostname} (server.hostname): clients that check the name refuse it`);
      }
      return ok(name, `${spec.certPath} valid until ${until} (${days(left)}), matches its key`);
    }
  }
}

export function checkCertificates(config: Config, now: number): Check[] {
  return configuredCertificates(config).map((spec) => judgeCertificate(spec, readCertificate(spec), now));
}
