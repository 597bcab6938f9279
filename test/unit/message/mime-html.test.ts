import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { MAX_DEPTH, rewriteHtmlParts } from '../../../src/message/mime-html.ts';
import { finishTracking, planTracking } from '../../../src/message/tracking.ts';

/** A message from lines joined with CRLF. */
const crlf = (...lines: string[]) => lines.join('\r\n');
const bytes = (text: string) => Buffer.from(text, 'latin1');

const HEAD = crlf('From: app@example.com', 'To: someone@example.org', 'Subject: Hello', 'Message-ID: <m1@example.com>', 'MIME-Version: 1.0');

/** The transform used throughout: a visible, reversible change to the HTML. */
const MARK = '<img src="https://t.example/o/m1">';
const addPixel = (html: string) => html.replace('</body>', `${MARK}</body>`);

/** A transform that records what it was given. */
function recording(transform: (html: string) => string = addPixel): { calls: string[]; fn: (html: string) => string } {
  const calls: string[] = [];
  return { calls, fn: (html) => (calls.push(html), transform(html)) };
}

/** Base64 of some bytes in lines of 76, as mail composers write it. */
function base64Lines(data: Buffer): string {
  return data.toString('base64').replace(/.{76}/g, '$&\r\n').replace(/\r\n$/, '');
}

/** Every line (CRLF-separated) is at most `max` bytes, and no bare CR or LF. */
function expectLines(text: string, max: number): void {
  for (const line of text.split('\r\n')) {
    expect(line.length, line).to.be.at.most(max);
    expect(line).to.not.match(/[\r\n]/);
  }
}

