import { Counter, type Registry } from 'prom-client';
import type { TlsOutcome } from '../delivery/tls-outcome.ts';

/**
 * `postilion_delivery_tls_total`: delivery attempts that had an SMTP session, by the TLS policy
 * that governed it (none, opportunistic, mta-sts, dane), the MTA-STS mode ("" otherwise), the TLS
 * version ("none" in clear text) and whether the certificate verified.
 */
export function deliveryTlsMetrics(registry: Registry): (outcome: TlsOutcome) => void {
  const counter = new Counter({
    name: 'postilion_delivery_tls_total',
    help: 'Delivery attempts by TLS policy (none, opportunistic, mta-sts, dane), MTA-STS mode, TLS version ("none": clear text) and verified certificate.',
    labelNames: ['policy', 'mode', 'version', 'verified'] as const,
    registers: [registry],
  });
  return (outcome) => counter.inc({ policy: outcome.policy, mode: outcome.mode ?? '', version: outcome.version ?? 'none', verified: String(outcome.verified) });
}
