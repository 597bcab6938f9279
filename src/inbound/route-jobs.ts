import type { HttpTarget, HttpTargets, TargetCounters } from '../queue/http-jobs.ts';
import { HTTP_SCHEDULES } from '../queue/retry-policy.ts';
import type { InboundRepo } from '../store/inbound-repo.ts';
import type { InboundRecord, JobRecord } from '../store/records.ts';
import type { Arrival } from './authentication.ts';
import { parseRouted, routePayload, type RouteOptions } from './route-payload.ts';
import { nanoseconds } from '../util/time.ts';
import { Gate } from '../util/gate.ts';

/** A route as its POSTs need it. */
export interface RouteTarget extends HttpTarget, RouteOptions {
  accountId: string;
}

export interface RouteJobsDeps {
  route(id: string): Promise<RouteTarget | undefined>;
  secretOf(route: RouteTarget): string;
  disable(id: string): Promise<boolean>;
  counters: TargetCounters;
  repo: InboundRepo;
  /**
   * For a message stored before arrival checks (its record has no `authentication`): the
   * Authentication-Results value (SPF, DKIM, DMARC), or null; `raw`: its stored chunks.
   */
  authenticate(raw: readonly Buffer[], arrival: Arrival): Promise<string | null>;
  /** For such a message too: the spam score (0 when no spamd is configured). */
  spamScore(raw: readonly Buffer[]): Promise<number>;
  /** Payloads built at once (default 1): a 25 MiB message takes about 100 MB while its payload is built. */
  maxBuilding?: number;
}

/**
 * Routes as the targets of the engine's `route` HTTP jobs: 12 attempts over ≈11 hours; the body
 * is the `message.routing` payload, built from the stored message when the POST is made, with
 * the authentication and spam score checked once at its arrival (every attempt says the same,
 * whatever DNS says by then). A job whose inbound message is gone (retention) is dropped.
 */
export function routeTargets(d: RouteJobsDeps): HttpTargets {
  const gate = new Gate(d.maxBuilding ?? 1);
  return {
    kind: 'route',
    schedule: HTTP_SCHEDULES.route,
    // A payload can be tens of MB: built when it is sent, one at a time.
    prefetchBody: false,
    get: (id) => d.route(id),
    async body(job: JobRecord, target: HttpTarget): Promise<Buffer[] | null> {
      const route = target as RouteTarget;
      const record = await d.repo.get(job.eventId);
      if (!record) return null;
      return gate.run(async () => {
        // The stored chunks, never joined: each reader streams them.
        let raw: Buffer[] | null = await collect(d.repo.body(record.bodyId));
        const checked = record.authentication;
        const [auth, spam] = checked
          ? [checked.results, checked.spamScore]
          : await Promise.all([route.headers ? d.authenticate(raw, arrivalOf(record)) : Promise.resolve(null), d.spamScore(raw)]);
        const mail = await parseRouted(raw);
        // Parsed: the message may go while the payload is made.
        // eslint-disable-next-line no-useless-assignment -- drops the last reference to the raw chunks, which the collector may take back
        raw = null;
        // Buffers the client signs and sends as they are.
        return routePayload(
          mail,
          route,
          {
            id: record.id,
            size: record.size,
            receivedAt: nanoseconds(record.receivedAt),
            recipients: job.recipients ?? [],
            spamScore: spam,
            quarantine: checked?.action === 'quarantine',
          },
          auth,
        );
      });
    },
    secretOf: (target) => d.secretOf(target as RouteTarget),
    counters: d.counters,
    disable: (id) => d.disable(id),
  };
}

function arrivalOf(record: InboundRecord): Arrival {
  return { ip: record.client.address, helo: record.client.helo, sender: record.mailFrom };
}

async function collect(chunks: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const chunk of chunks) out.push(chunk);
  return out;
}
