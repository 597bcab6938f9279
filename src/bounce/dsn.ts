/**
 * Delivery Status Notifications (RFC 3464): a `multipart/report` with a human-readable part, the
 * machine-readable `message/delivery-status`, and the original message's header block. Pure: the
 * caller stores and sends the result (with a null return path, RFC 5321 §4.5.5).
 */
export interface DsnInput {
  /** Our host name, for Reporting-MTA and the explanation. */
  reportingMta: string;
  /** The DSN's own From address (e.g. mailer-daemon@<sender domain>). */
  from: string;
  /** Where the DSN goes (the domain's dsn_recipient). */
  to: string;
  messageId: string;
  date: Date;
  boundary: string;
  /** The original message: its queue id, when it arrived, its header block (CRLF lines). */
  original: { id: string; arrivalDate: Date; headers: string | null };
  recipient: {
    address: string;
    /** `failed` for a bounce or a final failure. */
    action: 'failed';
    /** RFC 3463 status, e.g. 5.1.1. */
    status: string;
    /** The host that answered, if one did. */
    remoteMta: string | null;
    /** The SMTP reply, if one was had. */
    diagnostic: string | null;
    lastAttempt: Date;
    /** Why, in words, for the human-readable part. */
    explanation: string;
  };
}

/** The DSN as a whole message: headers, blank line, body; CRLF line ends throughout. */
export function buildDsn(d: DsnInput): string {
  const r = d.recipient;
  const headers = [
    `From: Mail Delivery System <${d.from}>`,
    `To: <${d.to}>`,
    `Subject: Undelivered Mail Returned to Sender`,
    `Date: ${rfc5322Date(d.date)}`,
    `Message-ID: ${d.messageId}`,
    'Auto-Submitted: auto-replied',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${d.boundary}"`,
  ];
  const human = [
    `This is the mail system at host ${ascii(d.reportingMta)}.`,
    '',
    `Your message to <${ascii(r.address)}> could not be delivered.`,
    '',
    ascii(r.explanation),
    ...(r.diagnostic ? ['', `The server ${r.remoteMta ? ascii(r.remoteMta) + ' ' : ''}said: ${ascii(r.diagnostic)}`] : []),
  ];
  const perMessage = [
    `Reporting-MTA: dns; ${ascii(d.reportingMta)}`,
    `X-Postilion-Queue-ID: ${d.original.id}`,
    `Arrival-Date: ${rfc5322Date(d.original.arrivalDate)}`,
  ];
  const perRecipient = [
    `Final-Recipient: rfc822; ${ascii(r.address)}`,
    `Action: ${r.action}`,
    `Status: ${r.status}`,
    ...(r.remoteMta ? [`Remote-MTA: dns; ${ascii(r.remoteMta)}`] : []),
    ...(r.diagnostic ? [`Diagnostic-Code: smtp; ${ascii(r.diagnostic)}`] : []),
    `Last-Attempt-Date: ${rfc5322Date(r.lastAttempt)}`,
  ];
  const parts = [
    part('text/plain; charset=us-ascii', human.map(fold).join('\r\n') + '\r\n'),
    part('message/delivery-status', [...perMessage, '', ...perRecipient].map(fold).join('\r\n') + '\r\n'),
    ...(d.original.headers !== null
      ? [part('text/rfc822-headers', withCrlf(d.original.headers), /[^\x00-\x7f]/.test(d.original.headers) ? '8bit' : null)]
      : []),
  ];
  return [
    headers.join('\r\n'),
    '',
    'This is a MIME-encapsulated message.',
    '',
    parts.map((p) => `--${d.boundary}\r\n${p}`).join('\r\n'),
    `--${d.boundary}--`,
    '',
  ].join('\r\n');
}

/** The RFC 3463 status a DSN reports: the reply's enhanced code, else one implied by its code. */
export function dsnStatus(smtpCode: number, enhanced: string, final: 'bounced' | 'failed'): string {
  if (/^[245]\.\d{1,3}\.\d{1,3}$/.test(enhanced)) return enhanced;
  if (smtpCode >= 500) return '5.0.0';
  // Retries ran out (or no server answered): RFC 3463 "delivery time expired".
  return final === 'failed' ? '4.4.7' : '5.0.0';
}

/** The header block of a stored message: everything before the first empty line. */
export function headerBlock(message: string): string {
  const end = message.search(/\r?\n\r?\n/);
  return end < 0 ? message : message.slice(0, end);
}

function part(contentType: string, content: string, encoding: '8bit' | null = null): string {
  return `Content-Type: ${contentType}\r\n${encoding ? `Content-Transfer-Encoding: ${encoding}\r\n` : ''}\r\n${content}`;
}

function withCrlf(text: string): string {
  const lines = text.replace(/\r?\n$/, '').split(/\r?\n/);
  return lines.join('\r\n') + '\r\n';
}

/** Printable ASCII only, no line breaks: report fields are 7-bit header-like lines. */
function ascii(text: string): string {
  return text.replace(/[\r\n]+/g, ' ').replace(/[^\x20-\x7e]/g, '?');
}

/** Folds a long field at spaces so that no line exceeds 78 characters where avoidable. */
function fold(line: string): string {
  if (line.length <= 78) return line;
  const out: string[] = [];
  let rest = line;
  while (rest.length > 78) {
    const cut = rest.lastIndexOf(' ', 78);
    if (cut <= 0) break;
    out.push(rest.slice(0, cut));
    rest = ' ' + rest.slice(cut + 1);
  }
  out.push(rest);
  return out.join('\r\n');
}

/** RFC 5322 date-time in UTC, e.g. "Sat, 21 Nov 2026 10:00:00 +0000". */
export function rfc5322Date(date: Date): string {
  return date.toUTCString().replace(/GMT$/, '+0000');
}
