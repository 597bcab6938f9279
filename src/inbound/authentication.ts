import { Readable } from 'node:stream';
import { authenticate } from 'mailauth';
import type { DnsResolver } from '../domains/resolver.ts';
import type { DmarcVerdict, InboundAuthentication } from '../store/records.ts';
import { chunksStream } from '../util/chunks-stream.ts';

export interface Arrival {
  /** The client's address, HELO name and MAIL FROM as received. */
  ip: string;
  helo: string;
  sender: string;
}

/** The checks of one message at most this long at the end of DATA; past it the message is taken as not checked. */
export const ARRIVAL_CHECK_MS = 30_000;
/** Bytes of a message given to spamd at most (its own limit: spamd.ts). */
const SPAMD_BYTES = 512 * 1024;

export interface ArrivalCheckDeps {
  /** The authserv-id of the Authentication-Results it writes (server.hostname). */
  hostname: string;
  resolver: DnsResolver;
  /** spamd's score of the message's first bytes; absent when none is configured. */
  spamScore?: (raw: readonly Buffer[]) => Promise<number>;
  timeoutMs?: number;
}

/** What the checks at arrival found (the action is the DMARC policy's, decided by the caller), and the header fields to prepend. */
export interface ArrivalCheck {
  authentication: Omit<InboundAuthentication, 'action'>;
  /** `Received-SPF` and `Authentication-Results` as mailauth folds them, CRLF-terminated; '' when the checks could not run. */
  header: string;
}

/**
 * SPF, DKIM, DMARC and ARC (mailauth, through the configured resolver) and spamd, once, on the
 * message as received. `parts` gives the message's bytes afresh at each call (read twice when
 * spamd is on). A check that fails or takes longer than its bound leaves the message unchecked
 * (results null): the sender is never refused for a fault of ours or of DNS.
 */
export async function checkArrival(parts: () => AsyncIterable<Buffer>, arrival: Arrival, d: ArrivalCheckDeps): Promise<ArrivalCheck> {
  const spam = d.spamScore ? firstBytes(parts(), SPAMD_BYTES).then((head) => d.spamScore!(head)) : Promise.resolve(0);
  const [auth, spamScore] = await Promise.all([
    bounded(runChecks(Readable.from(parts(), { objectMode: false }), arrival, d), d.timeoutMs ?? ARRIVAL_CHECK_MS),
    spam,
  ]);
  return {
    authentication: { results: auth?.results ?? null, receivedSpf: auth?.receivedSpf ?? null, dmarc: auth?.dmarc ?? null, spamScore },
    header: auth?.header ?? '',
  };
}

interface Checked {
  results: string | null;
  receivedSpf: string | null;
  dmarc: DmarcVerdict | null;
  header: string;
}

async function runChecks(input: Readable, arrival: Arrival, d: ArrivalCheckDeps): Promise<Checked | null> {
  try {
    const result = await authenticate(input, mailauthOptions(arrival, d.hostname, d.resolver));
    const header = result.headers.replace(/\r?\n/g, '\r\n');
    return {
      results: fieldValue(header, 'Authentication-Results'),
      receivedSpf: fieldValue(header, 'Received-SPF'),
      dmarc: verdict(result.dmarc),
      header: header.endsWith('\r\n') ? header : `${header}\r\n`,
    };
  } catch {
    input.destroy();
    return null;
  }
}

function mailauthOptions(arrival: Arrival, hostname: string, resolver: DnsResolver): Parameters<typeof authenticate>[1] {
  return {
    ip: arrival.ip.replace(/^::ffff:/, ''),
    helo: arrival.helo,
    sender: arrival.sender,
    mta: hostname,
    resolver: (name: string, rrtype: string) => resolver.resolve(name, rrtype),
    disableBimi: true,
  } as Parameters<typeof authenticate>[1];
}

/** mailauth's DMARC result as stored; null when it was not evaluated (no single From address). */
function verdict(dmarc: unknown): DmarcVerdict | null {
  if (!dmarc || typeof dmarc !== 'object') return null;
  const r = dmarc as { status?: { result?: unknown }; domain?: unknown; policy?: unknown; pct?: unknown };
  const policy = typeof r.policy === 'string' ? r.policy.trim().toLowerCase() : null;
  const pct = typeof r.pct === 'number' && Number.isInteger(r.pct) && r.pct >= 0 && r.pct <= 100 ? r.pct : 100;
  return {
    result: typeof r.status?.result === 'string' ? r.status.result : 'none',
    domain: typeof r.domain === 'string' ? r.domain : '',
    policy: policy === 'none' || policy === 'quarantine' || policy === 'reject' ? policy : null,
    pct,
  };
}

/** The unfolded value of a header field of `block`, null when absent. */
function fieldValue(block: string, name: string): string | null {
  const unfolded = block.replace(/\r?\n[ \t]+/g, ' ');
  const m = new RegExp(`^${name}:[ \\t]*(.*)$`, 'im').exec(unfolded);
  return m ? m[1]!.trim() : null;
}

async function bounded<T>(work: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The first `limit` bytes of a message's parts (fewer reads than the whole of a large one). */
async function firstBytes(parts: AsyncIterable<Buffer>, limit: number): Promise<Buffer[]> {
  const out: Buffer[] = [];
  let size = 0;
  for await (const part of parts) {
    out.push(size + part.length <= limit ? part : part.subarray(0, limit - size));
    size += part.length;
    if (size >= limit) break;
  }
  return out;
}

/**
 * SPF, DKIM and DMARC of a message stored before arrival checks, at its route POST: the value of
 * the `Authentication-Results` header it makes, or null when the checks could not be run at all.
 */
export async function authenticationResults(raw: readonly Buffer[], arrival: Arrival, hostname: string, resolver: DnsResolver): Promise<string | null> {
  try {
    const result = await authenticate(chunksStream(raw), { ...mailauthOptions(arrival, hostname, resolver), disableArc: true });
    return fieldValue(result.headers, 'Authentication-Results');
  } catch {
    return null;
  }
}
