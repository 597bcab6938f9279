import { expect } from 'chai';
import { validateConfig } from '../../../src/config/load.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { trackingGet } from '../../helpers/tracking.ts';

const POLICY_URL = 'https://mta-sts.example.com/.well-known/mta-sts.txt';
const ENFORCE = 'version: STSv1\r\nmode: enforce\r\nmx: mx1.example.com\r\nmx: *.mx.example.net\r\nmax_age: 86400\r\n';

describe('the published MTA-STS policy (mta_sts_policy) on the tracking and API listeners', function () {
  this.timeout(30_000);
  let server: TestServer;

  before(async () => {
    server = await startServer({
      config: {
        tracking: {},
        mta_sts_policy: { domains: { 'example.com': { mode: 'enforce', mx: ['mx1.example.com', '*.mx.example.net'], max_age_seconds: 86400 } } },
      },
    });
  });
  after(async () => server?.stop());

  const listeners = () => [
    { name: 'tracking', url: server.daemon.parts.tracking.url! },
    { name: 'api', url: server.url },
  ];

  it('serves the policy as text/plain to anyone asking for mta-sts.<domain>, on both listeners', async () => {
    for (const { name, url } of listeners()) {
      const res = await trackingGet(url, POLICY_URL);
      expect(res.status, name).to.equal(200);
      expect(res.headers['content-type'], name).to.match(/^text\/plain\b/);
      expect(res.body.toString('utf8'), name).to.equal(ENFORCE);
      const head = await trackingGet(url, POLICY_URL, {}, 'HEAD');
      expect(head.status, name).to.equal(200);
      expect(head.body.length, name).to.equal(0);
    }
  });

  it('answers 404 for a host without a policy, and for another path of the policy host', async () => {
    for (const { name, url } of listeners()) {
      expect((await trackingGet(url, 'https://mta-sts.example.org/.well-known/mta-sts.txt')).status, name).to.equal(404);
      expect((await trackingGet(url, 'https://mta-sts.example.com/.well-known/other.txt')).status, name).to.equal(404);
    }
  });

  it('serves a changed policy after a reload, without a restart', async () => {
    const base = server.daemon.runningConfig;
    const next = validateConfig(
      { ...base, mta_sts_policy: { ...base.mta_sts_policy, domains: { 'example.com': { mode: 'testing', mx: ['mx2.example.com'], max_age_seconds: 3600 } } } },
      'test',
    );
    const published = async () => (await server.daemon.metrics.render()).match(/^postilion_mta_sts_policies\{mode="(enforce|testing)"\} (\d+)$/gm)?.sort();
    expect(await published()).to.deep.equal(['postilion_mta_sts_policies{mode="enforce"} 1', 'postilion_mta_sts_policies{mode="testing"} 0']);
    const report = server.daemon.reload(next);
    expect(report.applied).to.deep.equal(['mta_sts_policy.domains']);
    expect(await published()).to.deep.equal(['postilion_mta_sts_policies{mode="enforce"} 0', 'postilion_mta_sts_policies{mode="testing"} 1']);
    const testing = 'version: STSv1\r\nmode: testing\r\nmx: mx2.example.com\r\nmax_age: 3600\r\n';
    for (const { name, url } of listeners()) {
      // The tracking thread takes the new settings by message: asked again until it has.
      let text = '';
      for (let i = 0; i < 50 && text !== testing; i++) {
        text = (await trackingGet(url, POLICY_URL)).body.toString('utf8');
        if (text !== testing) await new Promise((r) => setTimeout(r, 20));
      }
      expect(text, name).to.equal(testing);
    }
    server.daemon.reload(base);
  });
});
