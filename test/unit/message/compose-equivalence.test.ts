import { expect } from 'chai';
import { simpleParser, type ParsedMail } from 'mailparser';
import { composeBody, composeWithNodemailer, messageHead, type BodyContent } from '../../../src/message/compose.ts';
import { BODY_CHUNK_BYTES } from '../../../src/store/messages-repo.ts';

/**
 * Our composer (mime-builder.ts) against nodemailer's MailComposer, which it replaces for the
 * common message: with CRLF line breaks in the input the two must write the same bytes; with
 * bare CR or LF they must read the same once parsed (ours writes CRLF where nodemailer leaves
 * the bare break for the SMTP client to fix).
 */

const BOUNDARY = '0f3a9c1b2d4e5f60';

const content = (fields: Partial<BodyContent>): BodyContent => ({
  from: { email: 'app@example.com', name: 'Shop' },
  subject: 'Your receipt',
  attachments: [],
  headers: [],
  date: new Date(Date.UTC(2026, 10, 27, 12, 30, 5)),
  ...fields,
});

async function ours(c: BodyContent): Promise<Buffer> {
  return Buffer.concat((await composeBody(c, BOUNDARY)).chunks);
}

async function theirs(c: BodyContent): Promise<Buffer> {
  return Buffer.concat((await composeWithNodemailer(c, BOUNDARY)).chunks);
}

const crlf = (text: string): string => text.replace(/\r\n|\r|\n/g, '\r\n');

const words = (n: number, word: (i: number) => string): string => Array.from({ length: n }, (_, i) => word(i)).join(' ');

/** Shapes the API sends, each written the same by both composers (CRLF line breaks). */
const SHAPES: Array<[string, Partial<BodyContent>]> = [
  ['text only, short ASCII lines (7bit)', { text: 'Hello,\r\n\r\nyour order has shipped.\r\n' }],
  ['HTML only, one long line (quoted-printable)', { html: `<p>${'x'.repeat(5000)}</p>` }],
  ['text and HTML (multipart/alternative)', { text: 'Hello', html: '<p>Hello</p>' }],
  ['text, AMP and HTML, in that order', { text: 'a', amp: '<!doctype html><html ⚡4email><body>x</body></html>', html: '<p>x</p>' }],
  ['long words broken after spaces and punctuation', { text: words(400, (i) => `word${i}${i % 7 === 0 ? '.' : i % 11 === 0 ? ',' : ''}`) }],
  ['lines of 74 to 78 characters', { text: [74, 75, 76, 77, 78].map((n) => 'y'.repeat(n)).join('\r\n') }],
  ['lines starting with a dot, "=" and trailing spaces and tabs', { text: `.dot\r\n..two\r\n=eq=\r\ntrailing  \r\ntab\t\r\n${'q'.repeat(80)} \r\nend ` }],
  ['"=" at every position of the soft break', { text: Array.from({ length: 8 }, (_, i) => `${'a'.repeat(70 + i)}=${'b'.repeat(20)}`).join('\r\n') }],
  ['Latin-1 text (quoted-printable)', { text: 'Grüße aus Köln, schöne Äpfel. '.repeat(30) }],
  ['accents at every position of the soft break', { text: Array.from({ length: 8 }, (_, i) => `${'a'.repeat(70 + i)}é€${'b'.repeat(20)}`).join('\r\n') }],
  ['Cyrillic text (base64)', { text: 'Привет, мир! Ваш заказ отправлен. '.repeat(20) }],
  ['CJK and emoji (base64)', { html: `<p>${'注文ありがとうございます 😀 '.repeat(30)}</p>` }],
  ['emoji among Latin text (quoted-printable)', { text: `Thanks for your order 😀🎉, see you soon! `.repeat(20) }],
  ['non-ASCII HTML with ASCII text', { text: 'plain', html: '<p>Grüße 😀</p>' }],
  ['long ASCII subject (folded)', { text: 'x', subject: 'a rather long subject line that goes on '.repeat(8) }],
  ['non-ASCII subject (encoded words, split)', { text: 'x', subject: 'Ünïcödé sübject: Ваш заказ отправлен, 注文ありがとうございます '.repeat(3) }],
  ['subject with quotes and "=?"', { text: 'x', subject: 'He said "hi" =?not-a-word?= ok' }],
  ['empty subject (no Subject field)', { text: 'x', subject: '' }],
  [
    'To, Cc and Reply-To with plain, quoted and non-ASCII display names',
    {
      text: 'x',
      to: [{ email: 'a@example.org', name: 'Jöhn Dœ' }, { email: 'b@example.org' }, { email: 'c@Example.ORG', name: 'Smith, Jane' }],
      cc: [{ email: 'd@example.org', name: 'Mr. D' }],
      replyTo: { email: 'reply@example.com', name: 'Support (EU)' },
    },
  ],
  ['non-ASCII sender name', { text: 'x', from: { email: 'app@example.com', name: 'Магазин Grüße' } }],
  [
    'addresses nodemailer rewrites: upper-case, IDN, numeric and xn-- domains, local parts to quote',
    {
      text: 'x',
      from: { email: 'App@Example.COM', name: 'O\'Brien "Ops" \\ Co' },
      to: [
        { email: 'user@bücher.example' },
        { email: 'a.b+tag@example.org', name: 'under_score 42' },
        { email: 'x@0x7f.1' },
        { email: 'x@xn--bcher-kva.example', name: ' ' },
        { email: 'odd..dots@example.org' },
        { email: 'q@a-b.c' },
      ],
      replyTo: { email: 'first.last@sub.example.co', name: 'Jane <Doe>' },
    },
  ],
  ['sender without a name', { text: 'x', from: { email: 'app@example.com' } }],
  [
    'custom headers, Reply-To, Cc, In-Reply-To and References among them',
    {
      text: 'x',
      headers: [
        ['x-campaign', 'spring "sale"'],
        ['List-Unsubscribe', '<mailto:u@example.com>, <https://example.com/u?id=1>'],
        ['list-id', 'News <news.example.com>'],
        ['Reply-To', '"Help" <help@example.com>'],
        ['cc', 'copy@example.org'],
        ['In-Reply-To', 'abc@example.com'],
        ['references', '<a@example.com> b@example.com'],
        ['X-Empty', ''],
        ['X-Long', 'v '.repeat(200)],
        ['X-Encoded-Looking', 'a =?utf-8?q?x?= b'],
        ['x-tab', 'a\tb'],
        ['content-id', 'cid@example.com'],
        ['sender', 'Ops <ops@example.com>'],
      ],
    },
  ],
  ['empty text and HTML (an empty text/plain)', { text: '', html: '' }],
  ['text "0"-like short content', { text: '0' }],
];

