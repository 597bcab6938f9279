import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { buildDsn, dsnStatus, headerBlock, rfc5322Date, type DsnInput } from '../../../src/bounce/dsn.ts';

const input = (over: Partial<DsnInput['recipient']> = {}, headers: string | null = 'From: a@x.example\r\nSubject: Hi\r\n'): DsnInput => ({
  reportingMta: 'mx.postilion.test',
  from: 'mailer-daemon@x.example',
  to: 'dsn@x.example',
  messageId: '<r1@x.example>',
  date: new Date('2026-11-21T10:00:00Z'),
  boundary: '=_b1',
  original: { id: 'orig-1', arrivalDate: new Date('2026-11-21T09:00:00Z'), headers },
  recipient: {
    address: 'gone@y.example',
    action: 'failed',
    status: '5.1.1',
    remoteMta: 'mx.y.example',
    diagnostic: '550 5.1.1 no such user',
    lastAttempt: new Date('2026-11-21T09:59:00Z'),
    explanation: 'The receiving server refused it permanently.',
    ...over,
  },
});

describe('DSN (RFC 3464) building', () => {
  it('builds a multipart/report with the human part, the delivery-status fields and the original headers', async () => {
    const text = buildDsn(input());
    expect(text).to.not.match(/[^\r]\n/);
    const parsed = await simpleParser(text);
    expect(parsed.subject).to.equal('Undelivered Mail Returned to Sender');
    expect(parsed.date?.toISOString()).to.equal('2026-11-21T10:00:00.000Z');
    const status = text.slice(text.indexOf('Content-Type: message/delivery-status'));
    const fields = status.split('\r\n');
    expect(fields).to.include.members([
      'Reporting-MTA: dns; mx.postilion.test',
      'X-Postilion-Queue-ID: orig-1',
      'Arrival-Date: Sat, 21 Nov 2026 09:00:00 +0000',
      'Final-Recipient: rfc822; gone@y.example',
      'Action: failed',
      'Status: 5.1.1',
      'Remote-MTA: dns; mx.y.example',
      'Diagnostic-Code: smtp; 550 5.1.1 no such user',
      'Last-Attempt-Date: Sat, 21 Nov 2026 09:59:00 +0000',
    ]);
    // Per-message fields, an empty line, then the per-recipient fields.
    expect(status).to.contain('Arrival-Date: Sat, 21 Nov 2026 09:00:00 +0000\r\n\r\nFinal-Recipient');
    expect(text).to.contain('Content-Type: text/rfc822-headers\r\n\r\nFrom: a@x.example\r\nSubject: Hi\r\n');
    expect(text.endsWith('--=_b1--\r\n')).to.equal(true);
  });

  it('leaves out what it does not have: no server reply, no original headers', () => {
    const text = buildDsn(input({ remoteMta: null, diagnostic: null, status: '4.4.7' }, null));
    expect(text).to.not.contain('Remote-MTA');
    expect(text).to.not.contain('Diagnostic-Code');
    expect(text).to.not.contain('text/rfc822-headers');
    expect(text).to.contain('Status: 4.4.7');
  });

  it('keeps report fields on 7-bit lines: line breaks and non-ASCII in a reply cannot inject fields', () => {
    const text = buildDsn(input({ diagnostic: '550 bad\r\nAction: delivered ünïcode ' + 'x '.repeat(60) }));
    expect(text).to.not.contain('\r\nAction: delivered');
    expect(text).to.match(/Diagnostic-Code: smtp; 550 bad Action: delivered \?n\?code/);
    for (const line of text.split('\r\n')) expect(line.length, line).to.be.at.most(998);
    // Long fields are folded: the continuation starts with a space.
    expect(text).to.match(/\r\n x x/);
  });

  it('reports the enhanced code when the reply had one, else one implied by the outcome', () => {
    expect(dsnStatus(550, '5.1.1', 'bounced')).to.equal('5.1.1');
    expect(dsnStatus(550, '', 'bounced')).to.equal('5.0.0');
    expect(dsnStatus(451, '4.7.1', 'failed')).to.equal('4.7.1');
    expect(dsnStatus(451, '', 'failed')).to.equal('4.4.7');
    expect(dsnStatus(0, '', 'failed')).to.equal('4.4.7');
  });

  it('finds the header block of a message and formats RFC 5322 dates', () => {
    expect(headerBlock('A: 1\r\nB: 2\r\n\r\nbody\r\n')).to.equal('A: 1\r\nB: 2');
    expect(headerBlock('A: 1\nB: 2\n\nbody')).to.equal('A: 1\nB: 2');
    expect(headerBlock('A: 1\r\n')).to.equal('A: 1\r\n');
    expect(rfc5322Date(new Date('2026-01-02T03:04:05Z'))).to.equal('Fri, 02 Jan 2026 03:04:05 +0000');
  });
});
