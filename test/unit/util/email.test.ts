import { expect } from 'chai';
import { isMailboxAddress, isUtf8MailboxAddress, needsSmtpUtf8 } from '../../../src/util/email.ts';
import { envelopeAddress } from '../../../src/smtp/envelope-address.ts';

describe('SMTPUTF8 addresses (RFC 6531, RFC 6532)', () => {
  it('takes a UTF-8 local part at an ASCII domain, which the ASCII-only rule of the API refuses', () => {
    expect(isUtf8MailboxAddress('jürgen@example.org')).to.equal(true);
    expect(isUtf8MailboxAddress('用户.名@example.org')).to.equal(true);
    expect(isMailboxAddress('jürgen@example.org')).to.equal(false);
    expect(isUtf8MailboxAddress('ann@example.org')).to.equal(true);
  });

  it('refuses a local part over 64 octets (counted in UTF-8), dots at its edges, spaces, and a U-label domain', () => {
    expect(isUtf8MailboxAddress(`${'ü'.repeat(32)}@example.org`)).to.equal(true);
    expect(isUtf8MailboxAddress(`${'ü'.repeat(33)}@example.org`)).to.equal(false);
    expect(isUtf8MailboxAddress('.jürgen@example.org')).to.equal(false);
    expect(isUtf8MailboxAddress('jür..gen@example.org')).to.equal(false);
    expect(isUtf8MailboxAddress('jür gen@example.org')).to.equal(false);
    expect(isUtf8MailboxAddress('jürgen@exämple.org')).to.equal(false);
  });

  it('keeps domains as A-labels, local parts as sent; null for a name with no IDNA form', () => {
    expect(envelopeAddress('jürgen@Exämple.org')).to.equal('jürgen@xn--exmple-cua.org');
    expect(envelopeAddress('ann@EXAMPLE.org')).to.equal('ann@example.org');
    expect(envelopeAddress('ann@[192.0.2.1]')).to.equal('ann@[192.0.2.1]');
    expect(envelopeAddress('ann@exa mple.org')).to.equal(null);
    expect(envelopeAddress('no-at-sign')).to.equal(null);
  });

  it('needs SMTPUTF8 only for non-ASCII', () => {
    expect(needsSmtpUtf8('jürgen@example.org')).to.equal(true);
    expect(needsSmtpUtf8('user@xn--exmple-cua.org')).to.equal(false);
  });
});
