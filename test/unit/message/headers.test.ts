import { expect } from 'chai';
import { simpleParser, type AddressObject } from 'mailparser';
import { customHeaders, formatAddress } from '../../../src/message/headers.ts';
import { appErrorOf } from '../../helpers/app-error.ts';

const NO_FIELDS = { replyTo: false, cc: false };

describe('customHeaders', () => {
  it('returns nothing when the request has no headers', () => {
    expect(customHeaders(undefined, NO_FIELDS)).to.deep.equal([]);
  });

  it('keeps valid headers as name/value pairs in request order, names as given', () => {
    const out = customHeaders({ 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@example.com>', 'x-b': 'tab\there' }, NO_FIELDS);
    expect(out).to.deep.equal([
      ['X-Campaign', 'spring'],
      ['List-Unsubscribe', '<mailto:u@example.com>'],
      ['x-b', 'tab\there'],
    ]);
  });

  it('drops a message-id header in any letter case: the Message-ID is always generated', () => {
    expect(customHeaders({ 'Message-ID': '<mine@example.com>', 'X-Keep': '1' }, NO_FIELDS)).to.deep.equal([['X-Keep', '1']]);
    expect(customHeaders({ 'message-id': '<mine@example.com>' }, NO_FIELDS)).to.deep.equal([]);
  });

  for (const value of ['a\r\nBcc: victim@example.org', 'a\nb', 'a\rb']) {
    it(`refuses a value with a line break (${JSON.stringify(value)}): no header injection`, () => {
      expect(appErrorOf(() => customHeaders({ 'X-Note': value }, NO_FIELDS))).to.match(/X-Note/);
    });
  }

  it('refuses a value with non-ASCII or control characters', () => {
    appErrorOf(() => customHeaders({ 'X-Note': 'caf\u00e9' }, NO_FIELDS));
    appErrorOf(() => customHeaders({ 'X-Note': 'nul\u0000' }, NO_FIELDS));
  });

  it('accepts a value of 998 characters and refuses 999', () => {
    expect(customHeaders({ 'X-Long': 'v'.repeat(998) }, NO_FIELDS)).to.have.length(1);
    appErrorOf(() => customHeaders({ 'X-Long': 'v'.repeat(999) }, NO_FIELDS));
  });

  for (const name of ['X Space', 'X:Colon', 'X-Caf\u00e9', '', 'X-\t', 'X-\u0001']) {
    it(`refuses the header name ${JSON.stringify(name)}`, () => {
      expect(appErrorOf(() => customHeaders({ [name]: 'v' }, NO_FIELDS))).to.match(/invalid header name/);
    });
  }

  for (const name of ['From', 'to', 'BCC', 'Subject', 'Date', 'MIME-Version', 'Content-Type', 'content-transfer-encoding', 'Return-Path', 'DKIM-Signature']) {
    it(`refuses ${name}, which Postilion writes from the request fields`, () => {
      expect(appErrorOf(() => customHeaders({ [name]: 'x' }, NO_FIELDS))).to.match(/cannot be given as a header/);
    });
  }

  it('allows reply-to without the reply_to field and refuses it with the field', () => {
    expect(customHeaders({ 'Reply-To': 'r@example.com' }, NO_FIELDS)).to.deep.equal([['Reply-To', 'r@example.com']]);
    expect(appErrorOf(() => customHeaders({ 'reply-to': 'r@example.com' }, { replyTo: true, cc: false }))).to.match(/reply_to/);
  });

  it('allows cc without the cc field and refuses it with the field', () => {
    expect(customHeaders({ Cc: 'c@example.com' }, NO_FIELDS)).to.deep.equal([['Cc', 'c@example.com']]);
    expect(appErrorOf(() => customHeaders({ CC: 'c@example.com' }, { replyTo: false, cc: true }))).to.match(/cc/);
  });

  it('refuses the same header given twice in different letter cases', () => {
    expect(appErrorOf(() => customHeaders({ 'X-Dup': '1', 'x-dup': '2' }, NO_FIELDS))).to.match(/twice/);
  });
});

describe('formatAddress', () => {
  it('gives the bare address when there is no name or only spaces', () => {
    expect(formatAddress({ email: 'a@example.com' })).to.equal('a@example.com');
    expect(formatAddress({ email: 'a@example.com', name: '   ' })).to.equal('a@example.com');
  });

  it('quotes an ASCII name, trimmed, escaping quotes and backslashes', () => {
    expect(formatAddress({ email: 'a@example.com', name: ' Jane Doe ' })).to.equal('"Jane Doe" <a@example.com>');
    expect(formatAddress({ email: 'a@example.com', name: 'Jane "JD" Doe' })).to.equal('"Jane \\"JD\\" Doe" <a@example.com>');
    expect(formatAddress({ email: 'a@example.com', name: 'back\\slash' })).to.equal('"back\\\\slash" <a@example.com>');
  });

  for (const name of ['Eve\r\nX-Injected: yes', 'Eve\nX-Injected: yes', 'Eve\r\n\r\nbody', 'Eve\rX', '\u00e9\r\nX-Injected: yes']) {
    it(`never lets the name ${JSON.stringify(name)} put a line break into the header`, async () => {
      const formatted = formatAddress({ email: 'a@example.com', name });
      expect(formatted).to.not.match(/[\r\n]/);
      const parsed = await simpleParser(`To: ${formatted}\r\nSubject: kept\r\n\r\n`);
      expect(parsed.headers.has('x-injected')).to.equal(false);
      expect(parsed.subject).to.equal('kept');
      expect((parsed.to as AddressObject).value[0]!.address).to.equal('a@example.com');
    });
  }

  it('MIME-encodes a non-ASCII name so the header stays ASCII and decodes back to the name', async () => {
    const name = 'J\u00f6hn D\u0153 \u4e16\u754c';
    const formatted = formatAddress({ email: 'a@example.com', name });
    expect(formatted).to.match(/^[\x20-\x7e]+$/);
    expect(formatted).to.match(/=\?UTF-8\?Q\?/i);
    const parsed = await simpleParser(`To: ${formatted}\r\n\r\n`);
    const to = parsed.to as AddressObject;
    expect(to.value[0]).to.include({ name, address: 'a@example.com' });
  });

  it('splits a long non-ASCII name into several encoded words that decode to the whole name', async () => {
    const name = `x${'\u00e9'.repeat(80)}`;
    const formatted = formatAddress({ email: 'a@example.com', name });
    expect(formatted.match(/=\?UTF-8\?Q\?/gi)?.length).to.be.greaterThan(1);
    const parsed = await simpleParser(`To: ${formatted}\r\n\r\n`);
    expect((parsed.to as AddressObject).value[0]!.name).to.equal(name);
  });
});
