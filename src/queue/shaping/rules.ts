import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import type { DestinationLimits } from '../job-kind.ts';
import { splitLane } from '../lane.ts';

/**
 * Traffic shaping rules (config/shaping.yaml, and the operator's delivery.shaping_file over it):
 * per mailbox provider, the MX-host suffixes that name it, the limits of each lane to it, and the
 * replies that slow or suspend that lane. Pure: parsing, merging and matching.
 */

/** What a matching reply does to its lane: fewer connections and a lower rate, or nothing sent at all for a while. */
export type ThrottleAction = 'slow' | 'suspend';

/** The limits of a lane, as the engine applies them, and the messages one connection carries. */
export interface ProviderLimits extends DestinationLimits {
  messagesPerConnection?: number | undefined;
}

export interface ReplyRule {
  /** Short, stable: shown in `queue status`, the log and the metrics' labels. */
  name: string;
  codes: '4xx' | '5xx' | 'any';
  pattern: RegExp;
  action: ThrottleAction;
  /** How long the lane stays slowed or suspended (ms). */
  holdMs: number;
  /** Limits while it is held, and where the ramp back starts. */
  slowed: { concurrency: number; rate?: number | undefined };
  /** How long the way back to the lane's own limits takes, once the hold is over (ms; 0: at once). */
  rampMs: number;
}

export interface Provider {
  /** Its key in the file. */
  id: string;
  /** MX-host suffixes, lower case without the trailing dot: a host is the suffix or ends with "." + it. */
  mx: string[];
  limits: ProviderLimits;
  replies: ReplyRule[];
}

export class ShapingRulesError extends Error {}

const DURATION = /^(\d{1,6})(s|m|h|d)$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const WEEK_MS = 7 * 86_400_000;

/** "90s", "30m", "2h", "1d", up to a week; 0 as "0s". */
export function durationMs(text: string): number {
  const m = DURATION.exec(text);
  if (!m) throw new ShapingRulesError(`"${text}" is not a duration: a number and s, m, h or d (e.g. 30m)`);
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  if (ms > WEEK_MS) throw new ShapingRulesError(`"${text}" is longer than a week`);
  return ms;
}

const duration = z.string().max(20);
const suffix = z
  .string()
  .min(1)
  .max(253)
  .regex(/^\.?[a-z0-9-]+(\.[a-z0-9-]+)*\.?$/i, 'an MX host name suffix such as google.com');
/** A rate as the guidelines state it: per second or per hour, not both. */
const rate = {
  per_second: z.number().gt(0).max(100_000).optional(),
  per_hour: z.number().gt(0).max(360_000_000).optional(),
};
const replySchema = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .max(60)
      .regex(/^[a-z0-9][a-z0-9._-]*$/i, 'letters, digits, ".", "_" and "-"'),
    codes: z.enum(['4xx', '5xx', 'any']).default('any'),
    match: z.string().min(3).max(500),
    action: z.enum(['slow', 'suspend']),
    for: duration,
    connections: z.number().int().min(1).max(1000).default(1),
    ...rate,
    ramp: duration.default('0s'),
  })
  .refine((r) => r.per_second === undefined || r.per_hour === undefined, 'per_second or per_hour, not both');
const providerSchema = z
  .strictObject({
    enabled: z.boolean().default(true),
    mx: z.array(suffix).min(1).max(100).optional(),
    connections: z.number().int().min(1).max(1000).optional(),
    messages_per_connection: z.number().int().min(1).max(10_000).optional(),
    ...rate,
    replies: z.array(replySchema).max(100).optional(),
  })
  .refine((p) => p.per_second === undefined || p.per_hour === undefined, 'per_second or per_hour, not both');
const fileSchema = z.strictObject({
  version: z.literal(1),
  providers: z.record(
    z
      .string()
      .min(1)
      .max(60)
      .regex(/^[a-z0-9][a-z0-9._-]*$/i),
    providerSchema,
  ),
});

type ProviderEntry = z.infer<typeof providerSchema>;