describe('composeBody: our composer writes what nodemailer writes', () => {
  for (const [name, fields] of SHAPES) {
    it(`writes the same bytes: ${name}`, async () => {
      const c = content(fields);
      expect((await ours(c)).toString('latin1')).to.equal((await theirs(c)).toString('latin1'));
    });
  }

  it('writes the same bytes for 400 random texts of ASCII, Latin-1, Cyrillic and emoji with CRLF breaks', async () => {
    let seed = 35;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const pieces = ['a', 'b', 'Z', ' ', '  ', '\t', '.', ',', '!', '?', '=', '==', '\r\n', '\r\n.', 'é', 'ü', '€', 'ж', 'Ш', '😀', '<p>', 'word', '=3D'];
    for (let round = 0; round < 400; round++) {
      const text = Array.from({ length: 20 + random(600) }, () => pieces[random(pieces.length)]).join('');
      const c = content(random(2) === 0 ? { text } : { text: 'plain', html: text });
      const a = (await ours(c)).toString('latin1');
      const b = (await theirs(c)).toString('latin1');
      if (a !== b) expect(a, `round ${round}: ${JSON.stringify(text)}`).to.equal(b);
    }
  });

  it('leaves attachments to nodemailer, and a custom Reply-To next to the reply_to field', async () => {
    const attached = content({ text: 'x', attachments: [{ content: 'hello', filename: 'a.txt', contentType: 'text/plain' }] });
    expect((await ours(attached)).toString('latin1')).to.equal((await theirs(attached)).toString('latin1'));
    const both = content({ text: 'x', replyTo: { email: 'r@example.com' }, headers: [['Reply-To', 'other@example.com']] });
    expect((await ours(both)).toString('latin1')).to.equal((await theirs(both)).toString('latin1'));
  });
});

