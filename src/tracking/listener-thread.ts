import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import { moduleBeside, startModuleWorker } from '../util/module-worker.ts';
import { domainOfTrackingHost } from './endpoint.ts';
import type { TrackingHits } from './hits.ts';
import type { FromThread, Lookup, MessageFacts, ThreadServe, ThreadStart, ToThread, TrackingObserver } from './thread-protocol.ts';

/** How long a closing thread may take beyond the grace period before it is stopped. */
const CLOSE_SLACK_MS = 2_000;

/** The thread's composition root, beside this file. */
const WORKER = moduleBeside(import.meta.url, 'listener-worker');

export interface ListenerThreadDeps {
  domains: DomainsRepo;
  /** In cluster mode, another node's message is its published copy (cluster/tracked-messages.ts). */
  messages: Pick<MessagesRepo, 'get' | 'links'>;
  hits: TrackingHits;
  log: Logger;
  /** Told what the thread answered (at each sync) and handed over (metrics). */
  observer?: TrackingObserver;
}

/**
 * The tracking listener, run in a worker thread of its own (listener-worker.ts): a
 * burst of opens and clicks parses, verifies and answers there, and never holds up the API,
 * SMTP or delivery on the daemon's event loop, which only answers the thread's lookups (from the
 * store's cache, mostly) and records the hits in batches (TrackingHits).
 *
 * Why a thread: answering a click is mostly HTTP, and its recording mostly the store; on one
 * event loop they queue behind each other, on two they run side by side. The store stays the
 * daemon's alone, so nothing about its single writer changes.
 */
export class TrackingListenerThread {
  private readonly syncs = new Map<number, () => void>();
  private syncSeq = 0;
  private closing: Promise<void> | null = null;
  private exited = false;
  private readonly exit: Promise<void>;
  private onClosed: (() => void) | null = null;

  /** Set by `serve`: until then the thread only listens, and asks nothing. */
  private deps: ListenerThreadDeps | null = null;

  private constructor(
    private readonly worker: Worker,
    readonly url: string,
  ) {
    this.exit = new Promise((resolve) => worker.once('exit', () => resolve()));
    this.listen();
  }

  /**
   * Starts the thread, which binds its address at once (the daemon's bind phase: before the
   * store is opened); rejects with the listen error (its `code`: EADDRINUSE, …) once the thread
   * has ended.
   */
  static async bind(spec: ThreadStart): Promise<TrackingListenerThread> {
    const worker = startModuleWorker(WORKER, spec);
    let unlisten = () => {};
    const url = await new Promise<string>((resolve, reject) => {
      const onMessage = (message: FromThread) => {
        if (message.type === 'listening') resolve(message.url);
        else if (message.type === 'failed') reject(Object.assign(new Error(message.message), message.code ? { code: message.code } : {}));
      };
      const onExit = (code: number) => reject(new Error(`the tracking listener thread ended (exit code ${code}) before it listened`));
      worker.on('message', onMessage);
      worker.once('error', reject);
      worker.once('exit', onExit);
      unlisten = () => {
        worker.off('message', onMessage);
        worker.off('error', reject);
        worker.off('exit', onExit);
      };
    }).catch(async (err: unknown) => {
      unlisten();
      await worker.terminate();
      throw err;
    });
    unlisten();
    return new TrackingListenerThread(worker, url);
  }

  /** The thread answers from now on: with this token key, asking `deps` what it cannot know. */
  serve(settings: ThreadServe, deps: ListenerThreadDeps): void {
    this.deps = deps;
    this.post({ type: 'serve', ...settings });
  }

