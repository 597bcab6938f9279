import { expect } from 'chai';
import { validateConfig } from '../../../src/config/load.ts';
import { checkTlsReportingFrom } from '../../../src/doctor/doctor.ts';
import type { DomainRecord } from '../../../src/store/records.ts';

describe('doctor: the address TLS reports by mail go out from', () => {
  const domains = [{ name: 'example.com' }, { name: 'Reports.Example.NET' }] as DomainRecord[];
  const reporting = (t: Record<string, unknown>) => validateConfig({ tls_reporting: t }, 'test').tls_reporting;

  it('checks nothing while TLS reporting is off', () => {
    expect(checkTlsReportingFrom(reporting({ enabled: false }), domains)).to.equal(null);
  });

  it('passes an address at a domain of this server, in any case', () => {
    const check = checkTlsReportingFrom(reporting({ enabled: true, from: 'tlsrpt@reports.example.net' }), domains);
    expect(check).to.include({ check: 'tls-reporting', status: 'OK' });
  });

  it('fails an address at another domain, naming it and what to do', () => {
    const check = checkTlsReportingFrom(reporting({ enabled: true, from: 'tlsrpt@elsewhere.org' }), domains)!;
    expect(check.status).to.equal('FAIL');
    expect(check.reason).to.contain('tlsrpt@elsewhere.org').and.to.contain('postilion domains add');
  });
});