/** Header fields (decoded) and the text and HTML (line breaks as LF) as a reader sees them. */
function reading(mail: ParsedMail): Record<string, unknown> {
  const lf = (s: string | false | undefined) => (typeof s === 'string' ? s.replace(/\r\n|\r/g, '\n') : s);
  const headers = [...mail.headers].filter(([key]) => !['content-type', 'content-transfer-encoding'].includes(key));
  return { headers, text: lf(mail.text), html: lf(mail.html), contentType: mail.headers.get('content-type') };
}

async function parsed(body: Buffer): Promise<ParsedMail> {
  return simpleParser(Buffer.concat([Buffer.from(messageHead('<id@example.com>', { email: 'to@example.org', name: 'To' })), body]));
}

describe('composeBody: bare CR and LF in the input', () => {
  const MIXED: Array<[string, Partial<BodyContent>]> = [
    ['LF only (7bit)', { text: 'line one\nline two\n\n.dot\n' }],
    [
      'LF only, long lines, "=" and trailing spaces (quoted-printable)',
      { html: `<p class="a">${'word '.repeat(30)}</p>\n<p>x = y</p>  \n${'z'.repeat(100)}  ` },
    ],
    ['CR only', { text: 'line one\rline two\r' }],
    ['LF, CR and CRLF mixed, with trailing spaces (quoted-printable)', { text: `Grüße  \nzwei\r\ndrei \r${'x'.repeat(90)}\n=` }],
    ['LF in HTML and Cyrillic text (base64)', { text: 'Привет,\nмир!\n'.repeat(20), html: '<p>\nhi\n</p>' }],
  ];
  for (const [name, fields] of MIXED) {
    it(`reads as nodemailer's output reads, and writes CRLF only: ${name}`, async () => {
      const c = content(fields);
      const mine = await ours(c);
      expect(reading(await parsed(mine))).to.deep.equal(reading(await parsed(await theirs(c))));
      expect(mine.toString('latin1')).to.equal(mine.toString('latin1').replace(/\r\n|\r|\n/g, '\r\n'));
      // The same content with CRLF breaks is written byte for byte as nodemailer writes it.
      const normal = content({ ...fields, ...(fields.text ? { text: crlf(fields.text) } : {}), ...(fields.html ? { html: crlf(fields.html) } : {}) });
      expect(mine.toString('latin1')).to.equal((await theirs(normal)).toString('latin1'));
    });
  }
});

describe('composeBody: size and lines', () => {
  it('cuts a large body into store-sized chunks and reads it back whole', async () => {
    const text = `${'Grüße aus Köln, '.repeat(12_000)}\r\n${'line\r\n'.repeat(5000)}`;
    const c = content({ text, html: `<p>${'x'.repeat(100_000)}</p>` });
    const body = await composeBody(c, BOUNDARY);
    expect(body.chunks.slice(0, -1).every((chunk) => chunk.length === BODY_CHUNK_BYTES)).to.equal(true);
    expect(body.size).to.equal(body.chunks.reduce((n, chunk) => n + chunk.length, 0));
    expect(body.chunks.length).to.be.greaterThan(3);
    expect(reading(await parsed(Buffer.concat(body.chunks)))).to.deep.equal(reading(await parsed(await theirs(c))));
  });

  it('writes CRLF only, header lines of at most 998 octets and body lines of at most 76', async () => {
    for (const [, fields] of SHAPES) {
      const c = content(fields);
      if (c.attachments.length > 0) continue;
      const message = (await ours(c)).toString('latin1');
      expect(message).to.equal(message.replace(/\r\n|\r|\n/g, '\r\n'));
      const end = message.indexOf('\r\n\r\n');
      expect(
        Math.max(
          ...message
            .slice(0, end)
            .split('\r\n')
            .map((l) => l.length),
        ),
      ).to.be.at.most(998);
      expect(
        Math.max(
          ...message
            .slice(end + 4)
            .split('\r\n')
            .map((l) => l.length),
        ),
      ).to.be.at.most(76);
    }
  });
});
