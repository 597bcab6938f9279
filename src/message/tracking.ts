import { Parser } from 'htmlparser2';

/**
 * Open and click tracking of outgoing HTML, and where it happens.
 *
 * Decision: the per-recipient rewrite happens at acceptance, not at delivery. Every open and
 * click must name its recipient's message, so a tracked message cannot share its body with the
 * other recipients': each tracked recipient gets a body of its own, written in the acceptance
 * batch like any other. Cost: storage and acceptance work grow with the recipients of tracked
 * mail (one composed body per recipient instead of one shared body; the HTML is parsed once per
 * request, and each recipient's copy is a string substitution of its tokens). In exchange the
 * delivery path is untouched: retries send the same bytes, DKIM signs what is stored, and mail
 * without tracking (or without HTML) keeps one shared body as before. Rewriting MIME-aware at
 * delivery would keep one stored body but parse and re-encode HTML on every attempt, on the hot
 * path, and make the bytes of a retry depend on code that may have changed meanwhile.
 *
 * What is touched: only text/html (never text/plain or AMP). Links are `<a href>` whose target
 * is http(s), not marked `data-as-no-track`, and without template syntax (a templated href is
 * the sender's own, sent as it renders); `mailto:`, `tel:`, in-page anchors and everything else
 * stay as they are. The open pixel goes before the last `</body>`, or at the end.
 */

/** Where the tracking URLs of a message point, for a recipient's message id. */
export interface TrackingUrls {
  open(messageId: string): string;
  click(messageId: string, index: number): string;
}

/** A request's HTML with stand-ins for the tokens, and the links in the order they were numbered. */
export interface TrackingPlan {
  html: string;
  links: string[];
  open: boolean;
}

/** Links longer than this are left as they are (a redirect target must fit in a URL). */
export const MAX_TRACKED_URL = 4096;
/** Links rewritten per message at most; the rest are left as they are. */
export const MAX_TRACKED_LINKS = 1000;

const OPEN_MARK = '\u0001po\u0001';
const CLICK_MARK = /\u0001pc(\d+)\u0001/g;

/**
 * Parses the HTML once and puts stand-ins where the pixel and the rewritten links go; `finish`
 * turns the stand-ins into one recipient's URLs.
 */
export function planTracking(html: string, what: { open: boolean; click: boolean }, firstIndex = 0): TrackingPlan {
  const edits: Array<{ from: number; to: number; text: string }> = [];
  const links: string[] = [];
  let bodyClose = -1;
  const parser = new Parser(
    {
      onopentag(name, attribs) {
        if (!what.click || name !== 'a' || firstIndex + links.length >= MAX_TRACKED_LINKS) return;
        const href = attribs.href;
        if (href === undefined || !trackable(href) || 'data-as-no-track' in attribs) return;
        const index = firstIndex + links.length;
        links.push(href.trim());
        edits.push({ from: parser.startIndex, to: parser.endIndex + 1, text: openTag(name, { ...attribs, href: `\u0001pc${index}\u0001` }) });
      },
      onclosetag(name, implied) {
        if (name === 'body' && !implied) bodyClose = parser.startIndex;
      },
    },
    { decodeEntities: true, lowerCaseAttributeNames: true },
  );
  parser.end(html);
  if (what.open) {
    const pixel = `<img src="${OPEN_MARK}" width="1" height="1" alt="" style="border:0;width:1px;height:1px" />`;
    edits.push(bodyClose >= 0 ? { from: bodyClose, to: bodyClose, text: pixel } : { from: html.length, to: html.length, text: pixel });
  }
  edits.sort((a, b) => a.from - b.from);
  let out = '';
  let at = 0;
  for (const edit of edits) {
    out += html.slice(at, edit.from) + edit.text;
    at = edit.to;
  }
  out += html.slice(at);
  return { html: out, links, open: what.open };
}

/** One recipient's HTML: the stand-ins replaced by its message's URLs. */
export function finishTracking(planned: string, messageId: string, urls: TrackingUrls): string {
  return planned
    .replace(OPEN_MARK, () => escapeAttribute(urls.open(messageId)))
    .replace(CLICK_MARK, (_, index: string) => escapeAttribute(urls.click(messageId, Number(index))));
}

function trackable(href: string): boolean {
  const target = href.trim();
  if (target.length > MAX_TRACKED_URL || !/^https?:\/\/[^\s/?#]+/i.test(target)) return false;
  return !/\{\{|\{%|\}\}|%\}/.test(target);
}

function openTag(name: string, attribs: Record<string, string>): string {
  let out = `<${name}`;
  for (const [key, value] of Object.entries(attribs)) out += value === '' && key !== 'href' ? ` ${key}` : ` ${key}="${escapeAttribute(value)}"`;
  return `${out}>`;
}

/**
 * An attribute value as HTML source. Characters outside ASCII are written as numeric references:
 * the parser decoded the part's entities, and the part may be in a charset (us-ascii, latin1)
 * that cannot hold what they stood for.
 */
function escapeAttribute(value: string): string {
  return value
    .replace(/&/g, '&amp;')
    .replace(/"/g, '&quot;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/[^\x00-\x7f]/gu, (c) => `&#${c.codePointAt(0)};`);
}
