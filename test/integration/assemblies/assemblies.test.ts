import { expect } from 'chai';
import { configKeys } from '../../../src/config/reload.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';

/** The assemblies of a daemon whose value at `key` is theirs: a section is a key or a dotted prefix of keys. */
function owners(server: TestServer, key: string): string[] {
  return server.daemon.assemblies.filter((a) => a.sections.some((s) => key === s || key.startsWith(`${s}.`))).map((a) => a.name);
}

describe('the daemon’s assemblies', function () {
  this.timeout(60_000);
  let server: TestServer;

  before(async () => {
    server = await startServer({ config: { smtp: { submission: { enabled: true, starttls_port: 0, tls_port: null } } } });
  });
  after(async () => server?.stop());

  it('own each key of the configuration exactly once', () => {
    const wrong = configKeys()
      .map((key) => ({ key, owners: owners(server, key) }))
      .filter((k) => k.owners.length !== 1);
    expect(wrong, 'keys with no owner or with several').to.deep.equal([]);
  });

  it('name sections that exist', () => {
    const keys = configKeys();
    const unknown = server.daemon.assemblies.flatMap((a) =>
      a.sections.filter((s) => !keys.some((k) => k === s || k.startsWith(`${s}.`))).map((s) => `${a.name}: ${s}`),
    );
    expect(unknown).to.deep.equal([]);
  });

  it('have names of their own, and every listener is ready while the daemon runs', () => {
    const names = server.daemon.assemblies.map((a) => a.name);
    expect(new Set(names).size).to.equal(names.length);
    const lines = server.daemon.readiness();
    expect(
      lines.filter((l) => !l.ok),
      JSON.stringify(lines),
    ).to.deep.equal([]);
    expect(lines.map((l) => l.name)).to.include.members(['store', 'storage', 'api', 'control', 'smtp-submission']);
  });
});
