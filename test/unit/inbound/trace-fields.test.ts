import { expect } from 'chai';
import { withTraceFields } from '../../../src/inbound/trace-fields.ts';

const TRACE = 'Received-SPF: pass\r\nAuthentication-Results: mx.example.net; spf=pass\r\n';

describe('withTraceFields', () => {
  it('puts the trace fields on top of the header block as it is', () => {
    const head = Buffer.from('From: a@example.com\r\nSubject: x\r\n\r\n');
    expect(withTraceFields(head, TRACE, 'mx.example.net').toString()).to.equal(TRACE + head.toString());
  });

  it('drops an Authentication-Results that claims our authserv-id (folded too), keeps those of other hosts', () => {
    const head = Buffer.from(
      [
        'Authentication-Results: MX.example.net; dmarc=pass',
        'Authentication-Results:',
        ' mx.example.net;',
        '  dkim=pass',
        'Authentication-Results: mx.example.net.evil; dkim=pass',
        'Authentication-Results: upstream.example.org; spf=fail',
        'From: a@example.com',
        '',
        '',
      ].join('\r\n'),
    );
    expect(withTraceFields(head, TRACE, 'mx.example.net').toString()).to.equal(
      TRACE +
        [
          'Authentication-Results: mx.example.net.evil; dkim=pass',
          'Authentication-Results: upstream.example.org; spf=fail',
          'From: a@example.com',
          '',
          '',
        ].join('\r\n'),
    );
  });
});