  private listen(): void {
    const { worker } = this;
    worker.on('message', (message: FromThread) => {
      // Lookups, hits and logs come from requests, which the thread answers only once served.
      const deps = this.deps;
      switch (message.type) {
        case 'lookup':
          if (deps) this.answer(message.seq, message.lookup, deps);
          break;
        case 'hits':
          if (deps) {
            if (deps.observer) countHits(deps.observer, message.hits);
            deps.hits.take(message.hits);
          }
          break;
        case 'synced':
          for (const c of message.counts) deps?.observer?.requests(c.kind, c.status, c.count);
          this.syncs.get(message.seq)?.();
          this.syncs.delete(message.seq);
          break;
        case 'log':
          if (deps) relayLog(deps.log, message);
          break;
        case 'closed':
          this.onClosed?.();
          break;
        default:
          break;
      }
    });
    worker.on('error', (err) => this.deps?.log.error({ err }, 'the tracking listener thread failed'));
    worker.once('exit', (code) => {
      this.exited = true;
      for (const done of this.syncs.values()) done();
      this.syncs.clear();
      this.onClosed?.();
      if (this.closing === null)
        this.deps?.log.error({ code }, 'the tracking listener thread ended: opens and clicks are not answered until the daemon restarts');
    });
  }

  /** Whether the thread is up (readiness). */
  get running(): boolean {
    return !this.exited && this.closing === null;
  }

  /** Told by TrackingHits how many hits a batch held, once it is done. */
  written(count: number): void {
    this.post({ type: 'landed', count });
  }

  /** api.trusted_proxies or the MTA-STS policies changed (configuration reload). */
  configure(trustedProxies: string[], mtaStsPolicies: Record<string, string>): void {
    this.post({ type: 'settings', trustedProxies, mtaStsPolicies });
  }

  /**
   * Resolves once every hit the thread has answered so far is in TrackingHits' hands, and its
   * request counts in the observer's (metrics sync before each scrape).
   */
  sync(): Promise<void> {
    if (this.exited) return Promise.resolve();
    this.syncSeq += 1;
    const seq = this.syncSeq;
    return new Promise((resolve) => {
      this.syncs.set(seq, resolve);
      this.post({ type: 'sync', seq });
    });
  }

  /** Stops accepting, lets in-flight requests finish until `graceMs`, hands over their hits, ends the thread. */
  close(graceMs: number): Promise<void> {
    this.closing ??= (async () => {
      if (!this.exited) {
        const closed = new Promise<void>((resolve) => (this.onClosed = resolve));
        this.post({ type: 'close', graceMs });
        const late = setTimeout(() => void this.worker.terminate(), graceMs + CLOSE_SLACK_MS);
        await closed;
        await this.exit;
        clearTimeout(late);
      }
    })();
    return this.closing;
  }

  private post(message: ToThread): void {
    if (!this.exited) this.worker.postMessage(message);
  }

  private answer(seq: number, lookup: Lookup, deps: ListenerThreadDeps): void {
    this.lookup(lookup, deps).then(
      (value) => this.post({ type: 'answer', seq, value }),
      (err: unknown) => {
        deps.log.error({ err }, 'a tracking lookup failed');
        this.post({ type: 'answer', seq, value: null, error: (err as Error).message ?? String(err) });
      },
    );
  }

  private async lookup(lookup: Lookup, deps: ListenerThreadDeps): Promise<unknown> {
    const { domains, messages } = deps;
    switch (lookup.kind) {
      case 'host':
        return domainOfTrackingHost(lookup.host, (name) => domains.getByName(name));
      case 'message': {
        const m = await messages.get(lookup.id);
        if (!m || m.direction !== 'outbound') return null;
        const facts: MessageFacts = { domainId: m.domainId, open: m.tracking.open, click: m.tracking.click };
        return facts;
      }
      case 'links':
        return (await messages.links(lookup.id)) ?? null;
    }
  }
}

function countHits(observer: TrackingObserver, hits: ReadonlyArray<{ kind: 'open' | 'click' }>): void {
  let opens = 0;
  for (const hit of hits) if (hit.kind === 'open') opens += 1;
  if (opens > 0) observer.hits('open', opens);
  if (hits.length > opens) observer.hits('click', hits.length - opens);
}

function relayLog(log: Logger, message: Extract<FromThread, { type: 'log' }>): void {
  if (message.level === 'error') log.error(message.fields, message.message);
  else log.info(message.fields, message.message);
}
