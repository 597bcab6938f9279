import { expect } from 'chai';
import { dmarcAction } from '../../../src/inbound/dmarc-policy.ts';
import type { DmarcVerdict } from '../../../src/store/records.ts';

const fail = (policy: DmarcVerdict['policy'], pct = 100): DmarcVerdict => ({ result: 'fail', domain: 'sender.test', policy, pct });

describe('dmarcAction', () => {
  it('monitor accepts everything, a failure under p=reject too', () => {
    expect(dmarcAction('monitor', fail('reject'), 0)).to.deep.equal({ kind: 'accept' });
  });

  it('enforce rejects a failure under p=reject, with the domain and policy in the reason', () => {
    const action = dmarcAction('enforce', fail('reject'), 0);
    expect(action.kind).to.equal('reject');
    expect(action.kind !== 'accept' && action.reason).to.contain('DMARC policy of sender.test (p=reject)');
  });

  it('enforce quarantines a failure under p=quarantine and accepts one under p=none', () => {
    expect(dmarcAction('enforce', fail('quarantine'), 0).kind).to.equal('quarantine');
    expect(dmarcAction('enforce', fail('none'), 0).kind).to.equal('accept');
  });

  it('enforce accepts a pass, no record, a DNS error and a message it could not evaluate', () => {
    for (const result of ['pass', 'none', 'temperror', 'permerror'])
      expect(dmarcAction('enforce', { ...fail('reject'), result }, 0).kind, result).to.equal('accept');
    expect(dmarcAction('enforce', null, 0).kind).to.equal('accept');
  });

  it('pct= samples: outside the share a failure gets the next less strict policy', () => {
    expect(dmarcAction('enforce', fail('reject', 30), 29.9).kind).to.equal('reject');
    expect(dmarcAction('enforce', fail('reject', 30), 30).kind).to.equal('quarantine');
    expect(dmarcAction('enforce', fail('quarantine', 30), 30).kind).to.equal('accept');
    expect(dmarcAction('enforce', fail('reject', 0), 0).kind).to.equal('quarantine');
  });
});
