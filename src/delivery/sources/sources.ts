import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { Warmup } from './warmup.ts';

/** A local address mail leaves from (delivery.sources), with the EHLO name its sessions give. */
export interface Source {
  name: string;
  address: string;
  ehlo: string;
  /** 4 or 6: a source reaches only hosts of its own address family. */
  family: 4 | 6;
  warmup: Warmup | null;
}

export interface PoolMember {
  source: Source;
  weight: number;
}

/** A set of sources with weights (delivery.pools); the implicit default pool holds every source, weight 1. */
export interface Pool {
  name: string;
  members: readonly PoolMember[];
}

/** delivery.sources, delivery.pools and delivery.default_pool, as the configuration gives them. */
export interface SourcesSettings {
  sources: Readonly<Record<string, { address: string; ehlo: string; warmup?: { start: string; daily_caps: number[] } | undefined }>>;
  pools: Readonly<Record<string, Readonly<Record<string, number>>>>;
  default_pool: string | null;
}

/** Name of the pool of every source, when delivery.default_pool names none. */
export const EVERY_SOURCE = '*';

/**
 * The configured sources and pools. Absent (null from `fromConfig`) when no source is configured:
 * mail then leaves as it always has, from the address the kernel picks.
 */
export class SourceSet {
  private constructor(
    private readonly sources: ReadonlyMap<string, Source>,
    private readonly pools: ReadonlyMap<string, Pool>,
    private readonly defaultPool: string,
  ) {}

  static fromConfig(d: SourcesSettings): SourceSet | null {
    const entries = Object.entries(d.sources);
    if (entries.length === 0) return null;
    const sources = new Map<string, Source>(
      entries.map(([name, s]) => [
        name,
        {
          name,
          address: s.address,
          ehlo: s.ehlo,
          family: isIP(s.address) === 6 ? 6 : 4,
          warmup: s.warmup ? { startMs: Date.parse(`${s.warmup.start}T00:00:00Z`), dailyCaps: s.warmup.daily_caps } : null,
        },
      ]),
    );
    const pools = new Map<string, Pool>(
      Object.entries(d.pools).map(([name, members]) => [
        name,
        { name, members: Object.entries(members).map(([source, weight]) => ({ source: sources.get(source)!, weight })) },
      ]),
    );
    pools.set(EVERY_SOURCE, { name: EVERY_SOURCE, members: [...sources.values()].map((source) => ({ source, weight: 1 })) });
    return new SourceSet(sources, pools, d.default_pool ?? EVERY_SOURCE);
  }

  get(name: string): Source | undefined {
    return this.sources.get(name);
  }

  all(): Source[] {
    return [...this.sources.values()];
  }

  hasPool(name: string): boolean {
    return name !== EVERY_SOURCE && this.pools.has(name);
  }

  /** The named pool, or the default one. */
  pool(name: string | null): Pool {
    return this.pools.get(name ?? this.defaultPool) ?? this.pools.get(this.defaultPool)!;
  }
}

/**
 * One member of `members` by weight, for a draw `r` in [0, 1): a member of weight 2 is drawn
 * twice as often as one of weight 1. Null when there is none. Pure.
 */
export function pickByWeight<M extends { weight: number }>(members: readonly M[], r: number): M | null {
  const total = members.reduce((sum, m) => sum + m.weight, 0);
  if (total <= 0) return null;
  let at = r * total;
  for (const m of members) {
    if (at < m.weight) return m;
    at -= m.weight;
  }
  return members.at(-1)!;
}

/**
 * The draw of one attempt of one message, in [0, 1): the same every time the job is read (its
 * lane does not move while it waits), another at its next attempt. Spread evenly across ids.
 */
export function drawOf(messageId: string, attempt: number): number {
  return createHash('sha256').update(`${messageId}:${attempt}`).digest().readUInt32BE(0) / 2 ** 32;
}
