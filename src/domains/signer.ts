import type { Readable } from 'node:stream';
import type { DKIMSignOptions } from 'mailauth';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import type { DkimKeyRecord } from '../store/records.ts';
import type { Clock } from '../util/time.ts';
import type { DkimKeyStore } from './dkim-keys.ts';

export interface SigningIdentity {
  domainId: string;
  name: string;
  keys: DkimKeyRecord[];
}

export class SigningError extends Error {}

/**
 * Signs messages with a domain's active key(s) through mailauth: one DKIM-Signature per key
 * (RSA-SHA256, and Ed25519-SHA256 alongside when the domain has such a key), relaxed/relaxed.
 */
export class DkimSigner {
  constructor(
    private readonly keys: DkimKeyStore,
    private readonly lookup: (domain: string) => Promise<SigningIdentity | null>,
    private readonly clock: Clock,
  ) {}

  /** The DKIM-Signature header lines to put in front of `message` (ends with CRLF). */
  async sign(domain: string, message: Buffer | string | Readable, signTime = new Date(this.clock.now())): Promise<string> {
    const identity = await this.lookup(domain);
    if (!identity) throw new SigningError(`no DKIM keys: ${domain} is not a known domain`);
    const signatureData = await Promise.all(
      identity.keys.map(async (key) => ({
        signingDomain: identity.name,
        selector: key.selector,
        privateKey: await this.keys.privatePem(identity.domainId, key.selector),
        algorithm: `${key.algorithm}-sha256`,
      })),
    );
    // mailauth's bundled types omit `signatureData` (several signatures at once), which its
    // runtime and README document; the options object is cast for that reason only.
    const options = { canonicalization: 'relaxed/relaxed', signTime, signatureData } as unknown as DKIMSignOptions;
    const result = await dkimSign(message, options);
    if (result.errors.length > 0) {
      throw new SigningError(`DKIM signing failed: ${result.errors.map((e) => String((e as { err?: unknown }).err ?? e)).join('; ')}`);
    }
    return result.signatures;
  }
}
