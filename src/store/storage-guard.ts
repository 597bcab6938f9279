import { accessSync, constants, existsSync, statfsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';

/** storage.* of the configuration, in the units the guard uses. */
export interface StorageSettings {
  /** Free bytes the data directory's filesystem must keep, at least. */
  minFreeBytes: number;
  /** …and at least this share of its size (0-100). */
  minFreePercent: number;
  /** How often free space is read (ms). */
  checkIntervalMs: number;
}

export interface SpaceReading {
  /** Bytes an unprivileged writer may still use (f_bavail). */
  free: number;
  total: number;
}

/** What stops the store from taking writes, as a kind and one line for people. */
export interface StorageProblem {
  kind: 'low-space' | 'full' | 'read-only' | 'permission' | 'io';
  text: string;
}

/**
 * A refusal because the store cannot take writes now (the guard is closed, or a write failed):
 * HTTP 507 for the API, `452 4.3.1` for SMTP. Nothing was written.
 */
export class InsufficientStorageError extends Error {
  override name = 'InsufficientStorageError';
  constructor(readonly problem: string) {
    super(`insufficient storage: the server cannot store anything new right now (${problem}); try again later`);
  }
}

/** The free bytes the filesystem must keep: the larger of the two settings. */
export function requiredFreeBytes(total: number, settings: Pick<StorageSettings, 'minFreeBytes' | 'minFreePercent'>): number {
  return Math.max(settings.minFreeBytes, Math.ceil((total * settings.minFreePercent) / 100));
}

/** Whether a reading is below the guard's floor. */
export function isLow(reading: SpaceReading, settings: Pick<StorageSettings, 'minFreeBytes' | 'minFreePercent'>): boolean {
  return reading.free < requiredFreeBytes(reading.total, settings);
}

/** Bytes as an operator reads them (MiB with one decimal under 10 GiB). */
export function formatBytes(bytes: number): string {
  if (bytes >= 10 * 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${Math.round(bytes / 1024)} KiB`;
}

/** The line that says why a reading is too low. */
export function lowSpaceText(dir: string, reading: SpaceReading, settings: Pick<StorageSettings, 'minFreeBytes' | 'minFreePercent'>): string {
  const need = requiredFreeBytes(reading.total, settings);
  const setting =
    need > settings.minFreeBytes
      ? `storage.min_free_percent ${settings.minFreePercent}% = ${formatBytes(need)}`
      : `storage.min_free_bytes ${formatBytes(settings.minFreeBytes)}`;
  return `${formatBytes(reading.free)} free on the filesystem of ${dir}, below ${setting}`;
}

/** What a failed write says about the storage (LevelDB's errors carry the OS error in their text). */
export function describeWriteError(err: unknown, dir: string): StorageProblem {
  const texts: string[] = [];
  const codes: string[] = [];
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = (e as Error & { cause?: unknown }).cause, depth++) {
    texts.push(e.message);
    const code = (e as NodeJS.ErrnoException).code;
    if (code) codes.push(code);
  }
  const text = texts.join(': ');
  const has = (code: string, pattern: RegExp) => codes.includes(code) || pattern.test(text);
  if (has('ENOSPC', /no space left|ENOSPC/i)) return { kind: 'full', text: `no space left on the filesystem of ${dir}` };
  if (has('EROFS', /read-only file ?system|EROFS/i)) return { kind: 'read-only', text: `the filesystem of ${dir} is read-only` };
  if (has('EACCES', /permission denied|EACCES|EPERM/i)) return { kind: 'permission', text: `permission denied writing in ${dir}` };
  return { kind: 'io', text: `a write to ${dir} failed: ${texts[0] ?? String(err)}`.slice(0, 300) };
}

/** Free space of the filesystem holding `dir` (or its nearest existing parent). */
export async function readSpace(dir: string): Promise<SpaceReading> {
  const s = await statfs(existing(dir));
  return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
}

export function readSpaceSync(dir: string): SpaceReading {
  const s = statfsSync(existing(dir));
  return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
}

function existing(dir: string): string {
  let at = resolve(dir);
  while (!existsSync(at) && dirname(at) !== at) at = dirname(at);
  return at;
}

/** Back-off of the guard's recovery attempts after a failed probe: 1 s doubling to 30 s. */
export function recoveryDelayMs(failures: number): number {
  return Math.min(1000 * 2 ** Math.max(0, failures - 1), 30_000);
}

export interface StorageGuardDeps {
  log: Logger;
  /**
   * Makes the store take writes again after a problem (reopens it when a write failed) and
   * proves it with a synced probe write; rejects when it cannot.
   */
  recover: () => Promise<void>;
  /** Told when writes are refused (false) and when they are taken again (true). */
  onChange?: (ok: boolean) => void;
  /** Reads free space (tests). */
  readSpace?: (dir: string) => Promise<SpaceReading>;
  now?: () => number;
}

/**
 * Watches the data directory's filesystem: free space is read on a timer (never per write), and
 * the store tells it of every failed write. While space is below the floor or after a failed
 * write, `ok` is false: ingress refuses new mail, the engine starts no attempts. Once space is
 * back and a probe write succeeds (the store reopened if a write failed), `ok` is true again.
 * `ok` is the one thing the hot path reads.
 */
export class StorageGuard {
  ok = true;
  /** Why writes are refused (null while ok). */
  problem: StorageProblem | null = null;
  /** The last reading (null before the first). */
  reading: SpaceReading | null = null;
  /** A write failed and no probe write has succeeded since. */
  private failure: StorageProblem | null = null;
  private timer: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  private probeFailures = 0;
  private nextProbeAt = 0;

  constructor(
    readonly dir: string,
    private readonly settings: StorageSettings,
    private readonly deps: StorageGuardDeps,
  ) {}

  /** Reads free space now (a start below the floor begins closed), then every checkIntervalMs. */
  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => void this.check(), this.settings.checkIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Why new work is refused, as one line (null while ok). */
  get reason(): string | null {
    return this.problem?.text ?? null;
  }

  /** Throws InsufficientStorageError while writes are refused. */
  assertWritable(): void {
    if (!this.ok) throw new InsufficientStorageError(this.problem?.text ?? 'storage unavailable');
  }

  /** The store failed a write: closed until space is back and a probe write succeeds. */
  writeFailed(err: unknown): void {
    if (this.failure) return;
    this.failure = describeWriteError(err, this.dir);
    this.probeFailures = 0;
    this.nextProbeAt = 0;
    this.close(this.failure);
  }

  /** One reading, and what follows from it (coalesced: one at a time). */
  check(): Promise<void> {
    this.checking ??= this.checkNow().finally(() => {
      this.checking = null;
    });
    return this.checking;
  }

  private async checkNow(): Promise<void> {
    try {
      this.reading = await (this.deps.readSpace ?? readSpace)(this.dir);
    } catch (err) {
      this.deps.log.warn({ err, data_dir: this.dir }, 'could not read the free space of the data directory');
      return;
    }
    if (isLow(this.reading, this.settings)) {
      // A write error says more than low space (e.g. read-only): keep it.
      if (!this.failure) this.close({ kind: 'low-space', text: lowSpaceText(this.dir, this.reading, this.settings) });
      return;
    }
    if (this.ok) return;
    const now = (this.deps.now ?? Date.now)();
    if (now < this.nextProbeAt) return;
    try {
      await this.deps.recover();
    } catch (err) {
      this.probeFailures += 1;
      this.nextProbeAt = now + recoveryDelayMs(this.probeFailures);
      const problem = describeWriteError(err, this.dir);
      if (this.probeFailures === 1 || problem.kind !== this.problem?.kind) {
        this.deps.log.warn({ data_dir: this.dir, reason: problem.text, retry_in_ms: this.nextProbeAt - now }, 'storage still refuses writes');
      }
      this.failure = problem;
      this.problem = problem;
      return;
    }
    this.failure = null;
    this.problem = null;
    this.probeFailures = 0;
    this.ok = true;
    this.deps.log.warn({ data_dir: this.dir, free_bytes: this.reading.free }, 'storage takes writes again: new mail is accepted and delivery resumes');
    this.deps.onChange?.(true);
  }

  private close(problem: StorageProblem): void {
    this.problem = problem;
    if (!this.ok) return;
    this.ok = false;
    this.deps.log.warn(
      { data_dir: this.dir, reason: problem.text, free_bytes: this.reading?.free ?? null },
      'storage refuses writes: new mail is refused (API 507, SMTP 452 4.3.1) and no new attempts start until it recovers',
    );
    this.deps.onChange?.(false);
  }
}

/** The daemon cannot start on this data directory's storage: one line, exit status 2. */
export class StorageStartError extends Error {
  override name = 'StorageStartError';
}

/**
 * Before the store is opened: a data directory whose filesystem is below the guard's floor, or
 * that cannot be written, stops the start with one line naming the directory, the free space
 * and the setting (LevelDB's own message would be "Database failed to open").
 */
export function assertRoomToStart(dir: string, settings: Pick<StorageSettings, 'minFreeBytes' | 'minFreePercent'>): void {
  const at = resolve(dir);
  const reading = readSpaceSync(at);
  if (isLow(reading, settings)) {
    throw new StorageStartError(`cannot start: ${lowSpaceText(at, reading, settings)}; free some space there or lower the setting`);
  }
  if (!existsSync(at)) return;
  try {
    accessSync(at, constants.W_OK);
  } catch (err) {
    throw new StorageStartError(`cannot start: ${describeWriteError(err, at).text} (data.dir)`);
  }
}
