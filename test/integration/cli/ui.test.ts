import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import { ControlServer, type ControlHandlers } from '../../../src/control/server.ts';
import { uiSignIn, type LoginLinkSessions } from '../../../src/dashboard/login-links.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { ManualClock, startServer, type TestServer } from '../../helpers/harness.ts';

/**
 * `postilion ui login|logout --all` through main(): over a control socket serving the dashboard's
 * sign-in (login-links.ts over a sessions service holding tokens in memory, as the dashboard's
 * store-backed one is asked), against a daemon serving none, and with no daemon at all.
 */
describe('postilion ui (CLI)', function () {
  this.timeout(30_000);
  let dir: string;
  let configPath: string;
  let control: ControlServer | null = null;
  let server: TestServer | null = null;
  let logLines: string[];

  /** Tokens made, and sessions live: what the CLI's requests did to the service. */
  const sessions = { tokens: [] as Array<{ token: string; ttlMs: number }>, live: 3 };
  const service: LoginLinkSessions = {
    createLoginLink: async (ttlMs) => {
      const token = `tok${sessions.tokens.length}-${'x'.repeat(40)}`;
      sessions.tokens.push({ token, ttlMs });
      return token;
    },
    revokeAll: async () => {
      const n = sessions.live;
      sessions.live = 0;
      return n;
    },
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-ui-'));
    configPath = join(dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\nlog:\n  level: silent\n`);
    logLines = [];
    sessions.tokens = [];
    sessions.live = 3;
  });
  afterEach(async () => {
    await control?.close(1000);
    control = null;
    await server?.stop();
    server = null;
    rmSync(dir, { recursive: true, force: true });
  });

  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  /** A control socket where the daemon's would be, serving the sign-in (the other handlers unused here). */
  async function serveSignIn(): Promise<void> {
    mkdirSync(join(dir, 'data'), { recursive: true });
    control = await ControlServer.bind(join(dir, 'data', 'control.sock'));
    const unused = null as unknown as ControlHandlers['queue'];
    control.serve(
      {
        queue: unused,
        admin: null as unknown as ControlHandlers['admin'],
        doctor: null as unknown as ControlHandlers['doctor'],
        ui: uiSignIn({ sessions: service, ttlSeconds: () => 600, baseUrl: () => 'https://mail.example.com/', clock: new ManualClock() }),
      },
      createLogger('info', { write: (line: string) => void logLines.push(line) }),
    );
  }

  it('prints a one-time link once on stdout, and the daemon logs that one was made but never the link', async () => {
    await serveSignIn();
    const res = await cli('ui', 'login');
    expect(res.code, res.err).to.equal(0);
    const token = sessions.tokens[0]!.token;
    expect(res.out).to.equal(`https://mail.example.com/ui/#operator-login=${token}\n`);
    expect(sessions.tokens[0]!.ttlMs).to.equal(600_000);
    expect(res.err).to.contain('expires at 2026-11-21T12:10:00.000Z');
    expect(res.err).to.not.contain(token);
    expect(logLines.some((l) => l.includes('operator asked for a dashboard sign-in link'))).to.equal(true);
    expect(logLines.join('\n')).to.not.contain(token);
  });

  it('--json prints the link and its expiry', async () => {
    await serveSignIn();
    const res = await cli('ui', 'login', '--json');
    expect(res.code, res.err).to.equal(0);
    expect(JSON.parse(res.out)).to.deep.equal({
      url: `https://mail.example.com/ui/#operator-login=${sessions.tokens[0]!.token}`,
      expires_at: '2026-11-21T12:10:00.000Z',
    });
  });

  it('logout --all ends every session and says how many; without --all it refuses (exit 2)', async () => {
    await serveSignIn();
    const refused = await cli('ui', 'logout');
    expect(refused.code).to.equal(2);
    expect(refused.err).to.match(/^postilion: ui logout: add --all/);
    expect(sessions.live).to.equal(3);
    const res = await cli('ui', 'logout', '--all');
    expect(res.code, res.err).to.equal(0);
    expect(res.out).to.equal('dashboard sessions ended: 3\n');
    expect(JSON.parse((await cli('ui', 'logout', '--all', '--json')).out)).to.deep.equal({ revoked: 0 });
    expect(logLines.some((l) => l.includes('operator ended every dashboard session') && l.includes('"revoked":3'))).to.equal(true);
  });

  it('with no daemon running says it must run, in one line (exit 2)', async () => {
    for (const args of [
      ['ui', 'login'],
      ['ui', 'logout', '--all'],
    ]) {
      const res = await cli(...args);
      expect(res.code).to.equal(2);
      expect(res.out).to.equal('');
      expect(res.err).to.equal('postilion: no daemon runs: the dashboard is served by the running daemon (start it first)\n');
    }
  });

  it('a daemon with the dashboard turned off answers 404, which the command says in one line (exit 2)', async () => {
    server = await startServer({ dir, config: { dashboard: { enabled: false, session_ttl_minutes: 720, login_link_ttl_seconds: 600, public_url: null } } });
    const res = await cli('ui', 'login');
    expect(res.code).to.equal(2);
    expect(res.out).to.equal('');
    expect(res.err).to.match(/^postilion: the running daemon serves no dashboard[^\n]*\n$/);
  });
});
