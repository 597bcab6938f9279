import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { BounceRulesError, classify, enhancedCodeOf, parseBounceRules } from '../../../src/bounce/rules.ts';

const rules = parseBounceRules(readFileSync(new URL('../../../config/bounce-rules', import.meta.url), 'utf8'));
const verdict = (code: number, text: string) => classify({ code, enhanced: enhancedCodeOf(text), text }, rules);

describe('bounce rules (config/bounce-rules)', () => {
  it('treats 2xx as delivered, without a classification', () => {
    expect(verdict(250, '2.0.0 OK queued')).to.deep.equal({ outcome: 'delivered' });
  });

  it('classifies common permanent replies', () => {
    expect(verdict(550, '5.1.1 The email account that you tried to reach does not exist')).to.deep.equal({
      outcome: 'bounced',
      classification: 'InvalidRecipient',
    });
    expect(verdict(550, '5.1.2 Host unknown')).to.deep.equal({ outcome: 'bounced', classification: 'BadDomain' });
    expect(verdict(550, '5.2.1 The mailbox is disabled')).to.deep.equal({ outcome: 'bounced', classification: 'InactiveMailbox' });
    expect(verdict(554, '5.7.1 Message rejected as spam')).to.deep.equal({ outcome: 'bounced', classification: 'PolicyRelated' });
    expect(verdict(550, '5.7.26 Unauthenticated email is not accepted due to DMARC policy')).to.deep.equal({
      outcome: 'bounced',
      classification: 'AuthenticationFailed',
    });
    expect(verdict(500, '5.5.2 Syntax error')).to.deep.equal({ outcome: 'bounced', classification: 'ProtocolErrors' });
    expect(verdict(554, 'no idea what happened')).to.deep.equal({ outcome: 'bounced', classification: 'Uncategorized' });
  });

  it('moves 5xx replies that mean "later" to a retry, and a final 4xx to a bounce', () => {
    expect(verdict(552, '5.2.2 Mailbox full')).to.deep.equal({ outcome: 'deferred', classification: 'QuotaIssues' });
    expect(verdict(550, '5.7.1 Too many messages, try again later')).to.deep.equal({ outcome: 'deferred', classification: 'TransientFailure' });
    expect(verdict(450, '4.1.1 User unknown: does not exist')).to.deep.equal({ outcome: 'bounced', classification: 'InvalidRecipient' });
  });

  it('defers other 4xx replies', () => {
    expect(verdict(451, '4.7.1 Greylisted')).to.deep.equal({ outcome: 'deferred', classification: 'PolicyRelated' });
    expect(verdict(421, 'Service not available')).to.deep.equal({ outcome: 'deferred', classification: 'TransientFailure' });
  });

  it('reads the enhanced status code at the start of the text only', () => {
    expect(enhancedCodeOf('5.1.1 <a@b> unknown')).to.equal('5.1.1');
    expect(enhancedCodeOf('mailbox 5.1.1 unknown')).to.equal('');
  });

  it('refuses a malformed rules file, naming the line', () => {
    expect(() => parseBounceRules('# ok\n5xx bounce Nonsense /x/', 'f')).to.throw(BounceRulesError, 'f:2: unknown classification "Nonsense"');
    expect(() => parseBounceRules('5xx sometimes InvalidRecipient /x/', 'f')).to.throw(BounceRulesError, 'f:1: expected');
    expect(() => parseBounceRules('4xx keep TransientFailure /(/', 'f')).to.throw(BounceRulesError, 'f:1: bad regular expression');
    expect(() => parseBounceRules('4xx keep TransientFailure /x/g', 'f')).to.throw(BounceRulesError, 'only the "i" flag');
  });
});
