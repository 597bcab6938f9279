import { mkdtempSync, rmSync } from 'node:fs';
import { Level } from 'level';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SharedLimits } from '../../src/cluster/shared-limits.ts';
import { validateConfig } from '../../src/config/load.ts';
import type { Config, ConfigInput } from '../../src/config/schema.ts';
import { Daemon } from '../../src/daemon.ts';
import { createLogger } from '../../src/logging/logger.ts';
import type { Clock } from '../../src/util/time.ts';
import { OPERATIONS } from '../../src/api/operations.ts';
import { clusterFor, databaseContains, dropClusterFor, onPostgres } from './backend.ts';
import { assertMatchesContract } from './openapi.ts';

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(public ms = Date.parse('2026-11-21T12:00:00Z')) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface TestServer {
  daemon: Daemon;
  config: Config;
  url: string;
  dir: string;
  accountId: string;
  adminKey: string;
  stop(): Promise<void>;
  /** Starts a new daemon on the same data dir (after stop), as after a restart. */
  restart(): Promise<TestServer>;
}

export interface TestServerOptions {
  config?: ConfigInput;
  clock?: Clock;
  dir?: string;
  /** Receives every JSON log line (the level is then at least info). */
  logLines?: string[];
  /** The limits shared with other nodes (cluster); the test starts and closes them. */
  limits?: SharedLimits;
}

/**
 * A real daemon in this process: real LevelDB in a temp dir, API on 127.0.0.1:0. With
 * POSTILION_TEST_BACKEND=postgres (test/helpers/backend.ts) and no cluster settings of the test's
 * own, a node in cluster mode on a database of its own (the same one after a restart).
 */
export async function startServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'postilion-test-'));
  let cluster = options.config?.cluster;
  if (cluster === undefined && onPostgres) {
    try {
      cluster = await clusterFor(dir);
    } catch (err) {
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }
  const input: ConfigInput = {
    log: { level: (process.env.TEST_LOG ?? 'silent') as 'silent' },
    ...options.config,
    ...(cluster ? { cluster } : {}),
    data: { dir: join(dir, 'data') },
    keys: { dir: join(dir, 'keys') },
    api: { host: '127.0.0.1', port: 0, ...options.config?.api },
    shutdown: { grace_seconds: 2, ...options.config?.shutdown },
    // Off unless a test asks: accepted mail must never leave for a real MX from a test.
    delivery: { enabled: false, ...options.config?.delivery },
    // Off unless a test asks (then on port 0): no fixed ports, no certificate to make.
    smtp: {
      ...options.config?.smtp,
      submission: { enabled: false, starttls_port: 0, tls_port: 0, ...options.config?.smtp?.submission },
      inbound: { enabled: false, port: 0, ...options.config?.smtp?.inbound },
    },
    // A free port: tests run daemons side by side, and 9464 may be taken.
    metrics: { port: 0, ...options.config?.metrics },
    // Off unless a test configures it (`tracking: {}` is enough; then on port 0): the listener is
    // a worker thread, which from the sources loads tsx and its modules anew, most of the cost of
    // a daemon's start. Links and the pixel are rewritten in mail all the same.
    tracking: { port: 0, ...(options.config?.tracking ? {} : { enabled: false }), ...options.config?.tracking },
  };
  const config = validateConfig(input, 'test');
  let announced = '';
  const daemon = await Daemon.start({
    config,
    log: options.logLines
      ? createLogger(config.log.level === 'silent' ? 'info' : config.log.level, { write: (line: string) => void options.logLines!.push(line) })
      : createLogger(config.log.level),
    announce: (text) => (announced += text),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
  }).catch(async (err: unknown) => {
    // A daemon that did not start leaves no temp dir (nor database) behind (tests that expect it to fail).
    if (!options.dir) {
      rmSync(dir, { recursive: true, force: true });
      await dropClusterFor(dir);
    }
    throw err;
  });
  return served(daemon, config, dir, !options.dir, options, {
    accountId: /account id: ([0-9a-f-]{36})/.exec(announced)?.[1] ?? '',
    adminKey: /aha-sk-[A-Za-z0-9]{64}/.exec(announced)?.[0] ?? '',
  });
}

/**
 * A started daemon as a TestServer. `ownsDir`: the temp dir was made for it and goes when it
 * stops, after any number of restarts (a restart announces no account: the first one's carry over).
 */
function served(
  daemon: Daemon,
  config: Config,
  dir: string,
  ownsDir: boolean,
  options: TestServerOptions,
  bootstrap: { accountId: string; adminKey: string },
): TestServer {
  return {
    daemon,
    config,
    url: daemon.parts.api.url,
    dir,
    ...bootstrap,
    stop: async () => {
      await daemon.stop();
      if (!ownsDir) return;
      rmSync(dir, { recursive: true, force: true });
      await dropClusterFor(dir);
    },
    restart: async () => {
      await daemon.stop();
      const next = await startServer({ ...options, dir });
      return served(next.daemon, next.config, dir, ownsDir, options, bootstrap);
    },
  };
}

export interface CallOptions {
  key?: string | null;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
  /**
   * The operation whose contract the JSON response is checked against. By default it is found
   * from the method and path; `null` skips the check (for requests no operation matches).
   */
  operationId?: string | null;
}

export interface CallResult {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON of many shapes, asserted by tests
}

/** One HTTP call; the JSON body is parsed and, with an operationId, validated against the contract. */
export async function call(server: { url: string; adminKey: string }, method: string, path: string, options: CallOptions = {}): Promise<CallResult> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? server.adminKey : options.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(server.url + path, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  const operationId = options.operationId === undefined ? operationFor(method, path) : options.operationId;
  if (operationId && parsed !== undefined) assertMatchesContract(operationId, res.status, parsed);
  return { status: res.status, headers: res.headers, body: parsed };
}

/**
 * Whether any raw key or value in the (closed) store of `server` contains `text`: its LevelDB, and
 * in cluster mode every row of its database.
 */
export async function storeContains(server: { dir: string; config?: Config }, text: string): Promise<boolean> {
  const db = new Level(join(server.dir, 'data'));
  try {
    for await (const [k, v] of db.iterator()) if (`${k}${v}`.includes(text)) return true;
  } finally {
    await db.close();
  }
  const url = server.config?.cluster.database_url;
  return url ? databaseContains(url, text) : false;
}

const operationPatterns = Object.entries(OPERATIONS).map(([id, op]) => ({
  id,
  method: op.method,
  pattern: new RegExp(`^/v2${op.path.replace(/:[a-z_]+/g, '[^/]+')}/?$`, 'i'),
}));

/** The operation a request addresses, as the router would pick it (static segments first). */
function operationFor(method: string, path: string): string | null {
  const bare = path.split('?')[0]!;
  const matches = operationPatterns.filter((o) => o.method === method.toUpperCase() && o.pattern.test(bare));
  // `/sub-accounts/usage` and the like: prefer the pattern with the fewest parameters.
  matches.sort((a, b) => (a.pattern.source.match(/\[\^\/\]\+/g)?.length ?? 0) - (b.pattern.source.match(/\[\^\/\]\+/g)?.length ?? 0));
  return matches[0]?.id ?? null;
}
