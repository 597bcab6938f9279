import { createHash, sign as cryptoSign, type KeyObject } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { DkimKeyRecord } from '../store/records.ts';
import type { Clock } from '../util/time.ts';
import { DkimMessageReader, parseHeaderFields, relaxedHeader, signedFields } from './dkim-canonical.ts';
import type { DkimKeyStore } from './dkim-keys.ts';
import type { Emitter } from '../util/signals.ts';

/** What the signer tells: each signature made, with its `a=` algorithm (metrics). */
export interface SigningSignals {
  'dkim.signed': string;
}

export interface SigningIdentity {
  domainId: string;
  name: string;
  keys: DkimKeyRecord[];
}

export class SigningError extends Error {}

/** The fields signed when present, in `h=` order. */
const SIGNED = [
  'From',
  'Sender',
  'Reply-To',
  'Subject',
  'Date',
  'Message-ID',
  'To',
  'Cc',
  'MIME-Version',
  'Content-Type',
  'Content-Transfer-Encoding',
  'Content-ID',
  'Content-Description',
  'Resent-Date',
  'Resent-From',
  'Resent-Sender',
  'Resent-To',
  'Resent-Cc',
  'Resent-Message-ID',
  'In-Reply-To',
  'References',
  'List-Id',
  'List-Help',
  'List-Unsubscribe',
  'List-Unsubscribe-Post',
  'List-Subscribe',
  'List-Post',
  'List-Owner',
  'List-Archive',
  'Feedback-ID',
] as const;

/** Fields a forger gains most from adding a second of: signed once more than they occur. */
const OVERSIGNED: ReadonlySet<string> = new Set(['from', 'reply-to', 'subject', 'to', 'cc']);

/**
 * Signs messages with a domain's active key(s): one DKIM-Signature per key (RSA-SHA256, and
 * Ed25519-SHA256 alongside when the domain has such a key), relaxed/relaxed.
 *
 * The body is canonicalised and hashed once as it streams by; the keys are parsed KeyObjects
 * (kept by the key store); the signatures are made with the asynchronous `crypto.sign`, which runs
 * in libuv's thread pool, so RSA — the costliest step of a delivery — uses every core and leaves
 * the event loop free.
 *
 * At most `parallel` signatures are in the pool at once: one per pool thread (UV_THREADPOOL_SIZE,
 * which the launcher sets to two per core). Fewer left a thread idle while another waited on an
 * fsync, and each signature handed to a sleeping thread costs the event loop the wake-up; more
 * would only queue in the pool ahead of LevelDB's reads and writes.
 */
export class DkimSigner {
  private readonly slots: CryptoSlots;

  constructor(
    private readonly keys: DkimKeyStore,
    private readonly lookup: (domain: string) => Promise<SigningIdentity | null>,
    private readonly clock: Clock,
    private readonly signals: Emitter<SigningSignals> | null = null,
    parallel = poolThreads(),
  ) {
    this.slots = new CryptoSlots(parallel);
  }

  /** The DKIM-Signature header lines to put in front of `message` (ends with CRLF). */
  async sign(domain: string, message: Buffer | string | Readable, signTime = new Date(this.clock.now())): Promise<string> {
    const identity = await this.identity(domain);
    const { header, bodyHash } = await read(message);
    return this.signWith(identity, header, bodyHash, signTime);
  }

  /**
   * The DKIM-Signature header lines of a message known by its header block (latin1, as
   * `DkimMessageReader` gives it) and its relaxed body hash: a body sent many times (several
   * recipients, retries) is hashed once, and the message need not be joined to be signed.
   */
  async signHeader(domain: string, header: string, bodyHash: string, signTime = new Date(this.clock.now())): Promise<string> {
    return this.signWith(await this.identity(domain), header, bodyHash, signTime);
  }

  private async identity(domain: string): Promise<SigningIdentity> {
    const identity = await this.lookup(domain);
    if (!identity) throw new SigningError(`no DKIM keys: ${domain} is not a known domain`);
    if (identity.keys.length === 0) throw new SigningError(`no DKIM keys: ${domain} has no active key`);
    return identity;
  }