/** The providers of one file, as written (a provider of the operator's file may give only what it changes). */
export function parseShapingFile(text: string, source: string): Record<string, ProviderEntry> {
  let data: unknown;
  try {
    data = parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new ShapingRulesError(`${source}: not YAML: ${(err as Error).message}`);
  }
  const parsed = fileSchema.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ShapingRulesError(`${source}: ${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  return parsed.data.providers;
}

/**
 * The providers of the shipped file with the operator's over them: a provider of the same key
 * takes each field the operator gives (its `replies` as a whole list), `enabled: false` drops it,
 * a new key adds one (it must name its `mx`).
 */
export function shapingRules(shipped: Record<string, ProviderEntry>, operator: Record<string, ProviderEntry> = {}, source = 'shaping'): Provider[] {
  const out: Provider[] = [];
  for (const id of new Set([...Object.keys(shipped), ...Object.keys(operator)])) {
    const mine = operator[id];
    const merged: ProviderEntry = { ...shipped[id], ...mine } as ProviderEntry;
    // A rate of the operator replaces the shipped one, whichever unit either is in.
    if (mine && (mine.per_second !== undefined || mine.per_hour !== undefined)) {
      merged.per_second = mine.per_second;
      merged.per_hour = mine.per_hour;
    }
    if (!merged.enabled) continue;
    if (!merged.mx) throw new ShapingRulesError(`${source}: providers.${id}: mx: the MX-host suffixes of a new provider are required`);
    out.push(provider(id, merged, source));
  }
  return out;
}

function provider(id: string, p: ProviderEntry, source: string): Provider {
  const at = (name: string) => `${source}: providers.${id}.replies.${name}`;
  return {
    id,
    mx: p.mx!.map((s) => s.toLowerCase().replace(/^\.|\.$/g, '')),
    limits: { concurrency: p.connections, rate: perSecond(p), messagesPerConnection: p.messages_per_connection },
    replies: (p.replies ?? []).map((r) => {
      try {
        return {
          name: r.name,
          codes: r.codes,
          pattern: regex(r.match),
          action: r.action,
          holdMs: durationMs(r.for),
          slowed: { concurrency: r.connections, rate: perSecond(r) },
          rampMs: durationMs(r.ramp),
        };
      } catch (err) {
        throw new ShapingRulesError(`${at(r.name)}: ${(err as Error).message}`);
      }
    }),
  };
}

function perSecond(r: { per_second?: number | undefined; per_hour?: number | undefined }): number | undefined {
  return r.per_second ?? (r.per_hour === undefined ? undefined : r.per_hour / 3600);
}

/** "/regex/flags" (flags: i), as config/bounce-rules writes them. */
function regex(text: string): RegExp {
  const m = /^\/(.+)\/([a-z]*)$/.exec(text);
  if (!m) throw new ShapingRulesError(`match: expected /regex/ or /regex/i, got ${text.slice(0, 60)}`);
  if (!/^i?$/.test(m[2]!)) throw new ShapingRulesError('match: only the "i" flag is allowed');
  try {
    return new RegExp(m[1]!, m[2]);
  } catch (err) {
    throw new ShapingRulesError(`match: bad regular expression: ${(err as Error).message}`);
  }
}

/** The provider an MX host belongs to: the longest suffix that names it, or null. */
export function providerOfHost(providers: readonly Provider[], host: string): Provider | null {
  const name = host.toLowerCase().replace(/\.$/, '');
  let best: Provider | null = null;
  let length = 0;
  for (const p of providers) {
    for (const s of p.mx) {
      if (s.length > length && (name === s || name.endsWith(`.${s}`))) {
        best = p;
        length = s.length;
      }
    }
  }
  return best;
}

/**
 * The provider of a lane (`<source>/<destination>`, or the destination alone): that of the first
 * host of its MX set (or transport or smarthost host) that one names. URL origins have none.
 */
export function providerOfLane(providers: readonly Provider[], lane: string): Provider | null {
  const { destination } = splitLane(lane);
  if (destination.includes('://')) return null;
  for (const host of destination.split(',')) {
    const p = providerOfHost(providers, host);
    if (p) return p;
  }
  return null;
}

/** The first reply rule of the provider that the reply ("<code> <text>") matches, or null. */
export function matchReply(p: Provider, code: number, response: string): ReplyRule | null {
  if (code < 400 || code >= 600) return null;
  const permanent = code >= 500;
  for (const rule of p.replies) {
    if (rule.codes === '5xx' && !permanent) continue;
    if (rule.codes === '4xx' && permanent) continue;
    if (rule.pattern.test(response)) return rule;
  }
  return null;
}
