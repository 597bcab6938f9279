import type { Logger } from 'pino';
import { parseArf, parseBounce } from '../bounce/report.ts';
import type { BounceRule, Classification } from '../bounce/rules.ts';
import type { InboundRecord, MessageRecord } from '../store/records.ts';
import type { VerpTokens } from '../util/verp.ts';
import type { ReportHandler } from './intake.ts';

/** A bounce as the inbound side needs it (bounce/ parses it). */
export interface BounceReading {
  kind: 'dsn' | 'bounce' | 'auto-reply' | 'unknown';
  recipients: Array<{ recipient: string; failed: boolean; status: string; text: string; classification: Classification }>;
}

/** A feedback-loop report as the inbound side needs it (bounce/ parses it). */
export interface ComplaintReading {
  feedbackType: string;
  userAgent: string;
  /** The complained-about message's envelope sender (a VERP return path) and Message-ID, when known. */
  returnPath: string;
  messageId: string;
  recipient: string;
}

export interface ReportsDeps {
  readBounce(raw: Buffer): BounceReading;
  readComplaint(raw: Buffer): ComplaintReading | null;
  verp: VerpTokens;
  message(id: string): Promise<MessageRecord | undefined>;
  messagesByHeader(accountId: string, messageIdHeader: string): Promise<MessageRecord[]>;
  lateBounce(messageId: string, classification: Classification, text: string): Promise<MessageRecord | null>;
  complaint(accountId: string, email: string, domain: string, reason: string): Promise<unknown>;
  log: Logger;
}

/**
 * Bounces and complaints that arrive after the SMTP transaction. A bounce to a VERP return path
 * bounces the message it names (a late bounce also after Delivered) with the classification
 * read from the report; auto-replies and reports of delays are logged and dropped. A complaint
 * finds its message by the VERP token of its return path, else by Message-ID, and suppresses the
 * recipient for good (protected). Nothing is ever sent in answer.
 */
export class Reports implements ReportHandler {
  constructor(private readonly d: ReportsDeps) {}

  async bounce(record: InboundRecord, messageId: string, raw: Buffer): Promise<void> {
    const log = this.d.log.child({ inbound_id: record.id, message_id: messageId });
    const reading = this.d.readBounce(raw);
    if (reading.kind === 'auto-reply' || reading.kind === 'unknown') {
      log.info(
        { kind: reading.kind },
        reading.kind === 'auto-reply' ? 'auto-reply to a return path dropped' : 'mail to a return path that is not a bounce dropped',
      );
      return;
    }
    const message = await this.d.message(messageId);
    if (!message) {
      log.info('bounce for a message that is gone dropped');
      return;
    }
    const failed = reading.recipients.filter((r) => r.failed);
    const mine =
      failed.find((r) => r.recipient === message.recipient.toLowerCase()) ??
      (failed.length > 0 && reading.recipients.length === failed.length ? failed[0] : undefined);
    if (!mine) {
      log.info(
        { recipients: reading.recipients.map((r) => `${r.recipient} ${r.status}`) },
        'report without a failure for the message (a delay or a success) dropped',
      );
      return;
    }
    const text = [mine.status, mine.text].filter(Boolean).join(' ');
    const next = await this.d.lateBounce(messageId, mine.classification, text);
    log.info({ classification: mine.classification, status: next?.status ?? 'unchanged', response: text }, 'bounce received');
  }

  async complaint(record: InboundRecord, accountId: string, domain: string, raw: Buffer): Promise<void> {
    const log = this.d.log.child({ inbound_id: record.id, account_id: accountId });
    const reading = this.d.readComplaint(raw);
    if (!reading) {
      log.info('mail to a complaint address that is not a feedback report dropped');
      return;
    }
    const message = await this.original(accountId, reading);
    const recipient = message?.recipient ?? reading.recipient;
    if (!recipient) {
      log.info({ feedback_type: reading.feedbackType }, 'complaint naming no recipient dropped');
      return;
    }
    const reason = `Complaint (${reading.feedbackType || 'abuse'})${reading.userAgent ? ` reported by ${reading.userAgent}` : ''}`;
    await this.d.complaint(accountId, recipient, message?.domain ?? domain, reason);
    log.info({ message_id: message?.id ?? null, recipient, feedback_type: reading.feedbackType }, 'complaint received: recipient suppressed');
  }

  /** The complained-about message of the account: by the VERP token of its return path, else by Message-ID. */
  private async original(accountId: string, reading: ComplaintReading): Promise<MessageRecord | undefined> {
    const token = /bounces\+([0-9a-f]+)@/i.exec(reading.returnPath)?.[1];
    const id = token ? this.d.verp.messageId(token) : null;
    if (id) {
      const message = await this.d.message(id);
      if (message?.accountId === accountId) return message;
    }
    if (reading.messageId) {
      const [found] = await this.d.messagesByHeader(accountId, reading.messageId);
      return found;
    }
    return undefined;
  }
}

/** A bounce read with bounce/report.ts, in the terms the intake uses. */
export function readBounce(raw: Buffer, rules: readonly BounceRule[]): BounceReading {
  const report = parseBounce(raw, rules);
  return {
    kind: report.kind,
    recipients: report.recipients.map((r) => ({
      recipient: r.recipient,
      failed: r.action === 'failed',
      status: r.status,
      text: r.diagnostic,
      classification: r.classification,
    })),
  };
}

/** A feedback-loop report read with bounce/report.ts, or null. */
export function readComplaint(raw: Buffer): ComplaintReading | null {
  const report = parseArf(raw);
  if (!report) return null;
  const to = /<([^<>]+)>/.exec(report.originalTo)?.[1] ?? report.originalTo;
  return {
    feedbackType: report.feedbackType,
    userAgent: report.userAgent,
    returnPath: report.originalReturnPath,
    messageId: report.originalMessageId,
    recipient: (report.originalRcptTo || to.split(',')[0] || '').trim().toLowerCase(),
  };
}
