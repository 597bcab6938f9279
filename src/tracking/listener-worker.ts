/**
 * The composition root of the tracking listener's thread, as daemon.ts is of the daemon (which
 * starts it through TrackingListenerThread, listener-thread.ts): the thread parses the requests,
 * checks the tokens, answers with the pixel or the redirect, and hands the hits to the daemon,
 * which records them. What it must know of domains, messages and links it asks the
 * daemon, and keeps: a message's facts and links never change once it is accepted (kept 10
 * minutes, so a deleted message stops answering soon), a domain's tracking host may (kept 5 s).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { parseCidr, type Cidr } from '../util/cidr.ts';
import { Lru } from '../util/lru.ts';
import { andThen, type Maybe } from '../util/maybe.ts';
import { trackingEndpoint } from './endpoint.ts';
import { LeanHttpServer, type LeanAnswer, type LeanHandler, type LeanRequest } from './lean-http.ts';
import type { FromThread, Lookup, MessageFacts, RequestCounts, ThreadHit, ThreadServe, ThreadStart, ToThread } from './thread-protocol.ts';
import { TrackingTokens } from './tokens.ts';

/** Hits handed over and not yet written at most; past it, requests wait for the daemon to catch up. */
const MAX_PENDING = 10_000;
/** Hits are handed to the daemon this often, or once this many are waiting. */
const HANDOVER_MS = 10;
const HANDOVER_MAX = 500;
const HOST_MS = 5_000;
const HOSTS_MAX = 10_000;
const FACTS_MS = 10 * 60_000;
const FACTS_MAX = 20_000;

interface Facts extends MessageFacts {
  /** The stored links (null: none), their read in progress, or undefined: not asked yet. */
  links: readonly string[] | null | Promise<readonly string[] | null> | undefined;
}

const start = workerData as ThreadStart;
const port = parentPort!;
// Buffers cross to a thread as plain Uint8Arrays.
const tls = start.tls ? { cert: Buffer.from(start.tls.cert), key: Buffer.from(start.tls.key) } : null;
let trusted: readonly Cidr[] = [];
let mtaStsPolicies: Record<string, string> = {};

const send = (message: FromThread) => port.postMessage(message);
const log = (level: 'info' | 'error', fields: Record<string, unknown>, message: string) => send({ type: 'log', level, fields, message });

// Lookups: asked of the daemon, answered by seq.
let seq = 0;
const asked = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
function ask<T>(lookup: Lookup): Promise<T> {
  seq += 1;
  const id = seq;
  return new Promise<T>((resolve, reject) => {
    asked.set(id, { resolve: resolve as (value: unknown) => void, reject });
    send({ type: 'lookup', seq: id, lookup });
  });
}

const hosts = new Lru<string, string>(HOSTS_MAX, HOST_MS);
function domainOfHost(host: string): Maybe<string | null> {
  const kept = hosts.get(host);
  if (kept !== undefined) return kept;
  return ask<string | null>({ kind: 'host', host }).then((id) => {
    // Only known hosts are kept: any Host header can be sent, and must not grow memory.
    if (id === null) hosts.delete(host);
    else hosts.set(host, id);
    return id;
  });
}

const facts = new Lru<string, Facts>(FACTS_MAX, FACTS_MS);
/** One question per message however many requests for it arrive meanwhile. */
const reading = new Map<string, Promise<Facts | null>>();
function factsOf(id: string): Maybe<Facts | null> {
  const kept = facts.get(id);
  if (kept) return kept;
  let read = reading.get(id);
  if (!read) {
    read = ask<MessageFacts | null>({ kind: 'message', id })
      .then((found) => {
        facts.delete(id);
        if (!found) return null;
        const entry: Facts = { ...found, links: undefined };
        facts.set(id, entry);
        return entry;
      })
      .finally(() => reading.delete(id));
    reading.set(id, read);
  }
  return read;
}

function link(id: string, index: number): Maybe<string | null> {
  return andThen(factsOf(id), (entry) => {
    if (!entry) return null;
    if (entry.links === undefined) {
      entry.links = ask<string[] | null>({ kind: 'links', id }).then(
        (links) => (entry.links = links),
        (err: unknown) => {
          entry.links = undefined;
          throw err;
        },
      );
    }
    return andThen(entry.links, (links) => links?.[index] ?? null);
  });
}

