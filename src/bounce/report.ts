import { classify, enhancedCodeOf, type BounceRule, type Classification } from './rules.ts';

/**
 * Reading the mail that comes back: delivery status notifications (RFC 3464), bounces that are
 * not (classified by their text), auto-replies (which are not bounces), and feedback-loop reports
 * (RFC 5965). Pure and bounded: at most MAX_PARTS MIME parts, MAX_DEPTH levels, MAX_TEXT
 * characters of any text looked at.
 */
const MAX_PARTS = 50;
const MAX_DEPTH = 10;
const MAX_TEXT = 256 * 1024;

export interface BouncedRecipient {
  /** Final-Recipient (or the address found in the text), lower-cased. */
  recipient: string;
  // eslint-disable-next-line @typescript-eslint/no-redundant-type-constituents -- RFC 3464's actions, for the reader; a report may carry any word
  action: 'failed' | 'delayed' | 'delivered' | 'relayed' | 'expanded' | string;
  /** Enhanced status code, e.g. 5.1.1. */
  status: string;
  /** The Diagnostic-Code text (after `smtp;`), or the reply found in the text. */
  diagnostic: string;
  smtpCode: number | null;
  classification: Classification;
  permanent: boolean;
}

export interface BounceReport {
  kind: 'dsn' | 'bounce' | 'auto-reply' | 'unknown';
  recipients: BouncedRecipient[];
  /** The Message-ID of the message it reports on, when it encloses its headers. */
  originalMessageId: string;
  reportingMta: string;
}

export interface ComplaintReport {
  feedbackType: string;
  userAgent: string;
  originalMailFrom: string;
  originalRcptTo: string;
  arrivalDate: string;
  sourceIp: string;
  /** Of the enclosed original message. */
  originalMessageId: string;
  originalFrom: string;
  originalTo: string;
  originalReturnPath: string;
}

interface Part {
  headers: Map<string, string>;
  type: string;
  params: Map<string, string>;
  body: string;
  parts: Part[];
}

/** What mail sent to a VERP return path is. */
export function parseBounce(raw: Buffer | string, rules: readonly BounceRule[]): BounceReport {
  const root = parseMessage(raw);
  const none: BounceReport = { kind: 'unknown', recipients: [], originalMessageId: '', reportingMta: '' };
  if (!root) return none;
  const all = flatten(root);
  const status = all.find((p) => p.type === 'message/delivery-status' || p.type === 'message/global-delivery-status');
  const originalMessageId = enclosedHeader(all, 'message-id');
  if (status) {
    const blocks = fieldBlocks(status.body);
    const perMessage = blocks[0] ?? new Map<string, string>();
    const recipients = blocks
      .slice(1)
      .filter((b) => b.has('final-recipient') || b.has('original-recipient'))
      .map((b) => dsnRecipient(b, rules));
    if (recipients.length > 0) return { kind: 'dsn', recipients, originalMessageId, reportingMta: afterType(perMessage.get('reporting-mta') ?? '') };
  }
  if (isAutoReply(root)) return { ...none, kind: 'auto-reply', originalMessageId };
  const text = all
    .filter((p) => p.type.startsWith('text/plain'))
    .map((p) => p.body)
    .join('\n')
    .slice(0, MAX_TEXT);
  if (looksLikeBounce(root, text)) {
    return { kind: 'bounce', recipients: textRecipients(root, text, rules), originalMessageId, reportingMta: '' };
  }
  return { ...none, originalMessageId };
}

/** A feedback-loop report (multipart/report; report-type=feedback-report), or null. */
export function parseArf(raw: Buffer | string): ComplaintReport | null {
  const root = parseMessage(raw);
  if (!root) return null;
  const all = flatten(root);
  const feedback = all.find((p) => p.type === 'message/feedback-report');
  if (!feedback) return null;
  const f = fieldBlocks(feedback.body)[0] ?? new Map<string, string>();
  return {
    feedbackType: (f.get('feedback-type') ?? '').toLowerCase(),
    userAgent: f.get('user-agent') ?? '',
    originalMailFrom: bare(f.get('original-mail-from') ?? ''),
    originalRcptTo: bare(f.get('original-rcpt-to') ?? '').toLowerCase(),
    arrivalDate: f.get('arrival-date') ?? f.get('received-date') ?? '',
    sourceIp: f.get('source-ip') ?? '',
    originalMessageId: enclosedHeader(all, 'message-id'),
    originalFrom: enclosedHeader(all, 'from'),
    originalTo: enclosedHeader(all, 'to'),
    originalReturnPath: bare(enclosedHeader(all, 'return-path')) || bare(f.get('original-mail-from') ?? ''),
  };
}

