import { expect } from 'chai';
import { matches } from '../../../src/inbound/policy.ts';
import { parseRecipient } from '../../../src/inbound/routes.ts';
import { AppError } from '../../../src/util/errors.ts';
import { newSecret, ROUTE_SECRET_PREFIX } from '../../../src/delivery/signing.ts';

function refusal(text: string): string {
  try {
    parseRecipient(text);
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).status).to.equal(400);
    return (err as Error).message;
  }
  throw new Error(`${JSON.stringify(text)} was accepted`);
}

describe('route recipient patterns', () => {
  it('accepts an exact address and the three wildcard kinds, lower-cased, the domain normalised', () => {
    const cases: Array<[string, string]> = [
      ['Support@Example.COM', 'support@example.com'],
      ['*@example.com', '*@example.com'],
      ['Ticket-*@example.com', 'ticket-*@example.com'],
      ['*-Support@example.com', '*-support@example.com'],
      ['  a.b+c@example.com.  ', 'a.b+c@example.com'],
    ];
    for (const [text, recipient] of cases) expect(parseRecipient(text), text).to.deep.equal({ recipient, domainName: 'example.com' });
  });

  it('refuses two stars, a star inside the local part, no local part or domain, spaces, control characters and over-long text', () => {
    const cases: Array<[string, string]> = [
      ['', 'is not valid'],
      ['no-at-sign', 'has no local part or no domain'],
      ['@example.com', 'has no local part or no domain'],
      ['support@', 'has no local part or no domain'],
      ['**@example.com', 'may have one * only'],
      ['*a*@example.com', 'may have one * only'],
      ['tick*et@example.com', 'may have one * only'],
      ['a b@example.com', 'is not valid'],
      ['a\u0007b@example.com', 'is not valid'],
      ['a\r\nb@example.com', 'is not valid'],
      ['.a@example.com', 'has an invalid local part'],
      ['a..b@example.com', 'has an invalid local part'],
      ['"quoted"@example.com', 'has an invalid local part'],
      ['é@example.com', 'has an invalid local part'],
      [`${'a'.repeat(65)}@example.com`, 'has an invalid local part'],
      [`a@${'b'.repeat(250)}.com`, 'is not valid'],
    ];
    for (const [text, message] of cases) {
      const said = refusal(text);
      expect(said, JSON.stringify(text)).to.include(message);
      expect(said.length, 'the message quotes at most 100 characters of the input').to.be.below(400);
    }
  });

  it("matches exact addresses and wildcards case-insensitively, only at the pattern's domain", () => {
    const yes: Array<[string, string]> = [
      ['support@example.com', 'Support@EXAMPLE.com'],
      ['*@example.com', 'anyone@example.com'],
      ['ticket-*@example.com', 'ticket-42@example.com'],
      ['ticket-*@example.com', 'ticket-@example.com'],
      ['*-support@example.com', 'billing-support@example.com'],
    ];
    const no: Array<[string, string]> = [
      ['support@example.com', 'support2@example.com'],
      ['support@example.com', 'support@example.org'],
      ['*@example.com', 'anyone@sub.example.com'],
      ['ticket-*@example.com', 'tick@example.com'],
      ['ticket-*@example.com', 'xticket-1@example.com'],
      ['*-support@example.com', 'support@example.com'],
      ['*-support@example.com', 'a-support-b@example.com'],
    ];
    for (const [pattern, address] of yes) expect(matches(pattern, address), `${pattern} ~ ${address}`).to.equal(true);
    for (const [pattern, address] of no) expect(matches(pattern, address), `${pattern} !~ ${address}`).to.equal(false);
  });

  it('makes route secrets of aha-rsec- and 64 alphanumerics, each different', () => {
    const secrets = new Set(Array.from({ length: 200 }, () => newSecret(ROUTE_SECRET_PREFIX)));
    expect(secrets.size).to.equal(200);
    for (const secret of secrets) expect(secret).to.match(/^aha-rsec-[A-Za-z0-9]{64}$/);
  });
});
