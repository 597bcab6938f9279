import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';

/** `postilion keys create --ip`: the operator's keys get the API's allow-list rules, whichever way the CLI goes. */
describe('postilion keys create --ip', () => {
  let server: TestServer;
  let configPath: string;

  before(async () => {
    server = await startServer();
    configPath = join(server.dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(server.dir, 'data')}\nkeys:\n  dir: ${join(server.dir, 'keys')}\nlog:\n  level: silent\n`);
  });
  after(async () => server.stop());

  async function createKey(ips: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const argv = [
      'node',
      'postilion',
      '--config',
      configPath,
      'keys',
      'create',
      '--account',
      server.accountId,
      '--label',
      'cli',
      ...ips.flatMap((ip) => ['--ip', ip]),
    ];
    const code = await main(argv, { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  async function expectRefusals(): Promise<void> {
    for (const [ips, family] of [
      [['0.0.0.0/1', '128.0.0.0/1'], 'IPv4'],
      [['::/1', '8000::/1'], 'IPv6'],
    ] as const) {
      const res = await createKey([...ips]);
      expect(res.code, res.err).to.equal(2);
      expect(res.err).to.equal(`postilion: ip_allow_list: its entries together allow every ${family} address\n`);
      expect(res.out).to.equal('');
    }
  }

  it('refuses a list whose entries together allow every IPv4 or IPv6 address, on the running daemon', async () => {
    await expectRefusals();
  });

  it('refuses the same on the stopped store, and creates a key with a list that leaves addresses out', async () => {
    await server.daemon.stop();
    await expectRefusals();
    const res = await createKey(['0.0.0.0/1', '128.0.0.0/2']);
    expect(res.code, res.err).to.equal(0);
    expect(res.out).to.match(/API key \(shown once\): aha-sk-/);
  });
});
