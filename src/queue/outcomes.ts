import type { Attempt } from '../delivery/deliverer.ts';
import type { EventRecorder } from '../events/recorder.ts';
import { messageEventData } from '../events/message-data.ts';
import type { DeliveryAttemptData, Event } from '../events/types.ts';
import type { Messages } from '../message/messages.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageRecord, MessageStatus, SandboxResult, SuppressionRecord } from '../store/records.ts';
import { bounceSuppresses, type Classification } from '../bounce/rules.ts';
import { isFinal } from '../message/retention.ts';
import type { PreparedDsn } from './dsn-sender.ts';
import { iso } from '../util/time.ts';
import { nextAttemptAt, type RetryPolicy } from './retry-policy.ts';

/** The suppression list as the outcomes use it (implemented by accounts/Suppressions). */
export interface SuppressionList {
  active(accountId: string, email: string, domain: string): Promise<SuppressionRecord | undefined>;
  guard<T>(accountId: string, email: string, domain: string, fn: (stored: SuppressionRecord | undefined) => Promise<T>): Promise<T>;
  inForce(record: SuppressionRecord | undefined, now: number): boolean;
  automatic(
    accountId: string,
    email: string,
    domain: string,
    reason: string,
    source: 'bounce' | 'failure',
    now: number,
    previous?: SuppressionRecord,
  ): WriteOp[];
}

/** Reports bounces and final failures (implemented by DsnSender). */
export interface DsnReporter {
  prepare(message: MessageRecord, attempt: Attempt, final: 'bounced' | 'failed', now: number): Promise<PreparedDsn | null>;
  announce(dsn: PreparedDsn): void;
}

/**
 * Turns an attempt into the message's next state. The attempt record, the status, the move or
 * removal of its due-time entry, the events, an automatic suppression and a DSN are one batch
 * (through Messages.update, under the message's lock; a suppression also under its own lock).
 */