function dsnRecipient(b: Map<string, string>, rules: readonly BounceRule[]): BouncedRecipient {
  const recipient = bare(afterType(b.get('final-recipient') ?? b.get('original-recipient') ?? '')).toLowerCase();
  const action = (b.get('action') ?? '').trim().toLowerCase();
  const status = (b.get('status') ?? '').trim().split(/\s/)[0] ?? '';
  const diagnostic = afterType(b.get('diagnostic-code') ?? '');
  const codeMatch = /^([245]\d\d)\b/.exec(diagnostic);
  const smtpCode = codeMatch ? Number(codeMatch[1]) : status.startsWith('5') ? 550 : status.startsWith('4') ? 450 : null;
  const reply = { code: smtpCode ?? 550, enhanced: status || enhancedCodeOf(diagnostic.replace(/^[245]\d\d[ -]/, '')), text: diagnostic || status };
  const verdict = classify(reply, rules);
  const permanent = action === 'failed' && !status.startsWith('4');
  return { recipient, action, status, diagnostic, smtpCode, classification: verdict.classification ?? 'Uncategorized', permanent };
}

function textRecipients(root: Part, text: string, rules: readonly BounceRule[]): BouncedRecipient[] {
  const failed = (root.headers.get('x-failed-recipients') ?? '')
    .split(',')
    .map((a) => bare(a).toLowerCase())
    .filter(Boolean);
  const reply = /\b([45]\d\d)[ -]((?:[45]\.\d{1,3}\.\d{1,3})?[^\r\n]{0,300})/.exec(text);
  const code = reply ? Number(reply[1]) : 550;
  const diagnostic = reply
    ? `${reply[1]} ${reply[2]!.trim()}`
    : (text
        .trim()
        .split(/\r?\n/)
        .find((l) => l.trim() !== '')
        ?.slice(0, 300) ?? '');
  const enhanced = reply ? enhancedCodeOf(reply[2]!) : '';
  const verdict = classify({ code, enhanced, text: diagnostic }, rules);
  // The report comes before the copy of the message: addresses of the copy are not recipients.
  const report = text.split(/^-{2,}.*(?:below this line|original message|returned message).*$/im)[0] ?? text;
  const named = [...report.matchAll(/<([A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,})>/g)].map((m) => m[1]!.toLowerCase());
  const found = failed.length > 0 ? failed : [...new Set(named)].slice(0, 10);
  const addresses = found.length > 0 ? found : [''];
  return addresses.map((recipient) => ({
    recipient,
    action: code >= 500 ? 'failed' : 'delayed',
    status: enhanced,
    diagnostic,
    smtpCode: reply ? code : null,
    classification: verdict.classification ?? 'Uncategorized',
    permanent: code >= 500,
  }));
}

const AUTO_SUBJECT = /^(?:auto(?:matic)?[ -]?(?:reply|response|antwort)|out of (?:the )?office|abwesenheit|absence|vacation|on leave|away from)/i;

function isAutoReply(root: Part): boolean {
  const h = root.headers;
  const auto = (h.get('auto-submitted') ?? '').toLowerCase();
  if (auto && auto !== 'no') return !looksLikeDaemon(root);
  if (h.has('x-autoreply') || h.has('x-autorespond') || h.has('x-autoresponder')) return true;
  if (/^auto_reply$/i.test((h.get('precedence') ?? '').trim())) return true;
  if ((h.get('x-ms-exchange-generated-message-source') ?? '').toLowerCase().includes('mailbox rules')) return true;
  return AUTO_SUBJECT.test((h.get('subject') ?? '').trim());
}

function looksLikeDaemon(root: Part): boolean {
  return /mailer-daemon|postmaster/i.test(root.headers.get('from') ?? '') || root.headers.has('x-failed-recipients');
}

function looksLikeBounce(root: Part, text: string): boolean {
  if (looksLikeDaemon(root)) return true;
  const subject = root.headers.get('subject') ?? '';
  if (/undeliver|delivery (?:status notification|failure|has failed)|returned mail|mail delivery failed|failure notice|non[- ]?delivery/i.test(subject))
    return true;
  return /\b5\d\d[ -]5\.\d{1,3}\.\d{1,3}\b/.test(text) && /could not be delivered|delivery to the following|permanent(?:ly)? (?:error|fatal)/i.test(text);
}