describe('rewriteHtmlParts (MIME-aware rewriting of text/html parts)', () => {
  it('rewrites a single-part text/html message and keeps its header block byte for byte', () => {
    const html = '<html><body><p>Hi</p></body></html>';
    const message = bytes(crlf(HEAD, 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: 7bit', '', html, ''));
    const { calls, fn } = recording();
    const out = rewriteHtmlParts(message, fn);
    // A single part runs to the end of the message, its last CRLF included.
    expect(calls).to.deep.equal([`${html}\r\n`]);
    expect(out).to.not.equal(null);
    expect(out!.toString('latin1')).to.equal(crlf(HEAD, 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: 7bit', '', addPixel(html), ''));
  });

  it('hands multi-line HTML over with its CRLFs, and writes the result back with CRLF line ends only', () => {
    const message = bytes(crlf(HEAD, 'Content-Type: text/html', '', '<html>', '<body>', '<p>Hi</p>', '</body>', '</html>', ''));
    const { calls, fn } = recording((h) => h.replace('<p>Hi</p>', '<p>Hi</p>\n<p>added</p>'));
    const out = rewriteHtmlParts(message, fn)!;
    expect(calls).to.deep.equal(['<html>\r\n<body>\r\n<p>Hi</p>\r\n</body>\r\n</html>\r\n']);
    expect(out.toString('latin1')).to.equal(
      crlf(HEAD, 'Content-Type: text/html', '', '<html>', '<body>', '<p>Hi</p>', '<p>added</p>', '</body>', '</html>', ''),
    );
  });

  it('treats the content type and encoding case-insensitively, with a quoted charset and a folded header', () => {
    const html = '<body>x</body>';
    const head = crlf(HEAD, 'Content-Type: TEXT/HTML;', '\tcharset="UTF-8"', 'content-transfer-encoding: BASE64');
    const message = bytes(crlf(head, '', base64Lines(Buffer.from(html)), ''));
    const out = rewriteHtmlParts(message, addPixel)!;
    expect(out.toString('latin1').startsWith(`${head}\r\n\r\n`)).to.equal(true);
    expect(Buffer.from(out.toString('latin1').slice(head.length + 4), 'base64').toString('utf8')).to.equal(addPixel(html));
    // The message ended with a line break, and still does (the re-encoded base64 has none of its own).
    expect(out.toString('latin1')).to.match(/[A-Za-z0-9+/=]\r\n$/);
  });

  it('rewrites the HTML of multipart/alternative and keeps the text/plain part, boundaries, preamble and epilogue byte for byte', async () => {
    const html = '<html><body><p>Hello <b>there</b></p></body></html>';
    const plain = 'Hello there </body> (not HTML)';
    const parts = (h: string) =>
      crlf(
        HEAD,
        'Content-Type: multipart/alternative; boundary="--=_alt_1"',
        '',
        'This is a multi-part message in MIME format.',
        '',
        '----=_alt_1',
        'Content-Type: text/plain; charset=utf-8',
        'Content-Transfer-Encoding: 7bit',
        '',
        plain,
        '----=_alt_1',
        'Content-Type: text/html; charset=utf-8',
        'Content-Transfer-Encoding: 7bit',
        '',
        h,
        '----=_alt_1--',
        'epilogue',
        '',
      );
    const { calls, fn } = recording();
    const out = rewriteHtmlParts(bytes(parts(html)), fn)!;
    expect(calls).to.deep.equal([html]);
    expect(out.toString('latin1')).to.equal(parts(addPixel(html)));
    const parsed = await simpleParser(out);
    expect(parsed.text?.trim()).to.equal(plain);
    expect(parsed.html).to.equal(addPixel(html));
  });

  it('decodes a base64 HTML part (UTF-8), and encodes the result back as base64 in lines of 76', async () => {
    const html = `<html><body><h1>Grüße, naïve café ✓ 日本語</h1>${'<p>Lorem ipsum dolor sit amet.</p>'.repeat(20)}</body></html>`;
    const message = bytes(
      crlf(
        HEAD,
        'Content-Type: multipart/alternative; boundary=b1',
        '',
        '--b1',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'plain',
        '--b1',
        'Content-Type: text/html; charset=utf-8',
        'Content-Transfer-Encoding: base64',
        '',
        base64Lines(Buffer.from(html, 'utf8')),
        '--b1--',
        '',
      ),
    );
    const { calls, fn } = recording();
    const out = rewriteHtmlParts(message, fn)!;
    expect(calls).to.deep.equal([html]);
    const text = out.toString('latin1');
    const encoded = text.slice(text.indexOf('base64\r\n\r\n') + 10, text.indexOf('\r\n--b1--'));
    expectLines(encoded, 76);
    expect(Buffer.from(encoded, 'base64').toString('utf8')).to.equal(addPixel(html));
    const parsed = await simpleParser(out);
    expect(parsed.html).to.equal(addPixel(html));
    expect(parsed.text?.trim()).to.equal('plain');
    // Everything before the HTML part's body is as it was.
    const before = message.toString('latin1').indexOf('base64\r\n\r\n') + 10;
    expect(out.subarray(0, before).equals(message.subarray(0, before))).to.equal(true);
    expect(text.endsWith('\r\n--b1--\r\n')).to.equal(true);
  });

  it('decodes a quoted-printable HTML part (soft breaks, =XX, UTF-8), and encodes the result back as valid quoted-printable', async () => {
    const html = `<html><body style=3D"x"><p>Gr=C3=BC=C3=9Fe =E2=9C=93</p><p>${'a'.repeat(60)}=\r\n${'b'.repeat(30)}</p>\r\n<p>Second line</p></body></html>`;
    const decoded = `<html><body style="x"><p>Grüße ✓</p><p>${'a'.repeat(60)}${'b'.repeat(30)}</p>\r\n<p>Second line</p></body></html>`;
    const message = bytes(
      crlf(
        HEAD,
        'Content-Type: multipart/alternative; boundary=qp',
        '',
        '--qp',
        'Content-Type: text/plain; charset=utf-8',
        'Content-Transfer-Encoding: quoted-printable',
        '',
        'Gr=C3=BC=C3=9Fe plain',
        '--qp',
        'Content-Type: text/html; charset=utf-8',
        'Content-Transfer-Encoding: quoted-printable',
        '',
        html,
        '--qp--',
        '',
      ),
    );
    const { calls, fn } = recording((h) => h.replace('</body>', `<a href="https://t.example/c?a=1&amp;b=2">Über</a>${' '.repeat(3)}</body>`));
    const out = rewriteHtmlParts(message, fn)!;
    expect(calls).to.deep.equal([decoded]);
    const expected = decoded.replace('</body>', '<a href="https://t.example/c?a=1&amp;b=2">Über</a>   </body>');
    const parsed = await simpleParser(out);
    // mailparser gives line ends as LF.
    expect(parsed.html).to.equal(expected.replace(/\r\n/g, '\n'));
    expect(parsed.text?.trim()).to.equal('Grüße plain');
    const text = out.toString('latin1');
    const encoded = text.slice(text.lastIndexOf('quoted-printable\r\n\r\n') + 20, text.indexOf('\r\n--qp--'));
    expectLines(encoded, 76);
    expect(encoded).to.contain('=3D');
    expect(encoded).to.not.match(/[^\x20-\x7e\r\n\t]/);
    // The text/plain part is untouched, still in its own encoding.
    expect(text).to.contain(crlf('Content-Transfer-Encoding: quoted-printable', '', 'Gr=C3=BC=C3=9Fe plain', '--qp'));
  });

  it('reads a part in a non-UTF-8 charset byte for byte and writes it back in that charset', () => {
    const html = '<body><p>caf\xe9 d\xe9j\xe0 vu</p></body>';
    const message = bytes(crlf(HEAD, 'Content-Type: text/html; charset=iso-8859-1', 'Content-Transfer-Encoding: 8bit', '', html, ''));
    const { calls, fn } = recording();
    const out = rewriteHtmlParts(message, fn)!;
    expect(calls).to.deep.equal(['<body><p>café déjà vu</p></body>\r\n']);
    expect(out.equals(bytes(crlf(HEAD, 'Content-Type: text/html; charset=iso-8859-1', 'Content-Transfer-Encoding: 8bit', '', addPixel(html), '')))).to.equal(
      true,
    );
    // 0xE9, not the two UTF-8 bytes of é.
    expect(out.includes(Buffer.from([0x63, 0x61, 0x66, 0xe9]))).to.equal(true);
  });

  it('leaves UTF-16 HTML alone (it is not ASCII-compatible)', () => {
    const message = Buffer.concat([
      bytes(crlf(HEAD, 'Content-Type: text/html; charset=utf-16le', 'Content-Transfer-Encoding: binary', '', '')),
      Buffer.from('<body>x</body>', 'utf16le'),
    ]);
    const { calls, fn } = recording();
    expect(rewriteHtmlParts(message, fn)).to.equal(null);
    expect(calls).to.deep.equal([]);
  });

  it('turns a 7bit part whose line grows past 998 bytes into quoted-printable', async () => {
    const html = '<body><p>short</p></body>';
    const message = bytes(crlf(HEAD, 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: 7bit', '', html, ''));
    const long = `<p>${'x'.repeat(1200)}</p>`;
    const out = rewriteHtmlParts(message, (h) => h.replace('</body>', `${long}</body>`))!;
    const text = out.toString('latin1');
    expect(text).to.contain('Content-Transfer-Encoding: quoted-printable\r\n');
    expect(text).to.not.contain('Content-Transfer-Encoding: 7bit');
    expectLines(text, 998);
    expect(((await simpleParser(out)).html as string).trimEnd()).to.equal(html.replace('</body>', `${long}</body>`));

    // Without a Content-Transfer-Encoding field, one is added.
    const bare = bytes(crlf(HEAD, 'Content-Type: text/html', '', html, ''));
    const added = rewriteHtmlParts(bare, (h) => h.replace('</body>', `${long}</body>`))!.toString('latin1');
    expect(added.startsWith(crlf(HEAD, 'Content-Type: text/html', 'Content-Transfer-Encoding: quoted-printable', '', ''))).to.equal(true);
    expectLines(added, 998);
  });

  it('leaves an AMP part (text/x-amp-html) alone and rewrites only the text/html part', () => {
    const amp = '<!doctype html><html ⚡4email><body><a href="https://amp.example/">amp</a></body></html>';
    const html = '<html><body><a href="https://x.example/">x</a></body></html>';
    const build = (h: string) =>
      crlf(
        HEAD,
        'Content-Type: multipart/alternative; boundary=alt',
        '',
        '--alt',
        'Content-Type: text/plain',
        '',
        'plain </body>',
        '--alt',
        'Content-Type: text/x-amp-html; charset=utf-8',
        'Content-Transfer-Encoding: 8bit',
        '',
        amp,
        '--alt',
        'Content-Type: text/html; charset=utf-8',
        '',
        h,
        '--alt--',
        '',
      );
    const message = Buffer.from(build(html), 'utf8');
    const { calls, fn } = recording();
    const out = rewriteHtmlParts(message, fn)!;
    expect(calls).to.deep.equal([html]);
    expect(out.equals(Buffer.from(build(addPixel(html)), 'utf8'))).to.equal(true);
  });

  it('walks nested multipart/mixed > multipart/related > multipart/alternative and keeps every attachment byte for byte', async () => {
    const pdf = Buffer.from(Array.from({ length: 700 }, (_, i) => (i * 37) & 0xff));
    const htmlAttachment = '<html><body>an attached page, not the message body</body></html>';
    const html = '<html><body><img src="cid:logo"><p>Body</p></body></html>';
    const build = (h: string) =>
      crlf(
        HEAD,
        'Content-Type: multipart/mixed; boundary="mixed"',
        '',
        '--mixed',
        'Content-Type: multipart/related; boundary="related"',
        '',
        '--related',
        'Content-Type: multipart/alternative; boundary="alt"',
        '',
        '--alt',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Body',
        '--alt',
        'Content-Type: text/html; charset=utf-8',
        'Content-Transfer-Encoding: quoted-printable',
        '',
        h,
        '--alt--',
        '',
        '--related',
        'Content-Type: image/png',
        'Content-ID: <logo>',
        'Content-Transfer-Encoding: base64',
        '',
        'iVBORw0KGgo=',
        '--related--',
        '',
        '--mixed',
        'Content-Type: application/pdf; name="doc.pdf"',
        'Content-Disposition: attachment; filename="doc.pdf"',
        'Content-Transfer-Encoding: base64',
        '',
        base64Lines(pdf),
        '--mixed',
        'Content-Type: text/html; charset=utf-8; name="page.html"',
        'Content-Disposition: attachment; filename="page.html"',
        '',
        htmlAttachment,
        '--mixed--',
        '',
      );
    const message = bytes(build(html.replace(/=/g, '=3D')));
    const { calls, fn } = recording();
    const out = rewriteHtmlParts(message, fn)!;
    // Only the message body's HTML, not the HTML attachment.
    expect(calls).to.deep.equal([html]);
    // Everything but the HTML part's body is as it was: headers, boundaries, the image, the attachments.
    const input = message.toString('latin1');
    const text = out.toString('latin1');
    const bodyStart = input.indexOf('<html><body><img');
    const bodyEnd = input.indexOf('\r\n--alt--');
    expect(text.slice(0, bodyStart)).to.equal(input.slice(0, bodyStart));
    const tail = input.slice(bodyEnd);
    expect(text.endsWith(tail)).to.equal(true);
    const encoded = text.slice(bodyStart, text.length - tail.length);
    expectLines(encoded, 76);
    expect(encoded.replace(/=\r\n/g, '').replace(/=3D/g, '=')).to.equal(addPixel(html));
    const parsed = await simpleParser(out);
    // mailparser inlines the related image as a data: URL.
    expect((parsed.html as string).replace(/data:image\/png;base64,[^"]*/, 'cid:logo')).to.equal(addPixel(html));
    const attachments = Object.fromEntries(parsed.attachments.map((a) => [a.filename ?? a.contentId ?? '?', a.content]));
    expect(attachments['doc.pdf']!.equals(pdf)).to.equal(true);
    expect(attachments['page.html']!.toString('utf8')).to.equal(htmlAttachment);
  });

  it('rewrites every HTML part of a message, in order', () => {
    const build = (a: string, b: string) =>
      crlf(
        HEAD,
        'Content-Type: multipart/mixed; boundary=m',
        '',
        '--m',
        'Content-Type: text/html',
        '',
        a,
        '--m',
        'Content-Type: text/plain',
        '',
        'between',
        '--m',
        'Content-Type: text/html',
        'Content-Disposition: inline',
        '',
        b,
        '--m--',
        '',
      );
    const { calls, fn } = recording();
    const out = rewriteHtmlParts(bytes(build('<body>1</body>', '<body>2</body>')), fn)!;
    expect(calls).to.deep.equal(['<body>1</body>', '<body>2</body>']);
    expect(out.toString('latin1')).to.equal(build(addPixel('<body>1</body>'), addPixel('<body>2</body>')));
  });

  it('returns null, and does not call the transform, for a message without HTML', () => {
    const plainOnly = bytes(crlf(HEAD, 'Content-Type: text/plain; charset=utf-8', '', '<html><body>looks like HTML</body></html>', ''));
    const noContentType = bytes(crlf(HEAD, '', '<body>default is text/plain</body>', ''));
    const attachmentOnly = bytes(
      crlf(
        HEAD,
        'Content-Type: multipart/mixed; boundary=x',
        '',
        '--x',
        'Content-Type: text/plain',
        '',
        'hi',
        '--x',
        'Content-Type: text/html',
        'Content-Disposition: attachment; filename=a.html',
        '',
        '<body>a</body>',
        '--x--',
        '',
      ),
    );
    const forwarded = bytes(crlf(HEAD, 'Content-Type: message/rfc822', '', 'Content-Type: text/html', '', '<body>inner</body>', ''));
    const headersOnly = bytes(crlf(HEAD, 'Content-Type: text/html'));
    for (const message of [plainOnly, noContentType, attachmentOnly, forwarded, headersOnly, Buffer.alloc(0)]) {
      const { calls, fn } = recording();
      expect(rewriteHtmlParts(message, fn), message.toString('latin1')).to.equal(null);
      expect(calls).to.deep.equal([]);
    }
  });

  it('returns null when the transform changes nothing', () => {
    const message = bytes(crlf(HEAD, 'Content-Type: text/html', '', '<p>no body tag</p>', ''));
    const { calls, fn } = recording();
    expect(rewriteHtmlParts(message, fn)).to.equal(null);
    expect(calls).to.deep.equal(['<p>no body tag</p>\r\n']);
  });

  it('does not throw on broken multiparts: no boundary, no closing delimiter, no parts', () => {
    const cases = [
      crlf(HEAD, 'Content-Type: multipart/mixed', '', '--x', 'Content-Type: text/html', '', '<body>a</body>', '--x--', ''),
      crlf(HEAD, 'Content-Type: multipart/mixed; boundary=x', '', 'nothing here', ''),
      crlf(HEAD, 'Content-Type: multipart/mixed; boundary=x', '', '--x', 'Content-Type: text/html', '', '<body>a</body>'),
      crlf(HEAD, 'Content-Type: multipart/mixed; boundary=x', '', '--x--', ''),
      crlf(HEAD, 'Content-Type: multipart/mixed; boundary=x', '', '--x', '--x', '--x--', ''),
      crlf(HEAD, 'Content-Type: multipart/mixed; boundary=x', '', '--x'),
    ];
    for (const text of cases) {
      expect(() => rewriteHtmlParts(bytes(text), addPixel), text).to.not.throw();
    }
    // Two parts, no closing delimiter: the first part is still a part.
    const unclosed = crlf(
      HEAD,
      'Content-Type: multipart/mixed; boundary=x',
      '',
      '--x',
      'Content-Type: text/html',
      '',
      '<body>a</body>',
      '--x',
      'Content-Type: text/plain',
      '',
      'b',
    );
    expect(rewriteHtmlParts(bytes(unclosed), addPixel)!.toString('latin1')).to.equal(unclosed.replace('<body>a</body>', addPixel('<body>a</body>')));
  });

  describe('nesting', () => {
    /** HTML inside `levels` nested multipart/mixed entities. */
    function nested(levels: number, html: string): string {
      let entity = crlf('Content-Type: text/html', '', html);
      for (let level = levels; level >= 1; level--) {
        // b1x is no prefix of b10x: no boundary may begin another (RFC 2046 §5.1.1).
        entity = crlf(`Content-Type: multipart/mixed; boundary="b${level}x"`, '', `--b${level}x`, entity, `--b${level}x--`, '');
      }
      return crlf(HEAD, entity);
    }

    it(`rewrites HTML nested in ${MAX_DEPTH} multiparts`, () => {
      const out = rewriteHtmlParts(bytes(nested(MAX_DEPTH, '<body>deep</body>')), addPixel);
      expect(out!.toString('latin1')).to.equal(nested(MAX_DEPTH, addPixel('<body>deep</body>')));
    });

    it('leaves deeper HTML alone, and does not throw on absurd nesting', () => {
      const { calls, fn } = recording();
      expect(rewriteHtmlParts(bytes(nested(MAX_DEPTH + 1, '<body>deep</body>')), fn)).to.equal(null);
      expect(rewriteHtmlParts(bytes(nested(1000, '<body>deeper</body>')), fn)).to.equal(null);
      expect(calls).to.deep.equal([]);
    });
  });

  it("with the tracking rewrite: each recipient's copy has its own links and pixel, decoded as HTML", async () => {
    const html = '<html><body><a href="https://shop.example/?a=1&amp;b=2">Shop</a></body></html>';
    const message = bytes(crlf(HEAD, 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: base64', '', base64Lines(Buffer.from(html)), ''));
    const urls = { open: (id: string) => `https://t.example/o/${id}`, click: (id: string, i: number) => `https://t.example/c/${id}/${i}` };
    const copy = (id: string) => {
      const links: string[] = [];
      const out = rewriteHtmlParts(message, (h) => {
        const plan = planTracking(h, { open: true, click: true }, links.length);
        links.push(...plan.links);
        return finishTracking(plan.html, id, urls);
      });
      return { out: out!, links };
    };
    const a = copy('r1');
    const b = copy('r2');
    expect(a.links).to.deep.equal(['https://shop.example/?a=1&b=2']);
    expect(b.links).to.deep.equal(a.links);
    const htmlA = (await simpleParser(a.out)).html as string;
    const htmlB = (await simpleParser(b.out)).html as string;
    expect(htmlA).to.contain('<a href="https://t.example/c/r1/0">Shop</a>');
    expect(htmlA).to.contain('src="https://t.example/o/r1"');
    expect(htmlB).to.contain('<a href="https://t.example/c/r2/0">Shop</a>');
    expect(htmlA).to.not.contain('shop.example');
  });

  it("with the tracking rewrite: entities in a tracked link's other attributes survive a latin1 or us-ascii part", () => {
    const urls = { open: (id: string) => `https://t.example/o/${id}`, click: (id: string, i: number) => `https://t.example/c/${id}/${i}` };
    for (const charset of ['iso-8859-1', 'us-ascii']) {
      const html = '<a href="https://x.example/" title="&#8364;5 &eacute;">x</a>';
      const message = bytes(crlf(HEAD, `Content-Type: text/html; charset=${charset}`, 'Content-Transfer-Encoding: 7bit', '', html, ''));
      const out = rewriteHtmlParts(message, (h) => finishTracking(planTracking(h, { open: false, click: true }, 0).html, 'r1', urls))!;
      const body = out.subarray(out.indexOf('\r\n\r\n') + 4);
      // Only ASCII is written, and the title reads as it did: € and é as character references.
      expect(
        [...body].every((b) => b < 0x80),
        `${charset}: ${body.toString('latin1')}`,
      ).to.equal(true);
      expect(body.toString('latin1')).to.contain('<a href="https://t.example/c/r1/0" title="&#8364;5 &#233;">x</a>');
    }
  });
});
