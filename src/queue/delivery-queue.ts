import type { Logger } from 'pino';
import { announcedSend, type Attempt, type Deliverer } from '../delivery/deliverer.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageRecord } from '../store/records.ts';
import { domainOf } from '../util/email.ts';
import type { Clock } from '../util/time.ts';
import type { Outcomes, SuppressionList } from './outcomes.ts';
import type { HeldMail } from './held-mail.ts';
import { OutcomeWriter } from './outcome-writer.ts';
import type { SourceChoice } from './source-choice.ts';

/**
 * What happens to one due message: its account not active → held (queue/held-mail.ts); expired → failed; sandbox → simulated; a suppressed
 * recipient → suppressed, unsent; otherwise one delivery attempt and its outcome. A deferral re-arms the job engine for the new due time.
 */
export class DeliveryQueue {
  constructor(
    private readonly deliverer: Deliverer,
    private readonly outcomes: Outcomes,
    private readonly suppressions: Pick<SuppressionList, 'active'>,
    private readonly repo: Pick<MessagesRepo, 'get'>,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly links: {
      /** Mail of accounts that are not active is held here (absent: everything is delivered). */
      held?: Pick<HeldMail, 'mayDeliver' | 'hold'>;
      /** Told of a deferral's new due time. */
      engine?: { notify(dueMs: number): void };
      /** Writes outcomes the store refused again until it takes them (shared with the other job kinds; the daemon gives up on them at a stop). */
      writer?: OutcomeWriter;
      /** Told of each attempt's reply, with the lane it was filed under (traffic shaping: a throttling reply slows that lane). */
      replied?: (lane: string, attempt: Attempt, log: () => Logger) => void;
      /** With delivery sources configured: the lane's source, counted against its warm-up cap (absent: no sources). */
      sources?: Pick<SourceChoice, 'admit' | 'postpone'>;
    } = {},
  ) {
    this.writer = links.writer ?? new OutcomeWriter();
  }

  private readonly writer: OutcomeWriter;

  /**
   * `transactionDone` is called once no connection is used any more (the engine's slot).
   * `destination`: the engine's (MX set, transport or smarthost host), named on the log lines;
   * absent, the recipient domain. 'withdrawn': not attempted and nothing written (its source is at its
   * warm-up cap and another of its pool has room); the engine reads it again at once.
   */
  async process(message: MessageRecord, transactionDone: () => void = () => undefined, destination?: string): Promise<void | 'withdrawn'> {
    let result: void | 'withdrawn' = undefined;
    try {
      result = await this.handle(message, transactionDone, destination ?? domainOf(message.recipient));
      return result;
    } finally {
      // A job withdrawn is run again: that run lets the body's hold go.
      if (result !== 'withdrawn' && announcedSend(message)) this.deliverer.done(message.bodyId);
    }
  }

  /** Writes the attempt's outcome, however long the store refuses it (queue/outcome-writer.ts). */
  private record(message: MessageRecord, attempt: Attempt, log: () => Logger): Promise<MessageRecord | null> {
    return this.writer.write(() => this.outcomes.apply(message, attempt), log, { outcome: attempt.outcome, host: attempt.host });
  }

  private async handle(message: MessageRecord, transactionDone: () => void, destination: string): Promise<void | 'withdrawn'> {
    const now = this.clock.now();
    // The message's logger is made when a line is written: at a level that drops them, never.
    let child: Logger | undefined;
    const log = (): Logger =>
      (child ??= this.log.child({ message_id: message.id, account_id: message.accountId, destination, recipient_domain: domainOf(message.recipient) }));
    // First: a suspended account's mail is neither sent, nor simulated, nor failed while it waits.
    if (this.links.held && !(await this.links.held.mayDeliver(message))) {
      transactionDone();
      await this.links.held.hold(message);
      return;
    }
    if (message.schedule?.expires && Date.parse(message.schedule.expires) <= now) {
      await this.outcomes.expire(message);
      log().info({ status: 'Failed' }, 'message expired before delivery');
      return;
    }
    if (message.sandbox) {
      const next = await this.outcomes.simulate(message);
      log().info({ status: next?.status }, 'sandbox message simulated');
      return;
    }
    const suppression = await this.suppressions.active(message.accountId, message.recipient, message.domain);
    if (suppression) {
      const next = await this.outcomes.suppress(message, suppression);
      log().info({ status: next?.status, suppression_id: suppression.id }, 'recipient suppressed; not sent');
      return;
    }
    // The record was read when the message was taken; a cancel or purge that committed since
    // then must win over sending it. Read under the message's lock: a cancel or purge that checked
    // before the message was taken has committed by then; one that checks later sees it taken.
    const current = await this.repo.get(message.id);
    if (!current || current.status !== message.status || current.dueAt !== message.dueAt) {
      transactionDone();
      log().info({ status: current?.status ?? null }, 'message changed since it was taken; not sent');
      return;
    }
    const admission = this.links.sources ? await this.links.sources.admit(message, destination) : { source: null };
    if ('refile' in admission) {
      // Nothing written: the engine reads the job again at once, and files it under a source with room.
      transactionDone();
      log().info(`not sent now: ${admission.refile}`);
      return 'withdrawn';
    }
    if ('waitUntilMs' in admission) {
      transactionDone();
      const next = await this.links.sources!.postpone(message, admission.waitUntilMs);
      log().info({ next_attempt_at: next?.dueAt }, `not sent: ${admission.reason}`);
      if (next) this.links.engine?.notify(Date.parse(next.dueAt));
      return;
    }
    let attempt: Attempt;
    try {
      attempt = await this.deliverer.attempt(message, admission.source ?? undefined);
    } catch (err) {
      log().error({ err }, 'delivery attempt failed unexpectedly; deferred');
      attempt = {
        outcome: 'deferred',
        classification: 'Uncategorized',
        smtpCode: 0,
        enhanced: '',
        response: `internal error: ${(err as Error).message}`,
        command: '',
        host: null,
      };
    }
    // Before the slot is freed: the lane's next job already starts under a throttle this reply puts on it.
    this.links.replied?.(destination, attempt, log);
    transactionDone();
    const next = await this.record(message, attempt, log);
    if (this.log.isLevelEnabled('info'))
      log().info(
        {
          status: next?.status ?? 'unchanged',
          host: attempt.host,
          response: attempt.response,
          classification: attempt.classification,
          next_attempt_at: next?.status === 'Deferred' ? next.dueAt : undefined,
        },
        'delivery attempt',
      );
    if (next?.status === 'Deferred') this.links.engine?.notify(Date.parse(next.dueAt));
  }
}
