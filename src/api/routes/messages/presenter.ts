import { simpleParser } from 'mailparser';
import type { RecipientOutcome } from '../../../message/send.ts';
import type { MessageRecord } from '../../../store/records.ts';

/** One entry of the 202 create-message response. */
export function presentOutcome(o: RecipientOutcome) {
  const m = o.message;
  const schedule = m?.schedule
    ? {
        schedule: {
          ...(m.schedule.firstAttempt ? { first_attempt: m.schedule.firstAttempt } : {}),
          ...(m.schedule.expires ? { expires: m.schedule.expires } : {}),
        },
      }
    : {};
  return {
    object: 'message',
    id: m ? m.messageId : null,
    recipient: {
      email: o.recipient.email,
      name: o.recipient.name ?? '',
      ...(o.recipient.substitutions ? { substitutions: o.recipient.substitutions } : {}),
    },
    status: !m ? 'error' : m.schedule?.firstAttempt ? 'scheduled' : 'queued',
    error: o.error,
    ...schedule,
  };
}

export function presentSummary(m: MessageRecord) {
  return {
    object: 'message',
    created_at: m.createdAt,
    updated_at: m.updatedAt,
    sent_at: m.sentAt,
    delivered_at: m.deliveredAt,
    retain_until: m.retainUntil,
    direction: m.direction,
    is_bounce_notification: m.isBounceNotification,
    bounce_classification: m.bounceClassification,
    delivery_attempts: m.attempts.map((a) => ({ time: a.time, log: a.log, status: a.status })),
    message_id: m.messageId,
    id: m.id,
    subject: m.subject,
    tags: m.tags,
    sender: m.sender,
    recipient: m.recipient,
    status: m.status,
    num_attempts: m.attempts.length,
    click_count: m.clickCount,
    open_count: m.openCount,
    reference_message_id: m.referenceMessageId,
    domain_id: m.domainId,
    account_id: m.accountId,
  };
}

/** The full message: summary, raw content and its parsed parts (both absent once purged). */
export async function presentMessage(m: MessageRecord, raw: Buffer | null) {
  if (!raw) return presentSummary(m);
  const parsed = await simpleParser(raw, { skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true });
  const parts: Array<{ content_type: string; content: string }> = [];
  // mailparser reports '' for a message without a text part.
  if (parsed.text) parts.push({ content_type: 'text/plain', content: parsed.text });
  if (typeof parsed.html === 'string') parts.push({ content_type: 'text/html', content: parsed.html });
  const attachments = [];
  for (const a of parsed.attachments) {
    // mailparser returns the AMP alternative as an attachment; it is a body part here.
    if (a.contentType === 'text/x-amp-html' && !a.filename) {
      parts.push({ content_type: 'text/x-amp-html', content: a.content.toString('utf8') });
      continue;
    }
    attachments.push({
      filename: a.filename ?? '',
      content: a.content.toString('base64'),
      content_type: a.contentType,
      content_id: a.contentId ?? '',
    });
  }
  const headers: Record<string, string[]> = {};
  for (const line of parsed.headerLines) {
    const value = line.line
      .slice(line.line.indexOf(':') + 1)
      .replace(/\r?\n[ \t]/g, ' ')
      .trim();
    (headers[line.key] ??= []).push(value);
  }
  return {
    ...presentSummary(m),
    content: raw.toString('utf8'),
    content_parsed: { parts, attachments, headers },
  };
}
