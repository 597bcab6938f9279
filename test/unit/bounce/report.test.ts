import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseBounceRules } from '../../../src/bounce/rules.ts';
import { parseArf, parseBounce } from '../../../src/bounce/report.ts';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '../../fixtures/bounces');
const rules = parseBounceRules(readFileSync(join(dirname(fileURLToPath(import.meta.url)), '../../../config/bounce-rules'), 'utf8'));
const fixture = (name: string) => readFileSync(join(FIXTURES, name));
const ORIGINAL = '<01a1fdfb-3448-7290-b0f9-bd172324b836@example.com>';

describe('reading bounces (RFC 3464 and otherwise)', () => {
  const cases = [
    { file: 'postfix.eml', recipient: 'ann@example.org', status: '5.1.1', classification: 'InvalidRecipient', mta: 'mx.example.org' },
    { file: 'exim.eml', recipient: 'bob@example.net', status: '5.2.1', classification: 'InactiveMailbox', mta: 'mail.example.net' },
    {
      file: 'exchange.eml',
      recipient: 'carol@example.com',
      status: '5.1.10',
      classification: 'InvalidRecipient',
      mta: 'AM0PR01MB0001.eurprd01.prod.outlook.example.com',
    },
    { file: 'gmail.eml', recipient: 'dave@example.org', status: '5.1.1', classification: 'InvalidRecipient', mta: 'googlemail.com' },
  ];
  for (const c of cases) {
    it(`reads ${c.file}: a failed recipient, its status, diagnostic and classification, and the original Message-ID`, () => {
      const report = parseBounce(fixture(c.file), rules);
      expect(report.kind).to.equal('dsn');
      expect(report.reportingMta).to.equal(c.mta);
      expect(report.originalMessageId).to.equal(ORIGINAL);
      expect(report.recipients).to.have.length(1);
      const [r] = report.recipients;
      expect(r).to.include({ recipient: c.recipient, action: 'failed', status: c.status, permanent: true, smtpCode: 550 });
      expect(r!.classification, r!.diagnostic).to.equal(c.classification);
      expect(r!.diagnostic).to.match(/^550[ -]5\./);
    });
  }

  it('reads folded Diagnostic-Code lines whole', () => {
    const [r] = parseBounce(fixture('gmail.eml'), rules).recipients;
    expect(r!.diagnostic).to.contain('does not exist. Please try double-checking');
  });

  it('a delayed DSN is not a failure', () => {
    const report = parseBounce(fixture('delayed.eml'), rules);
    expect(report.kind).to.equal('dsn');
    expect(report.recipients[0]).to.include({ recipient: 'erin@example.org', action: 'delayed', status: '4.4.7', permanent: false });
  });

  it('several recipients with mixed actions', () => {
    const raw = fixture('postfix.eml')
      .toString('latin1')
      .replace(
        'Final-Recipient: rfc822; ann@example.org',
        'Final-Recipient: rfc822; zed@example.org\r\nAction: delivered\r\nStatus: 2.0.0\r\n\r\nFinal-Recipient: rfc822; ann@example.org',
      );
    const report = parseBounce(raw, rules);
    expect(report.recipients.map((r) => [r.recipient, r.action])).to.deep.equal([
      ['zed@example.org', 'delivered'],
      ['ann@example.org', 'failed'],
    ]);
  });

  it('a bounce without a DSN part is classified by its text', () => {
    const report = parseBounce(fixture('plain-bounce.eml'), rules);
    expect(report.kind).to.equal('bounce');
    expect(report.recipients[0]).to.include({
      recipient: 'frank@old.example.net',
      action: 'failed',
      status: '5.1.1',
      permanent: true,
      classification: 'InvalidRecipient',
    });
  });

  it('auto-replies are not bounces', () => {
    expect(parseBounce(fixture('out-of-office.eml'), rules).kind).to.equal('auto-reply');
    expect(parseBounce(fixture('vacation.eml'), rules).kind).to.equal('auto-reply');
  });

  it('malformed and hostile input is unknown, never a throw or a hang', () => {
    expect(parseBounce('', rules).kind).to.equal('unknown');
    expect(parseBounce(Buffer.from([0, 1, 2, 255, 254, 10, 13]), rules).kind).to.equal('unknown');
    expect(parseBounce('Subject: hello\r\n\r\njust a note', rules).kind).to.equal('unknown');
    const big = `From: someone@example.net\r\nSubject: x\r\n\r\n${'a'.repeat(10 * 1024 * 1024)}`;
    const started = Date.now();
    expect(parseBounce(big, rules).kind).to.equal('unknown');
    let nested = 'Content-Type: text/plain\r\n\r\nend';
    for (let i = 0; i < 200; i++) nested = `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n${nested}\r\n--b${i}--\r\n`;
    expect(parseBounce(`From: x@example.net\r\n${nested}`, rules).kind).to.equal('unknown');
    let many = 'From: MAILER-DAEMON@x.example\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=B\r\n\r\n';
    for (let i = 0; i < 5000; i++) many += '--B\r\nContent-Type: text/plain\r\n\r\nx\r\n';
    expect(() => parseBounce(many, rules)).not.to.throw();
    expect(Date.now() - started).to.be.below(5000);
  });
});

describe('reading feedback-loop reports (RFC 5965)', () => {
  it('reads an abuse report with the original message enclosed', () => {
    const report = parseArf(fixture('arf.eml'))!;
    expect(report).to.include({
      feedbackType: 'abuse',
      userAgent: 'SomeGenerator/1.0',
      originalRcptTo: 'ivan@example.net',
      sourceIp: '192.0.2.10',
      originalMessageId: ORIGINAL,
      originalTo: 'ivan@example.net',
    });
    expect(report.originalReturnPath).to.match(/^bounces\+[0-9a-f]{48}@rp\.example\.com$/);
  });

  it('reads one with only the original headers', () => {
    const report = parseArf(fixture('arf-headers-only.eml'))!;
    expect(report).to.include({
      feedbackType: 'abuse',
      userAgent: 'ISP-FBL/2.1',
      originalMessageId: ORIGINAL,
      originalTo: 'judy@example.net',
      originalReturnPath: '',
    });
  });

  it('anything else is not a report', () => {
    expect(parseArf(fixture('postfix.eml'))).to.equal(null);
    expect(parseArf('')).to.equal(null);
    expect(parseArf('From: a@example.net\r\n\r\nspam!')).to.equal(null);
  });
});
