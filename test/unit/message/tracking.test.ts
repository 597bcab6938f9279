import { expect } from 'chai';
import { parseDocument } from 'htmlparser2';
import { finishTracking, MAX_TRACKED_LINKS, MAX_TRACKED_URL, planTracking, type TrackingUrls } from '../../../src/message/tracking.ts';

const BOTH = { open: true, click: true };
const CLICKS = { open: false, click: true };
const OPENS = { open: true, click: false };
const NONE = { open: false, click: false };
/** Whether a planned (or finished) HTML still holds planTracking's stand-ins (marked by \u0001, which no HTML part holds). */
const hasStandIns = (text: string) => text.includes('\u0001p');

const URLS: TrackingUrls = {
  open: (id) => `https://t.example/o/${id}`,
  click: (id, index) => `https://t.example/c/${id}/${index}`,
};

/** Plans and finishes for one message id: the HTML a recipient gets. */
function track(html: string, what = BOTH, firstIndex = 0): { html: string; links: string[] } {
  const plan = planTracking(html, what, firstIndex);
  return { html: finishTracking(plan.html, 'm1', URLS), links: plan.links };
}

/** The href of every <a> in document order, as a browser would read them (entities decoded). */
function hrefs(html: string): Array<string | undefined> {
  const out: Array<string | undefined> = [];
  const visit = (nodes: unknown[]) => {
    for (const node of nodes as Array<{ type: string; name?: string; attribs?: Record<string, string>; children?: unknown[] }>) {
      if (node.type === 'tag' && node.name === 'a') out.push(node.attribs?.href);
      if (node.children) visit(node.children);
    }
  };
  visit(parseDocument(html).children);
  return out;
}

const PIXEL = '<img src="https://t.example/o/m1" width="1" height="1" alt="" style="border:0;width:1px;height:1px" />';

