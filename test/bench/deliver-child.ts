/**
 * The Postilion side of test/bench/deliver.ts and smtp-relay.ts: test/bench/deliver-server.ts in
 * a child process, its READY / stats protocol (serve.ts), its HTTP API with the admin key, and
 * the checks every run ends with (DKIM of a delivered message, nothing left undelivered); and
 * what a benchmark's main needs around it (knobs from the environment, stopping what it started).
 */
import { availableParallelism } from 'node:os';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { until } from './deliver-sink.ts';
import { ServerProcess } from './server-process.ts';

export interface ServerInfo {
  url: string;
  key: string;
  path: string;
  domainPath: string;
  from: string;
  pid: number;
  /** With BENCH_SUBMISSION=1: the SMTP submission port (STARTTLS, AUTH in clear from loopback) and a global credential. */
  submission?: { port: number; username: string; password: string };
}

export interface ServerStats {
  batches: number;
  writes: number;
  running: number;
  ready: number;
}

export class PostilionChild extends ServerProcess<ServerInfo, ServerStats> {
  constructor(env: Record<string, string>, nodeArgs: string[]) {
    // The thread pool sized as the postilion launcher sizes it (src/cli/postilion.js).
    super('postilion', 'deliver-server.ts', {
      nodeArgs,
      env: { UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? String(Math.max(4, 2 * availableParallelism())), ...env },
      killAfterMs: 30_000,
    });
  }

  /** One API call with the admin key; `body` is the parsed JSON (`any`: the callers read several response shapes loosely). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes, read loosely
  async api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(this.info.url + path, {
      method,
      headers: { authorization: `Bearer ${this.info.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** Verifies the DKIM signature of a delivered message against the sending domain's DNS records: exactly one, passing. */
  async verifyDkim(raw: string | Buffer): Promise<string> {
    const domain = await this.api('GET', this.info.domainPath);
    const records = domain.body.dns_records as Array<{ type: string; host: string; content: string }>;
    const resolver = async (name: string, type: string): Promise<string[][]> => {
      const found = records.filter((r) => r.type === type && r.host === name).map((r) => [r.content]);
      if (found.length === 0) throw Object.assign(new Error(`no ${type} for ${name}`), { code: 'ENOTFOUND' });
      return found;
    };
    const { results } = await dkimVerify(raw, { resolver });
    const summary = results.map((r) => `${(r as { algo?: string }).algo ?? r.algorithm} s=${r.selector} ${r.status.result}`).join(', ');
    const bits = results.map((r) => (r as { publicKeyBits?: number }).publicKeyBits ?? (r as { modulusLength?: number }).modulusLength);
    if (results.length !== 1 || results[0]!.status.result !== 'pass') throw new Error(`DKIM did not verify: ${summary}`);
    return `${summary}${bits[0] ? ` (${bits[0]}-bit key)` : ''}`;
  }

  /**
   * After a run: waits until nothing is running or waiting in memory and no message of the
   * account is in another status than Delivered (once the last outcomes are on disk).
   */
  async drained(): Promise<void> {
    await until(
      'an empty delivery queue',
      async () => {
        const s = await this.stats();
        return s.running === 0 && s.ready === 0;
      },
      30_000,
      50,
    );
    const undelivered = `${this.info.path}?status=Received,Deferred,Failed,Bounced,Suppressed&limit=3`;
    let left: Array<{ status: string }> = [];
    await until(
      'every message to be recorded as Delivered',
      async () => {
        left = (await this.api('GET', undelivered)).body.data;
        return left.length === 0;
      },
      30_000,
      50,
    ).catch(() => {
      throw new Error(`messages not Delivered after the run: ${JSON.stringify(left).slice(0, 500)}`);
    });
  }
}

/** A numeric knob from the environment: `fallback` when unset, an error when not a number ≥ `min`. */
export function envNumber(name: string, fallback: number, min = 1): number {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number ≥ ${min}, not ${raw}`);
  return value;
}

/** Registers how to stop something a benchmark started. */
export type Defer = (stop: () => unknown) => void;

/**
 * Runs a benchmark's main: what it started (registered with `defer`) is stopped, the last started
 * first, when it ends, fails, or gets SIGINT or SIGTERM (then the process exits with 130).
 */
export async function withCleanup(main: (defer: Defer) => Promise<void>): Promise<void> {
  const stops: Array<() => unknown> = [];
  const stopAll = async (): Promise<void> => {
    for (const stop of stops.splice(0)) {
      try {
        await stop();
      } catch {
        // One that fails to stop must not keep the others running.
      }
    }
  };
  let interrupted = false;
  const onSignal = (): void => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write('\ninterrupted: stopping…\n');
    void stopAll().then(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await main((stop) => stops.unshift(stop));
  } finally {
    await stopAll();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
