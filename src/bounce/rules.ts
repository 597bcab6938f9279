/**
 * Reply classification: what an SMTP reply means for a recipient (delivered, deferred, bounced)
 * and its public classification. Pure; the rules come from the data file config/bounce-rules.
 */

export type Outcome = 'delivered' | 'deferred' | 'bounced';

/** The public classifications (reference-api §5.2; an open set, these are the ones we produce). */
export const CLASSIFICATIONS = [
  'InvalidRecipient',
  'BadDomain',
  'InactiveMailbox',
  'InvalidSender',
  'QuotaIssues',
  'NoAnswerFromHost',
  'BadConnection',
  'DNSFailure',
  'RoutingErrors',
  'TransientFailure',
  'MessageExpired',
  'ProtocolErrors',
  'AuthenticationFailed',
  'PolicyRelated',
  'Uncategorized',
] as const;
export type Classification = (typeof CLASSIFICATIONS)[number];

export interface Reply {
  code: number;
  enhanced: string;
  text: string;
}

export interface BounceRule {
  codes: '5xx' | '4xx' | 'any';
  outcome: 'bounce' | 'defer' | 'keep';
  classification: Classification;
  pattern: RegExp;
  line: number;
}

export interface Verdict {
  outcome: Outcome;
  /** Absent for delivered replies. */
  classification?: Classification;
}

export class BounceRulesError extends Error {}

const RULE = /^(5xx|4xx|any)\s+(bounce|defer|keep)\s+([A-Za-z]+)\s+\/(.+)\/([a-z]*)$/;

/** Parses the rules file; a bad line is an error naming the line, never skipped. */
export function parseBounceRules(text: string, source = 'bounce-rules'): BounceRule[] {
  const rules: BounceRule[] = [];
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const where = `${source}:${index + 1}`;
    const m = RULE.exec(line);
    if (!m) throw new BounceRulesError(`${where}: expected "<5xx|4xx|any> <bounce|defer|keep> <Classification> /regex/flags"`);
    const [, codes, outcome, classification, body, flags] = m;
    if (!(CLASSIFICATIONS as readonly string[]).includes(classification!)) {
      throw new BounceRulesError(`${where}: unknown classification "${classification}" (one of ${CLASSIFICATIONS.join(', ')})`);
    }
    if (!/^i?$/.test(flags!)) throw new BounceRulesError(`${where}: only the "i" flag is allowed`);
    let pattern: RegExp;
    try {
      pattern = new RegExp(body!, flags);
    } catch (err) {
      throw new BounceRulesError(`${where}: bad regular expression: ${(err as Error).message}`);
    }
    rules.push({
      codes: codes as BounceRule['codes'],
      outcome: outcome as BounceRule['outcome'],
      classification: classification as Classification,
      pattern,
      line: index + 1,
    });
  }
  return rules;
}

/** Enhanced status code (RFC 3463) at the start of a reply text, or ''. */
export function enhancedCodeOf(text: string): string {
  return /^\s*([245]\.\d{1,3}\.\d{1,3})\b/.exec(text)?.[1] ?? '';
}

/** What a reply means. 2xx is delivered; otherwise the first matching rule, else the code. */
export function classify(reply: Reply, rules: readonly BounceRule[]): Verdict {
  if (reply.code >= 200 && reply.code < 300) return { outcome: 'delivered' };
  const permanent = reply.code >= 500;
  const subject = `${reply.code} ${reply.enhanced} ${reply.text}`;
  for (const rule of rules) {
    if (rule.codes === '5xx' && !permanent) continue;
    if (rule.codes === '4xx' && permanent) continue;
    if (!rule.pattern.test(subject)) continue;
    const outcome = rule.outcome === 'keep' ? (permanent ? 'bounced' : 'deferred') : rule.outcome === 'bounce' ? 'bounced' : 'deferred';
    return { outcome, classification: rule.classification };
  }
  return permanent ? { outcome: 'bounced', classification: 'Uncategorized' } : { outcome: 'deferred', classification: 'TransientFailure' };
}

/**
 * Classifications that blame the sender, the content or the path rather than the recipient:
 * a bounce with one of these does not suppress the address.
 */
const NOT_THE_RECIPIENT: ReadonlySet<Classification> = new Set<Classification>([
  'InvalidSender',
  'AuthenticationFailed',
  'PolicyRelated',
  'ProtocolErrors',
  'RoutingErrors',
  'MessageExpired',
]);

/** Whether a hard bounce of this classification suppresses the recipient address. */
export function bounceSuppresses(classification: Classification): boolean {
  return !NOT_THE_RECIPIENT.has(classification);
}