describe('open and click tracking of HTML (planTracking, finishTracking)', () => {
  describe('links', () => {
    it('rewrites an http(s) link to its click URL and records the original URL', () => {
      const out = track('<p>Hi <a href="https://example.com/welcome">go</a>!</p>', CLICKS);
      expect(out.html).to.equal('<p>Hi <a href="https://t.example/c/m1/0">go</a>!</p>');
      expect(out.links).to.deep.equal(['https://example.com/welcome']);
    });

    it('numbers several links in document order and lists their original URLs in that order', () => {
      const html = '<a href="https://a.example/1">1</a> <a href="http://b.example/2">2</a><div><a href="https://c.example/3?x=y#top">3</a></div>';
      const out = track(html, CLICKS);
      expect(hrefs(out.html)).to.deep.equal(['https://t.example/c/m1/0', 'https://t.example/c/m1/1', 'https://t.example/c/m1/2']);
      expect(out.links).to.deep.equal(['https://a.example/1', 'http://b.example/2', 'https://c.example/3?x=y#top']);
    });

    it('gives the same URL twice two numbers, and lists it twice', () => {
      const out = track('<a href="https://x.example/">a</a><a href="https://x.example/">b</a>', CLICKS);
      expect(hrefs(out.html)).to.deep.equal(['https://t.example/c/m1/0', 'https://t.example/c/m1/1']);
      expect(out.links).to.deep.equal(['https://x.example/', 'https://x.example/']);
    });

    it('reads hrefs in double, single or no quotes, with entities decoded, in an uppercase tag or attribute name, across lines', () => {
      const html = [
        `<a href='https://s.example/q'>single</a>`,
        '<a href=https://u.example/q>unquoted</a>',
        '<a href="https://e.example/?a=1&amp;b=2&#38;c=3">entities</a>',
        '<A HREF="https://U.example/UP">upper</A>',
        '<a\n  class="btn"\n  href="https://l.example/"\n>lines</a>',
        '<a href="  https://w.example/trim  ">spaces</a>',
      ].join('');
      const out = track(html, CLICKS);
      expect(out.links).to.deep.equal([
        'https://s.example/q',
        'https://u.example/q',
        'https://e.example/?a=1&b=2&c=3',
        'https://U.example/UP',
        'https://l.example/',
        'https://w.example/trim',
      ]);
      expect(hrefs(out.html)).to.deep.equal([0, 1, 2, 3, 4, 5].map((i) => `https://t.example/c/m1/${i}`));
      // The closing tags and the text between the links are kept as they were written.
      expect(out.html).to.contain('>upper</A>');
      expect(out.html).to.contain('>single</a>');
    });

    it('keeps the other attributes of a rewritten link, with their values', () => {
      const out = track(
        '<a class="btn big" id=\'go\' title="a &lt;b&gt; &quot;c&quot; &amp; d" target="_blank" download href="https://x.example/">x</a>',
        CLICKS,
      );
      const doc = parseDocument(out.html);
      const a = doc.children[0] as unknown as { attribs: Record<string, string> };
      expect(a.attribs).to.deep.equal({
        class: 'btn big',
        id: 'go',
        title: 'a <b> "c" & d',
        target: '_blank',
        download: '',
        href: 'https://t.example/c/m1/0',
      });
    });

    it('leaves mailto:, tel:, in-page anchors, relative, protocol-relative, javascript: and empty hrefs alone', () => {
      const html = [
        '<a href="mailto:help@example.com">mail</a>',
        '<a href="tel:+15551234">call</a>',
        '<a href="#anchor">jump</a>',
        '<a href="/relative/path">rel</a>',
        '<a href="//cdn.example/x">proto</a>',
        '<a href="javascript:void(0)">js</a>',
        '<a href="">empty</a>',
        '<a href="https://">no host</a>',
        '<a name="top">no href</a>',
        '<a href="ftp://files.example/x">ftp</a>',
      ].join('');
      const out = track(html, CLICKS);
      expect(out.html).to.equal(html);
      expect(out.links).to.deep.equal([]);
    });

    it('leaves links marked data-as-no-track alone (any case, with or without a value), and numbers the others without gaps', () => {
      const html = [
        '<a href="https://a.example/" data-as-no-track>skip</a>',
        '<a href="https://b.example/">keep</a>',
        '<a DATA-AS-NO-TRACK="true" href="https://c.example/">skip</a>',
        '<a href="https://d.example/">keep</a>',
      ].join('');
      const out = track(html, CLICKS);
      expect(hrefs(out.html)).to.deep.equal(['https://a.example/', 'https://t.example/c/m1/0', 'https://c.example/', 'https://t.example/c/m1/1']);
      expect(out.links).to.deep.equal(['https://b.example/', 'https://d.example/']);
      expect(out.html).to.contain('<a href="https://a.example/" data-as-no-track>skip</a>');
      expect(out.html).to.contain('<a DATA-AS-NO-TRACK="true" href="https://c.example/">skip</a>');
    });

    it('leaves templated hrefs as the sender wrote them', () => {
      const html = [
        '<a href="{{ url }}">a</a>',
        '<a href="https://x.example/{{ path }}">b</a>',
        '<a href="https://x.example/?u={{user.id}}">c</a>',
        '<a href="https://x.example/{% if a %}a{% endif %}">d</a>',
        '<a href="https://x.example/half}}">e</a>',
      ].join('');
      const out = track(html, CLICKS);
      expect(out.html).to.equal(html);
      expect(out.links).to.deep.equal([]);
    });

    it('tracks a URL of MAX_TRACKED_URL characters and leaves a longer one alone', () => {
      const base = 'https://long.example/?q=';
      const fits = base + 'a'.repeat(MAX_TRACKED_URL - base.length);
      const tooLong = base + 'b'.repeat(MAX_TRACKED_URL - base.length + 1);
      expect(fits).to.have.length(MAX_TRACKED_URL);
      const html = `<a href="${tooLong}">long</a><a href="${fits}">fits</a>`;
      const out = track(html, CLICKS);
      expect(hrefs(out.html)).to.deep.equal([tooLong, 'https://t.example/c/m1/0']);
      expect(out.links).to.deep.equal([fits]);
    });

    it(`rewrites at most MAX_TRACKED_LINKS (${MAX_TRACKED_LINKS}) links, counting from firstIndex`, () => {
      const html = Array.from({ length: MAX_TRACKED_LINKS + 5 }, (_, i) => `<a href="https://x.example/${i}">${i}</a>`).join('');
      const plan = planTracking(html, CLICKS);
      expect(plan.links).to.have.length(MAX_TRACKED_LINKS);
      expect(plan.links[MAX_TRACKED_LINKS - 1]).to.equal(`https://x.example/${MAX_TRACKED_LINKS - 1}`);
      const out = hrefs(finishTracking(plan.html, 'm1', URLS));
      expect(out[MAX_TRACKED_LINKS - 1]).to.equal(`https://t.example/c/m1/${MAX_TRACKED_LINKS - 1}`);
      expect(out.slice(MAX_TRACKED_LINKS)).to.deep.equal([0, 1, 2, 3, 4].map((i) => `https://x.example/${MAX_TRACKED_LINKS + i}`));

      // A later HTML part of the same message continues the numbering and shares the limit.
      const second = planTracking('<a href="https://p.example/1">1</a><a href="https://p.example/2">2</a>', CLICKS, MAX_TRACKED_LINKS - 1);
      expect(second.links).to.deep.equal(['https://p.example/1']);
      expect(hrefs(finishTracking(second.html, 'm1', URLS))).to.deep.equal([`https://t.example/c/m1/${MAX_TRACKED_LINKS - 1}`, 'https://p.example/2']);
    });

    it('numbers from firstIndex (the links of earlier HTML parts)', () => {
      const plan = planTracking('<a href="https://a.example/">a</a><a href="https://b.example/">b</a>', CLICKS, 3);
      expect(plan.links).to.deep.equal(['https://a.example/', 'https://b.example/']);
      expect(hrefs(finishTracking(plan.html, 'm9', URLS))).to.deep.equal(['https://t.example/c/m9/3', 'https://t.example/c/m9/4']);
    });

    it('does not touch links in comments or scripts', () => {
      const html =
        '<!-- <a href="https://c.example/">c</a> --><script>document.write(\'<a href="https://s.example/">s</a>\')</script><a href="https://r.example/">r</a>';
      const out = track(html, CLICKS);
      expect(out.links).to.deep.equal(['https://r.example/']);
      expect(out.html).to.equal(
        '<!-- <a href="https://c.example/">c</a> --><script>document.write(\'<a href="https://s.example/">s</a>\')</script><a href="https://t.example/c/m1/0">r</a>',
      );
    });

    it('escapes the tracking URL inside the attribute', () => {
      const urls: TrackingUrls = { open: () => 'https://t.example/o?a=1&b="2"', click: (_, i) => `https://t.example/c?i=${i}&x=<y>` };
      const plan = planTracking('<body><a href="https://x.example/">x</a></body>', BOTH);
      const html = finishTracking(plan.html, 'm1', urls);
      expect(html).to.contain('href="https://t.example/c?i=0&amp;x=&lt;y&gt;"');
      expect(html).to.contain('src="https://t.example/o?a=1&amp;b=&quot;2&quot;"');
      expect(hrefs(html)).to.deep.equal(['https://t.example/c?i=0&x=<y>']);
    });
  });

  describe('the open pixel', () => {
    it('goes just before </body>', () => {
      const out = track('<html><body><p>Hi</p></body></html>', OPENS);
      expect(out.html).to.equal(`<html><body><p>Hi</p>${PIXEL}</body></html>`);
      expect(out.links).to.deep.equal([]);
    });

    it('goes before the last </body> when there are several, and finds an uppercase </BODY>', () => {
      expect(track('<body>a</body><body>b</body>', OPENS).html).to.equal(`<body>a</body><body>b${PIXEL}</body>`);
      expect(track('<HTML><BODY>a</BODY></HTML>', OPENS).html).to.equal(`<HTML><BODY>a${PIXEL}</BODY></HTML>`);
    });

    it('is not put before a </body> in a comment or a script', () => {
      expect(track('<body>x</body><!-- </body> -->', OPENS).html).to.equal(`<body>x${PIXEL}</body><!-- </body> -->`);
      expect(track('<body><script>var s = "</body>";</script></body>', OPENS).html).to.equal(`<body><script>var s = "</body>";</script>${PIXEL}</body>`);
    });

    it('goes at the end when there is no body tag, or the body is never closed', () => {
      expect(track('<p>Hello</p>', OPENS).html).to.equal(`<p>Hello</p>${PIXEL}`);
      expect(track('<html><body><p>Hello</p></html>', OPENS).html).to.equal(`<html><body><p>Hello</p></html>${PIXEL}`);
      expect(track('', OPENS).html).to.equal(PIXEL);
    });

    it('goes in once, with links rewritten too when both are on', () => {
      const plan = planTracking('<body><a href="https://x.example/">x</a></body>', BOTH);
      expect(plan.open).to.equal(true);
      const html = finishTracking(plan.html, 'm1', URLS);
      expect(html).to.equal(`<body><a href="https://t.example/c/m1/0">x</a>${PIXEL}</body>`);
      expect(html.split('https://t.example/o/').length - 1).to.equal(1);
    });
  });

  describe('opens only, clicks only, neither', () => {
    const html = '<html><body><a href="https://x.example/">x</a></body></html>';

    it('opens only: the pixel, the links untouched and not listed', () => {
      const plan = planTracking(html, OPENS);
      expect(plan.links).to.deep.equal([]);
      expect(plan.open).to.equal(true);
      expect(finishTracking(plan.html, 'm1', URLS)).to.equal(`<html><body><a href="https://x.example/">x</a>${PIXEL}</body></html>`);
    });

    it('clicks only: the links, no pixel', () => {
      const plan = planTracking(html, CLICKS);
      expect(plan.open).to.equal(false);
      expect(plan.links).to.deep.equal(['https://x.example/']);
      const out = finishTracking(plan.html, 'm1', URLS);
      expect(out).to.equal('<html><body><a href="https://t.example/c/m1/0">x</a></body></html>');
      expect(out).to.not.contain('<img');
    });

    it('neither: the HTML byte for byte, however it is written', () => {
      const messy = "<!DOCTYPE html><HTML><Body class=x><A HREF='https://x.example/?a=1&amp;b' >x</A>&nbsp;<br/><img src=x></BODY></HTML>";
      for (const h of [html, messy, '', 'plain text, no tags']) {
        const plan = planTracking(h, NONE);
        expect(plan.html).to.equal(h);
        expect(plan.links).to.deep.equal([]);
        expect(finishTracking(plan.html, 'm1', URLS)).to.equal(h);
      }
    });

    it('HTML with nothing to track is unchanged with clicks on', () => {
      const h = '<p>No links, <a href="mailto:x@example.com">just mail</a></p>';
      expect(planTracking(h, CLICKS).html).to.equal(h);
    });
  });

  describe('stand-ins', () => {
    it('a plan holds stand-ins until it is finished, and one plan serves several recipients', () => {
      const plan = planTracking('<body><a href="https://x.example/">x</a></body>', BOTH);
      expect(hasStandIns(plan.html)).to.equal(true);
      expect(plan.html).to.not.contain('https://x.example/');
      const first = finishTracking(plan.html, 'm1', URLS);
      const second = finishTracking(plan.html, 'm2', URLS);
      expect(hasStandIns(first)).to.equal(false);
      expect(hasStandIns(second)).to.equal(false);
      expect(hrefs(first)).to.deep.equal(['https://t.example/c/m1/0']);
      expect(hrefs(second)).to.deep.equal(['https://t.example/c/m2/0']);
      expect(second).to.contain('https://t.example/o/m2');
    });

    it('untracked HTML holds no stand-ins', () => {
      expect(hasStandIns('<p>Hello</p>')).to.equal(false);
      expect(hasStandIns(planTracking('<p>Hello</p>', NONE).html)).to.equal(false);
      expect(hasStandIns(planTracking('<p>Hello</p>', OPENS).html)).to.equal(true);
    });
  });
});
