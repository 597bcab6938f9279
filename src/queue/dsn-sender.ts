import { buildDsn, dsnStatus, headerBlock } from '../bounce/dsn.ts';
import type { Attempt } from '../delivery/deliverer.ts';
import type { Acceptor } from '../message/accept.ts';
import { newMessageId } from '../message/message-id.ts';
import type { AccountsRepo } from '../store/accounts-repo.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageRecord } from '../store/records.ts';
import { BODY_CHUNK_BYTES } from '../store/messages-repo.ts';

/** A DSN ready to commit in the batch of the outcome it reports. */
export interface PreparedDsn {
  records: MessageRecord[];
  ops: WriteOp[];
}

/** Header blocks longer than this are cut in the report (the original is not re-sent). */
const HEADERS_LIMIT = 64 * 1024;

/**
 * Reports a bounce or a final failure to the sender domain's `dsn_recipient` with an RFC 3464
 * report, accepted as a message of its own (null return path, DKIM-signed by the domain). Never
 * for sandbox mail, and never for a DSN: mail sent with a null return path gets no report.
 */
export class DsnSender {
  constructor(
    private readonly domains: DomainsRepo,
    private readonly accounts: AccountsRepo,
    private readonly messages: MessagesRepo,
    private readonly acceptor: Acceptor,
    private readonly hostname: string,
  ) {}

  async prepare(message: MessageRecord, attempt: Attempt, final: 'bounced' | 'failed', now: number): Promise<PreparedDsn | null> {
    if (message.sandbox || message.isBounceNotification) return null;
    const domain = await this.domains.get(message.domainId);
    if (!domain?.dsnRecipient) return null;
    const account = await this.accounts.getAccount(message.accountId);
    if (!account) return null;

    const { id, header } = newMessageId(domain.name, now);
    const text = buildDsn({
      reportingMta: this.hostname,
      from: `mailer-daemon@${domain.name}`,
      to: domain.dsnRecipient,
      messageId: header,
      date: new Date(now),
      boundary: `=_report_${id.replace(/-/g, '')}`,
      original: { id: message.id, arrivalDate: new Date(Date.parse(message.createdAt)), headers: await this.originalHeaders(message) },
      recipient: {
        address: message.recipient,
        action: 'failed',
        status: dsnStatus(attempt.smtpCode, attempt.enhanced, final),
        remoteMta: attempt.smtpCode > 0 ? attempt.host : null,
        diagnostic: attempt.smtpCode > 0 ? attempt.response : null,
        lastAttempt: new Date(now),
        explanation:
          final === 'bounced'
            ? 'The receiving server refused it permanently.'
            : `Delivery was retried until it expired; the last attempt said: ${attempt.response}`,
      },
    });
    // The stored form splits the per-message header block (To, Message-ID) from the rest.
    const [head, body] = splitHead(text);
    const bytes = Buffer.from(body, 'utf8');
    const chunks: Buffer[] = [];
    for (let at = 0; at < bytes.length; at += BODY_CHUNK_BYTES) chunks.push(bytes.subarray(at, at + BODY_CHUNK_BYTES));
    const bodyId = `dsn-${id}`;
    return this.acceptor.prepare({
      account,
      domain,
      source: 'dsn',
      sender: `mailer-daemon@${domain.name}`,
      tags: [],
      sandbox: null,
      tracking: { open: false, click: false },
      bodies: [{ id: bodyId, chunks }],
      messages: [{ id, messageId: header, recipient: domain.dsnRecipient, head, bodyId, subject: 'Undelivered Mail Returned to Sender' }],
      bounceNotification: true,
    });
  }

  /** Tells the job engine (through the acceptor's listeners) that the DSN is queued. */
  announce(dsn: PreparedDsn): void {
    this.acceptor.announce(dsn.records);
  }

  private async originalHeaders(message: MessageRecord): Promise<string | null> {
    if (message.contentPurged) return null;
    let text = message.head;
    for await (const chunk of this.messages.body(message.bodyId)) {
      text += chunk.toString('utf8');
      if (/\r?\n\r?\n/.test(text) || text.length > HEADERS_LIMIT) break;
    }
    return headerBlock(text).slice(0, HEADERS_LIMIT);
  }
}

/** Moves the To and Message-ID lines into the per-message head, as composed mail has them. */
export function splitHead(text: string): [string, string] {
  const lines = text.split('\r\n');
  const end = lines.indexOf('');
  const own = (line: string) => /^(To|Message-ID):/i.test(line);
  const head = lines.slice(0, end).filter(own);
  const rest = [...lines.slice(0, end).filter((l) => !own(l)), ...lines.slice(end)];
  return [head.map((l) => l + '\r\n').join(''), rest.join('\r\n')];
}
