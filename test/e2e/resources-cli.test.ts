import { expect } from 'chai';
import { startCliDaemon, type CliDaemon } from '../helpers/cli-daemon.ts';
import { startSink, type SmtpSink } from '../helpers/smtp-sink.ts';

const UNKNOWN_ID = '01900000-0000-7000-8000-000000000000';

/**
 * `postilion smtp-credentials|webhooks|routes|suppressions|messages` against a daemon running as
 * a child process: resources made through the API, listed, shown, enabled/disabled and deleted
 * from the CLI; secrets never shown again; bad ids refused with one line and status 2.
 */
describe('postilion: the API resources and messages show (CLI, daemon running)', function () {
  this.timeout(90_000);
  let sink: SmtpSink;
  let daemon: CliDaemon;
  /** What `messages show` printed while the daemon ran: the stopped store must answer the same. */
  let shownWhileRunning: { id: string; text: string } | undefined;
  let api: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: Record<string, unknown> }>;

  before(async () => {
    sink = await startSink();
    // The first attempt of each recipient is deferred: messages show has an attempt of each kind.
    sink.rcpt = (_address, attempt) => (attempt === 1 ? { code: 451, text: '4.7.1 greylisted, try again' } : null);
    daemon = await startCliDaemon(
      'postilion-resources-cli-',
      `delivery:\n  smarthost:\n    host: 127.0.0.1\n    port: ${sink.port}\n    tls: 'off'\n  retry:\n    first_delay_seconds: 1\n    jitter: 0\n` +
        `webhooks:\n  allow_networks: ["127.0.0.0/8"]\n`,
    );
    api = async (method, path, body) => {
      const res = await fetch(`${daemon.apiUrl}/v2/accounts/${daemon.account}${path}`, {
        method,
        headers: { authorization: `Bearer ${daemon.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    for (const args of [
      ['domains', 'add', 'example.test', '--account', daemon.account],
      ['domains', 'verify', 'example.test'],
    ]) {
      const res = await daemon.cli(...args);
      expect(res.code, res.stderr).to.equal(0);
    }
  });
  after(async () => {
    await daemon?.stop();
    await sink?.close();
  });

  /** `postilion <args>` expected to succeed: its stdout. */
  async function ok(...args: string[]): Promise<string> {
    const res = await daemon.cli(...args);
    expect(res.code, `${args.join(' ')}: ${res.stderr}`).to.equal(0);
    expect(res.stderr).to.equal('');
    return res.stdout;
  }

  /** `postilion <args>` expected to be refused: the one line it printed. */
  async function refused(...args: string[]): Promise<string> {
    const res = await daemon.cli(...args);
    expect(res.code, `${args.join(' ')}: ${res.stdout}`).to.equal(2);
    expect(res.stdout).to.equal('');
    expect(res.stderr, args.join(' ')).to.match(/^postilion: [^\n]+\n$/);
    return res.stderr;
  }

  it('smtp-credentials: list, show and delete, the password never printed', async () => {
    const made = await api('POST', '/smtp-credentials', { name: 'app', scope: 'scoped', domains: ['example.test'] });
    expect(made.status).to.equal(201);
    const id = made.body.id as string;
    const password = made.body.password as string;
    const list = await ok('smtp-credentials', 'list', '--account', daemon.account);
    expect(list).to.equal(`${id}\t${made.body.username as string}\tscoped\texample.test\tlive\tapp\n`);
    const shown = await ok('smtp-credentials', 'show', id, '--account', daemon.account);
    expect(shown).to.match(new RegExp(`^id: +${id}$`, 'm'));
    expect(shown).to.match(/^domains: +example\.test$/m);
    const json = JSON.parse(await ok('smtp-credentials', 'show', id, '--account', daemon.account, '--json')) as Record<string, unknown>;
    expect(json).to.include({ id, username: made.body.username, scope: 'scoped' });
    const listJson = await ok('smtp-credentials', 'list', '--account', daemon.account, '--json');
    for (const out of [list, shown, JSON.stringify(json), listJson]) expect(out).not.to.contain(password);
    expect(json).not.to.have.property('password');

    expect(await ok('smtp-credentials', 'delete', id, '--account', daemon.account)).to.equal(`deleted ${id}\n`);
    expect((await api('GET', `/smtp-credentials/${id}`)).status).to.equal(404);
    expect(await refused('smtp-credentials', 'show', id, '--account', daemon.account)).to.equal('postilion: smtp credential not found\n');
    expect(await refused('smtp-credentials', 'show', 'nope', '--account', daemon.account)).to.equal(
      'postilion: "nope" is not an SMTP credential id (a UUID)\n',
    );
  });

  it('webhooks: list, show, disable, enable and delete, the secret never printed', async () => {
    const made = await api('POST', '/webhooks', { name: 'hooks', url: 'http://127.0.0.1:9/hook', scope: 'global' });
    expect(made.status).to.equal(201);
    const id = made.body.id as string;
    const secret = made.body.secret as string;
    expect(await ok('webhooks', 'list', '--account', daemon.account)).to.equal(`${id}\tenabled\thttp://127.0.0.1:9/hook\terrors_since_last_success=0\thooks\n`);

    expect(await ok('webhooks', 'disable', id, '--account', daemon.account)).to.equal(`disabled ${id}\n`);
    expect((await api('GET', `/webhooks/${id}`)).body.enabled).to.equal(false);
    expect(await ok('webhooks', 'list', '--account', daemon.account)).to.match(/\tdisabled\t/);
    const enabled = JSON.parse(await ok('webhooks', 'enable', id, '--account', daemon.account, '--json')) as Record<string, unknown>;
    expect(enabled).to.include({ id, enabled: true });
    expect((await api('GET', `/webhooks/${id}`)).body.enabled).to.equal(true);

    const outputs = [
      await ok('webhooks', 'show', id, '--account', daemon.account),
      await ok('webhooks', 'show', id, '--account', daemon.account, '--json'),
      await ok('webhooks', 'list', '--account', daemon.account, '--json'),
    ];
    expect(outputs[0]).to.match(/^url: +http:\/\/127\.0\.0\.1:9\/hook$/m);
    for (const out of outputs) expect(out).not.to.contain(secret);

    expect(await ok('webhooks', 'delete', id, '--account', daemon.account)).to.equal(`deleted ${id}\n`);
    expect((await api('GET', `/webhooks/${id}`)).status).to.equal(404);
    expect(await refused('webhooks', 'disable', id, '--account', daemon.account)).to.equal('postilion: webhook not found\n');
    expect(await refused('webhooks', 'show', 'x', '--account', daemon.account)).to.equal('postilion: "x" is not a webhook id (a UUID)\n');
  });

  it('routes: list, show, disable, enable and delete, the secret never printed', async () => {
    const made = await api('POST', '/routes', { name: 'support', url: 'http://127.0.0.1:9/inbound', recipient: 'support@example.test' });
    expect(made.status).to.equal(201);
    const id = made.body.id as string;
    const secret = made.body.secret as string;
    expect(await ok('routes', 'list', '--account', daemon.account)).to.equal(`${id}\tenabled\tsupport@example.test\thttp://127.0.0.1:9/inbound\tsupport\n`);
    expect(await ok('routes', 'disable', id, '--account', daemon.account)).to.equal(`disabled ${id}\n`);
    expect((await api('GET', `/routes/${id}`)).body.enabled).to.equal(false);
    expect(await ok('routes', 'enable', id, '--account', daemon.account)).to.equal(`enabled ${id}\n`);
    expect((await api('GET', `/routes/${id}`)).body.enabled).to.equal(true);
    const outputs = [
      await ok('routes', 'show', id, '--account', daemon.account),
      await ok('routes', 'show', id, '--account', daemon.account, '--json'),
      await ok('routes', 'list', '--account', daemon.account, '--json'),
    ];
    expect(outputs[0]).to.match(/^recipient: +support@example\.test$/m);
    expect((JSON.parse(outputs[2]!) as Array<{ id: string }>).map((r) => r.id)).to.deep.equal([id]);
    for (const out of outputs) expect(out).not.to.contain(secret);
    expect(await ok('routes', 'delete', id, '--account', daemon.account)).to.equal(`deleted ${id}\n`);
    expect(await ok('routes', 'list', '--account', daemon.account)).to.equal('');
    expect(await refused('routes', 'delete', UNKNOWN_ID, '--account', daemon.account)).to.equal('postilion: route not found\n');
  });

  it('suppressions: list, show and delete by address', async () => {
    const expires = new Date(Date.now() + 86_400_000).toISOString();
    expect((await api('POST', '/suppressions', { email: 'Gone@Example.org', reason: 'asked to stop', expires_at: expires })).status).to.equal(201);
    const list = await ok('suppressions', 'list', '--account', daemon.account);
    expect(list).to.match(/^gone@example\.org\texample\.test\t\S+\t-\tasked to stop\n$/);
    expect(await ok('suppressions', 'show', 'gone@example.org', '--account', daemon.account)).to.equal(list);
    const json = JSON.parse(await ok('suppressions', 'list', '--account', daemon.account, '--domain', 'example.test', '--json')) as Array<
      Record<string, unknown>
    >;
    expect(json).to.have.length(1);
    expect(json[0]).to.include({ email: 'gone@example.org', domain: 'example.test', protected: false });

    expect(await ok('suppressions', 'delete', 'GONE@example.org', '--account', daemon.account)).to.equal('removed 1 suppression of gone@example.org\n');
    expect(await ok('suppressions', 'list', '--account', daemon.account)).to.equal('');
    expect(await refused('suppressions', 'show', 'gone@example.org', '--account', daemon.account)).to.equal('postilion: gone@example.org is not suppressed\n');
    expect(await refused('suppressions', 'delete', 'gone@example.org', '--account', daemon.account)).to.equal(
      'postilion: no suppression found for gone@example.org\n',
    );
    expect(await refused('suppressions', 'show', 'not-an-address', '--account', daemon.account)).to.equal(
      'postilion: "not-an-address" is not an email address\n',
    );
    expect(await refused('suppressions', 'list', '--account', daemon.account, '--domain', 'other.example')).to.contain(
      'other.example is not a domain of this account',
    );
  });

  it('messages show: the message, then each event and delivery attempt in order', async () => {
    const sent = await api('POST', '/messages', {
      from: { email: 'hello@example.test' },
      recipients: [{ email: 'you@example.org' }],
      subject: 'Where is it?',
      text_content: 'Hello',
    });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    // The API answers with the Message-ID; the message's id is the UUID in it.
    const messageId = (sent.body.data as Array<{ id: string }>)[0]!.id;
    const id = /^<([0-9a-f-]{36})@example\.test>$/.exec(messageId)![1]!;
    await sink.waitFor(1, 20_000);
    // The outcome is written after the sink's reply: wait until the CLI sees it delivered.
    let json: { message: Record<string, unknown>; trace: Array<{ kind: string; what: string; detail: string; at: string }> } | undefined;
    for (let i = 0; i < 100; i++) {
      json = JSON.parse(await ok('messages', 'show', messageId, '--json')) as typeof json;
      if (json!.message.status === 'Delivered' && json!.trace.some((t) => t.what === 'message.delivered')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(json!.message).to.include({ id, message_id: messageId, status: 'Delivered', recipient: 'you@example.org', num_attempts: 2 });
    expect(json!.trace.map((t) => `${t.kind} ${t.what}`)).to.deep.equal([
      'event message.reception',
      'attempt Deferred',
      'event message.transient_error',
      'attempt Delivered',
      'event message.delivered',
    ]);
    expect(json!.trace[1]!.detail).to.contain('greylisted');
    const times = json!.trace.map((t) => Date.parse(t.at));
    expect([...times].sort((a, b) => a - b)).to.deep.equal(times);

    const text = await ok('messages', 'show', id);
    shownWhileRunning = { id, text };
    expect(text.split('\n')[0]).to.equal(`message ${id}  Delivered  account ${daemon.account}`);
    expect(text).to.contain('from <hello@example.test> to <you@example.org>  subject "Where is it?"');
    // Each attempt with the TLS its session had (here none: the smarthost is set to tls: off).
    expect(text, text).to.match(/ attempt +Deferred +127\.0\.0\.1: 451 4\.7\.1 greylisted, try again \[TLS: clear text none unverified\]\n/);
    expect(text.trimEnd().split('\n').at(-1)).to.match(/ event +message\.delivered$/);

    // By the UUID alone, and by the Message-ID in the account named: the same.
    expect(await ok('messages', 'show', id)).to.equal(text);
    expect(await ok('messages', 'show', messageId, '--account', daemon.account)).to.equal(text);

    expect(await refused('messages', 'show', 'not a uuid')).to.equal('postilion: "not a uuid" is not a message id (a UUID) or a Message-ID (<id@domain>)\n');
    expect(await refused('messages', 'show', UNKNOWN_ID)).to.equal(`postilion: no such message: ${UNKNOWN_ID}\n`);
    expect(await refused('messages', 'show', `<${UNKNOWN_ID}@example.test>`)).to.equal(`postilion: no such message: <${UNKNOWN_ID}@example.test>\n`);
    expect(await refused('messages', 'show', '<abc@client.example>')).to.contain('give its account (--account)');
    expect(await refused('messages', 'show', '<abc@client.example>', '--account', daemon.account)).to.equal('postilion: message not found\n');
  });

  it('refuses a bad or unknown account, and a missing --account, with one line and status 2', async () => {
    expect(await refused('webhooks', 'list', '--account', 'acme')).to.equal('postilion: --account: "acme" is not an account id\n');
    expect(await refused('routes', 'list', '--account', UNKNOWN_ID)).to.match(/^postilion: account .*not found\n$/i);
    expect(await refused('smtp-credentials', 'list')).to.equal("postilion: required option '--account <id>' not specified\n");
    expect(await refused('suppressions', 'show', '--account', daemon.account)).to.equal("postilion: missing required argument 'email'\n");
  });

  it('answers the same from the stopped store once the daemon is gone', async () => {
    expect(shownWhileRunning, 'messages show ran first').not.to.equal(undefined);
    daemon.child.signal('SIGTERM');
    expect(await daemon.child.exited).to.equal(0);
    expect(await ok('messages', 'show', shownWhileRunning!.id)).to.equal(shownWhileRunning!.text);
    expect(await ok('webhooks', 'list', '--account', daemon.account)).to.equal('');
    expect(await refused('webhooks', 'show', UNKNOWN_ID, '--account', daemon.account)).to.equal('postilion: webhook not found\n');
  });
});