/** A header of the enclosed original message (message/rfc822 or text/rfc822-headers part). */
function enclosedHeader(all: Part[], name: string): string {
  for (const p of all) {
    if (p.type === 'text/rfc822-headers' || p.type === 'message/rfc822-headers') {
      const value = parseHeaders(p.body).get(name);
      if (value) return value.trim();
    }
    if (p.type === 'message/rfc822' || p.type === 'message/global') {
      const inner = p.parts[0];
      const value = inner?.headers.get(name);
      if (value) return value.trim();
    }
  }
  return '';
}

/** `rfc822; a@b` → `a@b` */
function afterType(value: string): string {
  const semi = value.indexOf(';');
  return (semi >= 0 ? value.slice(semi + 1) : value).trim();
}

/** `Name <a@b>` or `<a@b>` → `a@b` */
function bare(value: string): string {
  const m = /<([^<>]*)>/.exec(value);
  return (m ? m[1]! : value).trim();
}

/** Header blocks separated by empty lines (a delivery-status or feedback-report body). */
function fieldBlocks(body: string): Array<Map<string, string>> {
  return body
    .slice(0, MAX_TEXT)
    .replace(/\r\n/g, '\n')
    .split(/\n[ \t]*\n/)
    .map((block) => parseHeaders(block))
    .filter((m) => m.size > 0);
}

function parseHeaders(block: string): Map<string, string> {
  const out = new Map<string, string>();
  const unfolded = block
    .slice(0, MAX_TEXT)
    .replace(/\r\n/g, '\n')
    .replace(/\n[ \t]+/g, ' ');
  for (const line of unfolded.split('\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!/^[!-9;-~]+$/.test(name)) continue;
    if (!out.has(name)) out.set(name, line.slice(colon + 1).trim());
  }
  return out;
}

/** The MIME tree of a message (bounded), or null when it has no header block. */
function parseMessage(raw: Buffer | string): Part | null {
  const text = (typeof raw === 'string' ? raw : raw.toString('latin1')).slice(0, 8 * 1024 * 1024);
  if (!/^[!-9;-~]+:/.test(text)) return null;
  const counter = { parts: 0 };
  return parsePart(text, 0, counter);
}

function parsePart(text: string, depth: number, counter: { parts: number }): Part {
  counter.parts += 1;
  const split = /\r?\n\r?\n/.exec(text);
  const head = split ? text.slice(0, split.index) : text;
  const body = split ? text.slice(split.index + split[0].length) : '';
  const headers = parseHeaders(head);
  const { type, params } = contentType(headers.get('content-type') ?? 'text/plain');
  const part: Part = { headers, type, params, body: '', parts: [] };
  const boundary = params.get('boundary');
  if (type.startsWith('multipart/') && boundary && depth < MAX_DEPTH) {
    const delimiter = `--${boundary}`;
    const pieces = body.split(delimiter).slice(1);
    for (const piece of pieces) {
      if (piece.startsWith('--') || counter.parts >= MAX_PARTS) break;
      part.parts.push(parsePart(piece.replace(/^[ \t]*\r?\n/, ''), depth + 1, counter));
    }
  } else if ((type === 'message/rfc822' || type === 'message/global') && depth < MAX_DEPTH && counter.parts < MAX_PARTS) {
    part.parts.push(parsePart(decode(body, headers), depth + 1, counter));
  } else {
    part.body = decode(body, headers).slice(0, MAX_TEXT);
  }
  return part;
}

function decode(body: string, headers: Map<string, string>): string {
  const encoding = (headers.get('content-transfer-encoding') ?? '').trim().toLowerCase();
  if (encoding === 'base64') return Buffer.from(body.slice(0, MAX_TEXT * 2).replace(/[^A-Za-z0-9+/=]/g, ''), 'base64').toString('latin1');
  if (encoding === 'quoted-printable') {
    return body
      .slice(0, MAX_TEXT * 2)
      .replace(/=\r?\n/g, '')
      .replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  return body;
}

function contentType(value: string): { type: string; params: Map<string, string> } {
  const [type, ...rest] = value.split(';');
  const params = new Map<string, string>();
  for (const p of rest) {
    const eq = p.indexOf('=');
    if (eq < 0) continue;
    params.set(
      p.slice(0, eq).trim().toLowerCase(),
      p
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1'),
    );
  }
  return { type: (type ?? '').trim().toLowerCase(), params };
}

function flatten(part: Part): Part[] {
  return [part, ...part.parts.flatMap(flatten)];
}