  private async signWith(identity: SigningIdentity, header: string, bodyHash: string, signTime: Date): Promise<string> {
    const { h, fields } = signedFields(parseHeaderFields(header), SIGNED, OVERSIGNED);
    if (fields.length === 0 || fields.every((f) => f.name !== 'from')) throw new SigningError('the message has no From field to sign');
    const signed = fields.map((f) => `${relaxedHeader(f.raw)}\r\n`).join('');
    const t = Math.floor(signTime.getTime() / 1000);
    const lines = await Promise.all(
      identity.keys.map(async (key) => {
        const privateKey = await this.keys.privateKey(identity.domainId, key.selector);
        const unsigned = signatureField({ algorithm: key.algorithm, d: identity.name, s: key.selector, t, bh: bodyHash, h });
        const data = Buffer.from(signed + relaxedHeader(unsigned), 'latin1');
        const signature = await this.slots.run(() => signWith(key.algorithm, privateKey, data));
        this.signals?.emit('dkim.signed', `${key.algorithm}-sha256`);
        return unsigned + fold(signature);
      }),
    );
    return lines.map((line) => `${line}\r\n`).join('');
  }
}

async function read(message: Buffer | string | Readable): Promise<{ header: string; bodyHash: string }> {
  const reader = new DkimMessageReader();
  if (typeof message === 'string') reader.update(Buffer.from(message, 'utf8'));
  else if (Buffer.isBuffer(message)) reader.update(message);
  else for await (const chunk of message) reader.update(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : (chunk as Buffer));
  return reader.end();
}

/** The DKIM-Signature field up to and including an empty `b=`, folded to stay under 78 columns. */
function signatureField(v: { algorithm: DkimKeyRecord['algorithm']; d: string; s: string; t: number; bh: string; h: string[] }): string {
  const lines = [`DKIM-Signature: v=1; a=${v.algorithm}-sha256; c=relaxed/relaxed; d=${v.d};`, ` s=${v.s}; q=dns/txt; t=${v.t};`, ` bh=${v.bh};`];
  let h = ' h=';
  v.h.forEach((name, i) => {
    const piece = `${name}${i < v.h.length - 1 ? ':' : ';'}`;
    if (h.length + piece.length > 76) {
      lines.push(h);
      h = ' ';
    }
    h += piece;
  });
  lines.push(h);
  return `${lines.join('\r\n')}\r\n b=`;
}

/** The base64 signature, folded into lines of 72 (folding whitespace is allowed inside `b=`). */
function fold(signature: string): string {
  let folded = signature.slice(0, 72);
  for (let at = 72; at < signature.length; at += 72) folded += `\r\n ${signature.slice(at, at + 72)}`;
  return folded;
}

/**
 * RSA signs the SHA-256 of the canonical header with PKCS#1 v1.5; Ed25519 (RFC 8463) signs the
 * SHA-256 digest itself. Both in the thread pool.
 */
function signWith(algorithm: DkimKeyRecord['algorithm'], key: KeyObject, data: Buffer): Promise<string> {
  const [digest, input] = algorithm === 'rsa' ? ['sha256', data] : [null, createHash('sha256').update(data).digest()];
  return new Promise((resolve, reject) => {
    cryptoSign(digest, input, key, (err, signature) => {
      if (err) reject(new SigningError(`DKIM signing failed: ${err.message}`));
      else resolve(signature.toString('base64'));
    });
  });
}

/** A counting semaphore: runs at most `size` tasks at once, the others in arrival order. */
class CryptoSlots {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(size: number) {
    this.free = Math.max(1, size);
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      // The slot passes straight to the next in line, if any.
      const next = this.waiting.shift();
      if (next) next();
      else this.free += 1;
    }
  }
}

/** libuv's thread pool size: UV_THREADPOOL_SIZE as the launcher set it, or libuv's default of 4. */
function poolThreads(): number {
  const size = Number(process.env.UV_THREADPOOL_SIZE);
  return Number.isInteger(size) && size > 0 ? size : 4;
}
