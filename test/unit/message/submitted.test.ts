import { expect } from 'chai';
import { decodeWords, prepareSubmitted } from '../../../src/message/submitted.ts';
import { appErrorOf } from '../../helpers/app-error.ts';

const NOW = Date.parse('2026-11-21T10:00:00Z');
const prepare = (text: string) => prepareSubmitted(Buffer.from(text, 'utf8'), '<gen@example.com>', NOW);

describe('prepareSubmitted (SMTP special headers)', () => {
  it('applies the special headers and strips them, with Bcc, keeping everything else byte for byte', () => {
    const out = prepare(
      [
        'From: App <app@example.com>',
        'To: r@example.org',
        'Bcc: hidden@example.org',
        'AhaSend-Track-Opens: true',
        'ahasend-track-clicks: false',
        'AhaSend-Sandbox: yes',
        'AhaSend-Sandbox-Result: Bounce',
        'ahasend-metadata-retention: 7',
        'ahasend-data-retention: 0',
        'ahasend-tags: welcome, onboarding ,',
        'Subject: =?UTF-8?B?SGVsbG8g4pyT?= there',
        'Message-ID: <abc@client.example>',
        'Date: Sat, 21 Nov 2026 09:59:00 +0000',
        'X-Custom: kept',
        '',
        'Body line',
        '',
      ].join('\r\n'),
    );
    expect(out.options).to.deep.equal({
      trackOpens: true,
      trackClicks: false,
      sandbox: true,
      sandboxResult: 'bounce',
      metadataRetention: 7,
      dataRetention: 0,
      tags: ['welcome', 'onboarding'],
    });
    expect(out.messageId).to.equal('<abc@client.example>');
    expect(out.subject).to.equal('Hello ✓ there');
    const text = out.message.toString('utf8');
    expect(text).to.equal(
      [
        'From: App <app@example.com>',
        'To: r@example.org',
        'Subject: =?UTF-8?B?SGVsbG8g4pyT?= there',
        'Message-ID: <abc@client.example>',
        'Date: Sat, 21 Nov 2026 09:59:00 +0000',
        'X-Custom: kept',
        '',
        'Body line',
        '',
      ].join('\r\n'),
    );
  });

  it('adds Message-ID and Date when missing, and replaces a malformed Message-ID', () => {
    const out = prepare('From: a@example.com\r\nMessage-ID: not an id\r\nSubject: Hi\r\n\r\nx\r\n');
    expect(out.messageId).to.equal('<gen@example.com>');
    expect(out.message.toString()).to.equal(
      'Message-ID: <gen@example.com>\r\nDate: Sat, 21 Nov 2026 10:00:00 +0000\r\nFrom: a@example.com\r\nSubject: Hi\r\n\r\nx\r\n',
    );
  });

  it('strips a folded special header with its continuation lines, and turns bare LF into CRLF', () => {
    const out = prepare('From: a@example.com\nahasend-tags: one,\n two\nSubject: Hi\nDate: x\nMessage-ID: <m@x.example>\n\nline 1\nline 2\n');
    expect(out.options.tags).to.deep.equal(['one', 'two']);
    expect(out.message.toString()).to.equal('From: a@example.com\r\nSubject: Hi\r\nDate: x\r\nMessage-ID: <m@x.example>\r\n\r\nline 1\r\nline 2\r\n');
  });

  it('keeps 8-bit header bytes as they are and reads a raw UTF-8 subject', () => {
    const out = prepare('From: a@example.com\r\nSubject: Grüße\r\nDate: x\r\nMessage-ID: <m@x.example>\r\n\r\nbody');
    expect(out.subject).to.equal('Grüße');
    expect(out.message.toString('utf8')).to.contain('Subject: Grüße\r\n');
  });

  it('refuses bad special header values, naming the header', () => {
    expect(appErrorOf(() => prepare('From: a@example.com\r\nahasend-track-opens: maybe\r\n\r\nx'))).to.contain('ahasend-track-opens must be true or false');
    expect(appErrorOf(() => prepare('From: a@example.com\r\nAhaSend-Sandbox-Result: explode\r\n\r\nx'))).to.contain('ahasend-sandbox-result must be one of');
    expect(appErrorOf(() => prepare('From: a@example.com\r\nahasend-metadata-retention: 0\r\n\r\nx'))).to.contain('from 1 to 30');
    expect(appErrorOf(() => prepare('From: a@example.com\r\nahasend-data-retention: 31\r\n\r\nx'))).to.contain('from 0 to 30');
    expect(appErrorOf(() => prepare(`From: a@example.com\r\nahasend-tags: ${Array.from({ length: 11 }, (_, i) => `t${i}`).join(',')}\r\n\r\nx`))).to.contain(
      'at most 10 tags',
    );
  });

  it('refuses a message without exactly one From header, and drops a stray CR before a bare-LF blank line', () => {
    expect(appErrorOf(() => prepare('Subject: x\r\n\r\nbody'))).to.contain('no From header');
    expect(appErrorOf(() => prepare('From: a@example.com\r\nFrom: b@example.com\r\n\r\nbody'))).to.contain('more than one From');
    const out = prepare('From: a@example.com\r\nDate: x\r\nMessage-ID: <m@x.example>\r\n\nbody');
    expect(out.message.toString()).to.equal('From: a@example.com\r\nDate: x\r\nMessage-ID: <m@x.example>\r\n\r\nbody');
  });

  it('decodes Q and B encoded words, joining adjacent ones, and leaves unknown charsets alone', () => {
    expect(decodeWords('=?iso-8859-1?Q?Caf=E9_cr=E8me?=')).to.equal('Café crème');
    expect(decodeWords('=?UTF-8?B?SGk=?= =?UTF-8?B?IHRoZXJl?=')).to.equal('Hi there');
    expect(decodeWords('=?x-unknown?Q?abc?=')).to.equal('=?x-unknown?Q?abc?=');
  });

  it('keeps at most 998 characters of a long subject for the records, the message itself whole, never half a surrogate pair', () => {
    // 100 recipients share the message but each record held a copy: a 20 MB Subject was 2 GB of records.
    const long = '😀'.repeat(600);
    const out = prepare(`From: app@example.com\r\nSubject: =?UTF-8?B?${Buffer.from(long).toString('base64')}?=\r\n\r\nbody\r\n`);
    expect(out.subject).to.equal('😀'.repeat(499));
    expect(out.message.toString()).to.include(Buffer.from(long).toString('base64'));
    expect(prepare('From: app@example.com\r\nSubject: short\r\n\r\nx').subject).to.equal('short');
  });
});