export class Outcomes {
  constructor(
    private readonly messages: Messages,
    private readonly repo: MessagesRepo,
    private readonly events: EventRecorder,
    private readonly policy: RetryPolicy,
    private readonly suppressions: SuppressionList,
    private readonly dsn: DsnReporter,
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * A bounce that arrived after the SMTP transaction (a DSN to the VERP return path): the message
   * becomes Bounced, also when it had been Delivered, with `message.bounced` without
   * `delivery_attempt` and the suppression rule of a bounce. No DSN is sent for it. Null when the
   * message is gone, or already bounced.
   */
  async lateBounce(messageId: string, classification: Classification, text: string): Promise<MessageRecord | null> {
    const taken = await this.messages.current(messageId);
    if (!taken) return null;
    return this.suppressions.guard(taken.accountId, taken.recipient, taken.domain, (stored) =>
      this.messages.update(messageId, (current, now) => {
        if (current.status === 'Bounced' || current.status.startsWith('Sandbox')) return null;
        const next: MessageRecord = {
          ...current,
          status: 'Bounced',
          bounceClassification: classification,
          updatedAt: iso(now),
          attempts: [...current.attempts, { time: iso(now), log: `bounce received: ${text}`.slice(0, 1000), status: 'Bounced' }],
        };
        const suppress =
          bounceSuppresses(classification) && !this.suppressions.inForce(stored, now)
            ? this.suppressions.automatic(
                current.accountId,
                current.recipient,
                current.domain,
                `Hard bounce (${classification}): ${text}`.slice(0, 255),
                'bounce',
                now,
                stored,
              )
            : [];
        return {
          next,
          extra: [...(isFinal(current.status) ? [] : this.repo.unschedule(current)), ...this.event(next, 'message.bounced', undefined), ...suppress],
        };
      }),
    );
  }

  /** Records `attempt` for the message taken as `taken`; ignored if the message moved on meanwhile. */
  async apply(taken: MessageRecord, attempt: Attempt): Promise<MessageRecord | null> {
    if (attempt.outcome === 'delivered') return this.record(taken, attempt, undefined);
    return this.suppressions.guard(taken.accountId, taken.recipient, taken.domain, (stored) => this.record(taken, attempt, stored));
  }

  private async record(taken: MessageRecord, attempt: Attempt, stored: SuppressionRecord | undefined): Promise<MessageRecord | null> {
    let dsn: PreparedDsn | null = null;
    const next = await this.messages.update(taken.id, async (current, now) => {
      if (current.dueAt !== taken.dueAt || current.status !== taken.status) return null;
      const base = { ...current, updatedAt: iso(now), sentAt: current.sentAt ?? (attempt.smtpCode > 0 ? iso(now) : null) };
      const log = attempt.host ? `${attempt.host}: ${attempt.response}` : attempt.response;
      const withAttempt = (status: string) => ({
        ...base,
        attempts: [
          ...current.attempts,
          { time: iso(now), log, status, ...(attempt.tls ? { tls: attempt.tls } : {}), ...(attempt.source ? { source: attempt.source } : {}) },
        ],
      });
      const data = attemptData(attempt);
      const suppress = (reason: string, source: 'bounce' | 'failure') =>
        this.suppressions.inForce(stored, now)
          ? []
          : this.suppressions.automatic(current.accountId, current.recipient, current.domain, reason, source, now, stored);
      switch (attempt.outcome) {
        case 'delivered': {
          const next = { ...withAttempt('Delivered'), status: 'Delivered' as MessageStatus, deliveredAt: iso(now), bounceClassification: '' };
          return { next, extra: [...this.repo.unschedule(current), ...this.event(next, 'message.delivered', data)] };
        }
        case 'bounced': {
          const classification = attempt.classification ?? 'Uncategorized';
          const next = { ...withAttempt('Bounced'), status: 'Bounced' as MessageStatus, bounceClassification: classification };
          dsn = await this.dsn.prepare(current, attempt, 'bounced', now);
          return {
            next,
            extra: [
              ...this.repo.unschedule(current),
              ...this.event(next, 'message.bounced', data),
              ...(bounceSuppresses(classification) ? suppress(`Hard bounce (${classification}): ${attempt.response}`, 'bounce') : []),
              ...(dsn?.ops ?? []),
            ],
          };
        }
        case 'deferred': {
          const at = nextAttemptAt(
            {
              attempts: current.attempts.length + 1,
              createdAt: Date.parse(current.createdAt),
              now,
              expiresAt: current.schedule?.expires ? Date.parse(current.schedule.expires) : null,
              hintMs: attempt.hintMs,
            },
            this.policy,
            this.random,
          );
          if (at === null) {
            const classification = attempt.classification ?? 'TransientFailure';
            const next = { ...withAttempt('Failed'), status: 'Failed' as MessageStatus, bounceClassification: classification };
            dsn = await this.dsn.prepare(current, attempt, 'failed', now);
            return {
              next,
              extra: [
                ...this.repo.unschedule(current),
                ...this.event(next, 'message.transient_error', data),
                ...this.event(next, 'message.failed', undefined),
                // Not when the failure is on our side: the sender or its set-up, or never reaching the send.
                ...(bounceSuppresses(classification) && attempt.host !== null
                  ? suppress(`Delivery failed after ${next.attempts.length} attempts (${classification}): ${attempt.response}`, 'failure')
                  : []),
                ...(dsn?.ops ?? []),
              ],
            };
          }
          const next = { ...withAttempt('Deferred'), status: 'Deferred' as MessageStatus, dueAt: iso(at) };
          return { next, extra: [...this.repo.unschedule(current), ...this.repo.schedule(next), ...this.event(next, 'message.transient_error', data)] };
        }
      }
    });
    if (next && dsn) this.dsn.announce(dsn);
    return next;
  }

  /** A recipient on the suppression list: not sent to, `message.suppressed`. */
  suppress(taken: MessageRecord, suppression: SuppressionRecord): Promise<MessageRecord | null> {
    return this.messages.update(taken.id, (current, now) => {
      if (current.dueAt !== taken.dueAt || current.status !== taken.status) return null;
      const log = `not sent: ${current.recipient} is suppressed for ${suppression.domain} until ${suppression.expiresAt} (${suppression.reason})`;
      const next: MessageRecord = {
        ...current,
        status: 'Suppressed',
        updatedAt: iso(now),
        attempts: [...current.attempts, { time: iso(now), log, status: 'Suppressed' }],
      };
      return { next, extra: [...this.repo.unschedule(current), ...this.event(next, 'message.suppressed', undefined)] };
    });
  }

  /**
   * Sandbox mail is never sent: its `sandbox_result` is played out with the events real mail
   * would get, a synthesized delivery_attempt, and a final `Sandbox …` status.
   */
  simulate(taken: MessageRecord): Promise<MessageRecord | null> {
    return this.messages.update(taken.id, (current, now) => {
      if (current.dueAt !== taken.dueAt || current.status !== taken.status || !current.sandbox) return null;
      const play = SANDBOX[current.sandbox];
      const attempt = play.attempt ? { ...play.attempt } : undefined;
      const next: MessageRecord = {
        ...current,
        status: play.status,
        updatedAt: iso(now),
        sentAt: iso(now),
        deliveredAt: play.status === 'Sandbox Delivered' ? iso(now) : null,
        bounceClassification: play.attempt?.classification ?? (play.status === 'Sandbox Failed' ? 'TransientFailure' : ''),
        attempts: [...current.attempts, { time: iso(now), log: `sandbox: ${play.attempt?.response ?? play.status}`, status: play.status }],
      };
      return {
        next,
        extra: [...this.repo.unschedule(current), ...play.events.flatMap((type) => this.event(next, type, type === 'message.failed' ? undefined : attempt))],
      };
    });
  }

  /** A message whose `schedule.expires` passed before it could be delivered: it fails unattempted. */
  async expire(taken: MessageRecord): Promise<MessageRecord | null> {
    let dsn: PreparedDsn | null = null;
    const next = await this.messages.update(taken.id, async (current, now) => {
      if (current.dueAt !== taken.dueAt || current.status !== taken.status) return null;
      const log = `expired at ${current.schedule?.expires} before it could be delivered`;
      const next = {
        ...current,
        status: 'Failed' as MessageStatus,
        updatedAt: iso(now),
        bounceClassification: 'MessageExpired',
        attempts: [...current.attempts, { time: iso(now), log, status: 'Failed' }],
      };
      const expired: Attempt = { outcome: 'deferred', classification: 'MessageExpired', smtpCode: 0, enhanced: '', response: log, command: '', host: null };
      dsn = await this.dsn.prepare(current, expired, 'failed', now);
      return { next, extra: [...this.repo.unschedule(current), ...this.event(next, 'message.failed', undefined), ...(dsn?.ops ?? [])] };
    });
    if (next && dsn) this.dsn.announce(dsn);
    return next;
  }

  private event(m: MessageRecord, type: OutcomeEvent, attempt: DeliveryAttemptData | undefined): WriteOp[] {
    return outcomeEvent(this.events, m, type, attempt);
  }
}

/** Why a purged message failed: no remote server refused it, so no classification applies. */
const PURGE_CLASSIFICATION = 'Uncategorized';
const PURGE_LOG = 'purged by operator';

/**
 * The operator's purge of a queued message (control/queue-admin.ts decides which may go: not
 * final, not in delivery): it becomes Failed with a "purged by operator" attempt line, off the
 * due-time index (or its account's held list), with `message.failed` and no delivery_attempt (no
 * server answered this decision). The change for Messages.update, which writes it in one batch.
 */
export function purgedByOperator(
  current: MessageRecord,
  now: number,
  repo: Pick<MessagesRepo, 'unhold' | 'unschedule'>,
  events: EventRecorder,
): { next: MessageRecord; extra: WriteOp[] } {
  const next: MessageRecord = {
    ...current,
    status: 'Failed',
    heldAt: null,
    updatedAt: iso(now),
    bounceClassification: PURGE_CLASSIFICATION,
    attempts: [...current.attempts, { time: iso(now), log: PURGE_LOG, status: 'Failed' }],
  };
  const off = current.heldAt ? repo.unhold(current) : repo.unschedule(current);
  return { next, extra: [...off, ...outcomeEvent(events, next, 'message.failed', undefined)] };
}

/** The ops of a message event about `m` as it is after the change (with its observers': the counters). */
function outcomeEvent(events: EventRecorder, m: MessageRecord, type: OutcomeEvent, attempt: DeliveryAttemptData | undefined): WriteOp[] {
  return events.record({ type, accountId: m.accountId, data: messageEventData(m, EVENT_NAMES[type], attempt) }, { message: m });
}

type OutcomeEvent = Exclude<Event['type'], 'domain.dns_error' | 'message.reception' | 'suppression.created' | 'message.opened' | 'message.clicked'>;

const EVENT_NAMES = {
  'message.delivered': 'on_delivered',
  'message.transient_error': 'on_transient_error',
  'message.bounced': 'on_bounced',
  'message.failed': 'on_failed',
  'message.suppressed': 'on_suppressed',
} as const;

/** What each sandbox_result plays out: final status, events, and the attempt they carry. */
const SANDBOX: Record<SandboxResult, { status: MessageStatus; events: OutcomeEvent[]; attempt?: DeliveryAttemptData }> = {
  deliver: {
    status: 'Sandbox Delivered',
    events: ['message.delivered'],
    attempt: { smtp_code: 250, enhanced_status_code: '2.0.0', response: '250 2.0.0 OK: sandbox, not sent', command: 'DATA' },
  },
  bounce: {
    status: 'Sandbox Bounced',
    events: ['message.bounced'],
    attempt: {
      smtp_code: 550,
      enhanced_status_code: '5.1.1',
      response: '550 5.1.1 sandbox: the recipient does not exist',
      command: 'RCPT TO',
      classification: 'InvalidRecipient',
    },
  },
  defer: {
    status: 'Sandbox Deferred',
    events: ['message.transient_error'],
    attempt: {
      smtp_code: 451,
      enhanced_status_code: '4.3.0',
      response: '451 4.3.0 sandbox: try again later',
      command: 'DATA',
      classification: 'TransientFailure',
    },
  },
  fail: { status: 'Sandbox Failed', events: ['message.failed'] },
  suppress: { status: 'Sandbox Suppressed', events: ['message.suppressed'] },
};

/** The §5.2 `delivery_attempt`: only when an SMTP reply was had. */
function attemptData(a: Attempt): DeliveryAttemptData | undefined {
  if (a.smtpCode === 0) return undefined;
  return {
    smtp_code: a.smtpCode,
    ...(a.enhanced ? { enhanced_status_code: a.enhanced } : {}),
    response: a.response,
    command: a.command,
    ...(a.outcome !== 'delivered' && a.classification ? { classification: a.classification } : {}),
    ...(a.source ? { source: a.source } : {}),
    ...(a.tls ? { tls: { policy: a.tls.policy, ...(a.tls.mode ? { mode: a.tls.mode } : {}), version: a.tls.version, verified: a.tls.verified } } : {}),
  };
}