// Hits: handed over every HANDOVER_MS (or HANDOVER_MAX hits), so that a busy listener wakes the
// daemon a hundred times a second and not once per turn of its loop; the daemon says how many it
// has written.
let queue: ThreadHit[] = [];
let unwritten = 0;
let scheduled = false;
let handoverTimer: NodeJS.Timeout | undefined;
const waiting: Array<() => void> = [];
function handOver(): void {
  scheduled = false;
  clearTimeout(handoverTimer);
  if (queue.length === 0) return;
  unwritten += queue.length;
  send({ type: 'hits', hits: queue });
  queue = [];
}
function hit(h: ThreadHit): Maybe<void> {
  queue.push(h);
  if (queue.length >= HANDOVER_MAX) handOver();
  else if (!scheduled) {
    scheduled = true;
    handoverTimer = setTimeout(handOver, HANDOVER_MS);
  }
  return queue.length + unwritten > MAX_PENDING ? room() : undefined;
}
/** Resolves once the daemon has caught up. */
async function room(): Promise<void> {
  while (queue.length + unwritten > MAX_PENDING) await new Promise<void>((resolve) => waiting.push(resolve));
}

const onError = (err: unknown) => log('error', { err: errorFields(err) }, 'tracking request failed');
// The thread listens from the daemon's bind phase, before the store is open; it answers once the
// daemon says 'serve' (with the token key, made with the keys after the bind phase). Requests
// that come earlier wait for it.
let endpoint: LeanHandler | null = null;
let served!: () => void;
const serving = new Promise<void>((resolve) => (served = resolve));
const handler: LeanHandler = (req) => (endpoint ? endpoint(req) : serving.then(() => endpoint!(req)));
function serve(settings: ThreadServe): void {
  trusted = settings.trustedProxies.map(parseCidr);
  mtaStsPolicies = settings.mtaStsPolicies;
  endpoint = trackingEndpoint({
    tokens: new TrackingTokens(Buffer.from(settings.tokenKey)),
    domainOfHost,
    facts: factsOf,
    link,
    hit,
    trustedProxies: () => trusted,
    mtaStsPolicy: (host) => (Object.hasOwn(mtaStsPolicies, host) ? mtaStsPolicies[host]! : null),
  });
  served();
}

// Requests answered, by kind and status, since the daemon last asked (its metrics sync first).
const answered = new Map<string, RequestCounts[number]>();
function counted(req: LeanRequest): Maybe<LeanAnswer> {
  return andThen(handler(req), (answer) => {
    const kind = req.target.startsWith('/o/') ? 'open' : req.target.startsWith('/c/') ? 'click' : 'other';
    const key = `${kind} ${answer.status}`;
    const entry = answered.get(key);
    if (entry) entry.count += 1;
    else answered.set(key, { kind, status: answer.status, count: 1 });
    return answer;
  });
}
function takeCounts(): RequestCounts {
  const counts = [...answered.values()];
  answered.clear();
  return counts;
}

let listener: LeanHttpServer;
try {
  listener = await LeanHttpServer.start({ host: start.host, port: start.port, ...(tls ? { tls } : {}) }, counted, onError);
} catch (err) {
  const e = err as NodeJS.ErrnoException;
  send({ type: 'failed', message: e.message, ...(e.code ? { code: e.code } : {}) });
  port.close();
  process.exit(1);
}

port.on('message', (message: ToThread) => {
  switch (message.type) {
    case 'serve':
      serve(message);
      break;
    case 'answer': {
      const waiter = asked.get(message.seq);
      asked.delete(message.seq);
      if (message.error !== undefined) waiter?.reject(new Error(message.error));
      else waiter?.resolve(message.value);
      break;
    }
    case 'landed':
      unwritten -= message.count;
      for (const resume of waiting.splice(0)) resume();
      break;
    case 'sync':
      handOver();
      send({ type: 'synced', seq: message.seq, counts: takeCounts() });
      break;
    case 'settings':
      trusted = message.trustedProxies.map(parseCidr);
      mtaStsPolicies = message.mtaStsPolicies;
      break;
    case 'close':
      void listener.close(message.graceMs).then(() => {
        handOver();
        send({ type: 'closed' });
        port.close();
      });
      break;
  }
});
send({ type: 'listening', url: listener.url });

function errorFields(err: unknown): Record<string, unknown> {
  return err instanceof Error ? { type: err.name, message: err.message, stack: err.stack } : { message: String(err) };
}

// The awaited start above makes this file a module; nothing is exported.
export {};
