import type { DmarcVerdict } from '../store/records.ts';

/** `smtp.inbound.dmarc_policy`: record only, or apply the sender's published policy. */
export type DmarcMode = 'monitor' | 'enforce';

/** What the inbound MX does with a message after its DMARC check. */
export type DmarcAction = { kind: 'accept' } | { kind: 'quarantine'; reason: string } | { kind: 'reject'; reason: string };

/**
 * The action for a message's DMARC verdict (RFC 7489 §6.6.4 and §6.7): `monitor` accepts
 * everything; `enforce` rejects a failure under `p=reject` and marks one under `p=quarantine`.
 * `sample` (0 ≤ sample < 100, random per message) applies `pct=`: a failure outside the sampled
 * share gets the next less strict policy. Anything but a failure (pass, none, temperror,
 * permerror, not evaluated) is accepted: a DNS fault must not cost a sender its mail.
 */
export function dmarcAction(mode: DmarcMode, dmarc: DmarcVerdict | null, sample: number): DmarcAction {
  if (mode === 'monitor' || dmarc === null || dmarc.result !== 'fail' || dmarc.policy === null || dmarc.policy === 'none') return { kind: 'accept' };
  const sampled = sample < dmarc.pct;
  const reason = `the message fails the DMARC policy of ${dmarc.domain} (p=${dmarc.policy}${dmarc.pct < 100 ? `, pct=${dmarc.pct}` : ''}): no aligned SPF or DKIM pass`;
  if (dmarc.policy === 'reject') return sampled ? { kind: 'reject', reason } : { kind: 'quarantine', reason };
  return sampled ? { kind: 'quarantine', reason } : { kind: 'accept' };
}
