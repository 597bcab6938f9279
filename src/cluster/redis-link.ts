import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Script } from './scripts.ts';

export interface RedisLinkOptions {
  /** `redis://` or `rediss://` (a password in it is never logged). */
  url: string;
  log: Logger;
  /** Prefix of every key (default `postilion`): `<prefix>:<purpose>:<id>`. */
  prefix?: string;
  /** A command not answered within this long counts as a failure (default 250 ms). */
  commandTimeoutMs?: number;
  /** After a failure, Redis is not asked again for this long (default 1000 ms): the node decides alone meanwhile. */
  backoffMs?: number;
}

/** What the link has done since it was made: numbers for the metrics. */
export interface LinkStats {
  /** Whether decisions go to Redis now (connected, not backing off after a failure). */
  up: boolean;
  /** Commands and scripts sent. */
  commands: number;
  /** Of those, the ones that failed (refused, timed out, connection lost). */
  errors: number;
  /** Decisions taken by this node's share because Redis could not be asked. */
  fallbacks: number;
}

/**
 * The one connection of a node to the Redis (or Valkey) that holds the cluster-wide limits.
 * Nothing waits for it to come up: commands are refused at once while it is not connected (no
 * offline queue), a command that fails or times out makes the callers decide alone for a
 * moment, and the client reconnects by itself. Callers ask `usable` first and count a decision
 * they take alone with `fellBack()`.
 */
export class RedisLink {
  readonly prefix: string;
  private readonly redis: Redis;
  private readonly log: Logger;
  private readonly backoffMs: number;
  private downUntil = 0;
  /** Whether the last thing known is that Redis cannot be asked (logged once per change). */
  private down = false;
  private readonly counts = { commands: 0, errors: 0, fallbacks: 0 };

  constructor(options: RedisLinkOptions) {
    this.prefix = options.prefix ?? 'postilion';
    this.log = options.log;
    this.backoffMs = options.backoffMs ?? 1000;
    this.redis = new Redis(options.url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      // A command cut by a lost connection fails; it is not sent again later (its answer is no use by then).
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs ?? 250,
      connectTimeout: 2000,
      retryStrategy: (times) => Math.min(times * 100, 1000),
    });
    // The client reports every failed reconnection; the change of state is logged once (markDown).
    this.redis.on('error', (err: Error) => this.log.debug({ err: err.message }, 'Redis connection error'));
    this.redis.on('ready', () => this.markUp());
  }

  /** Connects; a Redis that cannot be reached is logged, not thrown (the limits fall back to this node's share). */
  async start(): Promise<void> {
    try {
      await this.redis.connect();
    } catch (err) {
      this.markDown(err);
    }
  }

  /** Stops reconnecting and closes the connection. */
  async close(): Promise<void> {
    this.redis.disconnect();
  }

  /** Whether a decision should go to Redis now. */
  get usable(): boolean {
    return this.redis.status === 'ready' && (this.downUntil === 0 || Date.now() >= this.downUntil);
  }

  key(purpose: string, id: string): string {
    return `${this.prefix}:${purpose}:${id}`;
  }

  /** Runs a script (EVALSHA, then EVAL when the server does not know it); a failure starts the back-off and is rethrown. */
  async run(script: Script, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
    return this.call(async (redis) => {
      try {
        return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        return await redis.eval(script.source, keys.length, ...keys, ...args);
      }
    });
  }

  /** Runs plain commands; a failure starts the back-off and is rethrown. */
  async call<T>(commands: (redis: Redis) => Promise<T>): Promise<T> {
    this.counts.commands += 1;
    try {
      const result = await commands(this.redis);
      this.downUntil = 0;
      if (this.down) this.markUp();
      return result;
    } catch (err) {
      this.counts.errors += 1;
      this.downUntil = Date.now() + this.backoffMs;
      this.markDown(err);
      throw err;
    }
  }

  /** Counts a decision this node took alone. */
  fellBack(): void {
    this.counts.fallbacks += 1;
    if (!this.down) this.markDown(null);
  }

  stats(): LinkStats {
    return { up: this.usable, ...this.counts };
  }

  private markDown(err: unknown): void {
    if (this.down) return;
    this.down = true;
    const reason = err instanceof Error ? err.message : `connection ${this.redis.status}`;
    this.log.warn({ reason }, "Redis cannot be asked: cluster-wide limits fall back to this node's share until it answers again");
  }

  private markUp(): void {
    if (!this.down) return;
    this.down = false;
    this.log.info('Redis answers again: limits are cluster-wide again');
  }
}
