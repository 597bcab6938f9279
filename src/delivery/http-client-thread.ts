import type { Worker } from 'node:worker_threads';
import { moduleBeside, startModuleWorker } from '../util/module-worker.ts';
import { urlOrigin } from '../util/url-origin.ts';
import type { HttpOutcome, SignedPost } from './http.ts';

/** What the thread starts with (its workerData): what it needs to build its HttpClient. */
export interface HttpThreadStart {
  dns: { servers: string[]; timeoutMs: number; tries: number };
  /** `webhooks.allow_networks`, as written in the configuration. */
  allowNetworks: string[];
  maxSocketsPerOrigin: number;
  originSockets?: Record<string, number>;
}

/** Daemon → thread. */
export type ToHttpThread = { type: 'posts'; posts: Array<{ seq: number; post: SignedPost }> } | { type: 'withdraw'; origin: string } | { type: 'close' };

/** Thread → daemon. */
export type FromHttpThread = { type: 'outcomes'; outcomes: Array<{ seq: number; outcome: HttpOutcome }> } | { type: 'closed' };

/** How long a closing thread may take to hand back the outcomes of its cut requests. */
const CLOSE_MS = 2_000;

/** The thread's composition root, beside this file. */
const WORKER = moduleBeside(import.meta.url, 'http-worker');

/**
 * The HTTP dispatcher's client (delivery/http.ts) run in a worker thread of its own
 * (http-worker.ts): the requests of webhook deliveries are signed, sent and read there (route
 * POSTs, few and large, are not: daemon.ts), and the daemon's event loop, which the store, the
 * engine and the fan-out share, only hands it posts and takes outcomes back, a batch of each per
 * turn of its loop.
 *
 * The thread starts with the first post (a daemon that never posts never runs it) and starts
 * again with the next post if it ends. A post in flight when it ends, or when the client
 * closes, comes back as a failed attempt: the job is retried, never lost.
 */
export class HttpClientThread {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, (outcome: HttpOutcome) => void>();
  private seq = 0;
  private queue: Array<{ seq: number; post: SignedPost }> = [];
  private scheduled = false;
  private closing: Promise<void> | null = null;

  constructor(
    private readonly spec: HttpThreadStart,
    private readonly onError: (err: unknown, message: string) => void,
  ) {}

  /** Signs and POSTs in the thread; never throws, every failure is an outcome. */
  postSigned(post: SignedPost): Promise<HttpOutcome> {
    if (this.closing) return Promise.resolve(failed('the HTTP client is closed'));
    this.seq += 1;
    const seq = this.seq;
    return new Promise((resolve) => {
      this.pending.set(seq, resolve);
      this.queue.push({ seq, post });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /**
   * Withdraws the posts to `origin` not sent yet (not handed over, waiting for a connection, or
   * still connecting): they come back `withdrawn` (not attempted); those under way go on.
   */
  withdraw(origin: string): void {
    const kept: typeof this.queue = [];
    for (const item of this.queue) {
      if (urlOrigin(item.post.url) !== origin) kept.push(item);
      else {
        this.pending.get(item.seq)?.(withdrawn());
        this.pending.delete(item.seq);
      }
    }
    this.queue = kept;
    this.worker?.postMessage({ type: 'withdraw', origin } satisfies ToHttpThread);
  }

  /**
   * Cuts the requests under way (their outcomes come back failed), withdraws those waiting for a
   * connection, and ends the thread.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const worker = this.worker;
      // Posts not handed over yet were not attempted; a thread never started is not started now.
      for (const { seq } of this.queue) {
        this.pending.get(seq)?.(withdrawn());
        this.pending.delete(seq);
      }
      this.queue = [];
      if (worker) {
        const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
        worker.postMessage({ type: 'close' } satisfies ToHttpThread);
        const late = setTimeout(() => void worker.terminate(), CLOSE_MS);
        await exited;
        clearTimeout(late);
      }
      this.settleAll('the HTTP client closed');
    })();
    return this.closing;
  }

  private flush(): void {
    this.scheduled = false;
    if (this.queue.length === 0) return;
    const posts = this.queue;
    this.queue = [];
    this.thread().postMessage({ type: 'posts', posts } satisfies ToHttpThread);
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = startModuleWorker(WORKER, this.spec);
    worker.on('message', (message: FromHttpThread) => {
      if (message.type !== 'outcomes') return;
      for (const { seq, outcome } of message.outcomes) {
        this.pending.get(seq)?.(outcome);
        this.pending.delete(seq);
      }
    });
    worker.on('error', (err) => this.onError(err, 'the HTTP client thread failed'));
    worker.once('exit', (code) => {
      if (this.worker === worker) this.worker = null;
      // What it had not answered is a failed attempt, retried on the job's schedule.
      this.settleAll(`the HTTP client thread ended (exit code ${code})`);
      if (!this.closing) this.onError(new Error(`exit code ${code}`), 'the HTTP client thread ended; it starts again with the next post');
    });
    this.worker = worker;
    return worker;
  }

  private settleAll(why: string): void {
    for (const resolve of this.pending.values()) resolve(failed(why));
    this.pending.clear();
  }
}

function withdrawn(): HttpOutcome {
  return { ...failed('withdrawn before it was sent'), withdrawn: true };
}

function failed(error: string): HttpOutcome {
  return { ok: false, status: null, error, responseText: '', durationMs: 0, unreachable: false };
}
