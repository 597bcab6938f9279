/**
 * The daemon the dashboard's browser tests drive: `postilion start` as a child process on a temp
 * directory, after `postilion init` as the README's first message does, its resolver asking a DNS
 * server on loopback, delivering to an SMTP sink there (every recipient domain's MX is the sink).
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, initialised, run } from '../../helpers/child.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import type { Locator, Page } from 'playwright-core';
import type { InPage } from '../../helpers/browser.ts';

export interface ApiMessage {
  id: string;
  message_id: string;
  recipient: string;
  subject: string | null;
  status: string;
  num_attempts: number;
}

export interface DashboardDaemon {
  /** The API listener's base URL (the dashboard is at `${url}/ui/`). */
  url: string;
  /** The first account (init's) and its administrator key. */
  account: string;
  key: string;
  dns: TestDnsServer;
  sink: SmtpSink;
  child: Child;
  /** `postilion --config <config> …` expected to exit 0: its stdout. */
  cli(...args: string[]): Promise<string>;
  /** A v2 API call with a key (the first account's by default): status and JSON body. */
  api(method: string, path: string, body?: unknown, key?: string): Promise<{ status: number; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON of many shapes
  /** Sends one message as the README does; resolves with it as the API reads it. */
  send(message: { from: string; to: string; subject: string }, as?: { account: string; key: string }): Promise<ApiMessage>;
  /** Polls the message until `test` holds (10 s at most). */
  until(id: string, test: (m: ApiMessage) => boolean, what: string, as?: { account: string; key: string }): Promise<ApiMessage>;
  /** A second account with a key of its own and a verified sending domain. */
  addAccount(name: string, domain: string): Promise<{ account: string; key: string }>;
  stop(): Promise<void>;
}

/** Recipient domains whose MX (the sink) answers every RCPT TO with a 4xx: their mail waits in the queue. */
export const DEFERRING_DOMAIN = 'wait.example.net';

export async function startDashboardDaemon(prefix: string): Promise<DashboardDaemon> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  let dns: TestDnsServer | null = null;
  let sink: SmtpSink | null = null;
  let child: Child | null = null;
  const cleanUp = async () => {
    await child?.kill();
    await sink?.close();
    await dns?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    dns = await startDnsServer();
    sink = await startSink();
    sink.rcpt = (address) => (address.endsWith(`@${DEFERRING_DOMAIN}`) ? { code: 451, text: '4.7.1 Try again later' } : null);
    for (const domain of ['example.org', DEFERRING_DOMAIN]) {
      dns.zone.set(domain, 'MX', [{ exchange: `mx1.${domain}`, priority: 10 }]);
      dns.zone.set(`mx1.${domain}`, 'A', ['127.0.0.1']);
    }
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      [
        'server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]',
        `dns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1`,
        // The tests poll the read API often. The statistics limit stays the default a newcomer has (the Statistics screen must live with it).
        'api:\n  port: 0\n  rate_limits:\n    general:\n      per_second: 10000\n      burst: 100000',
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}`,
        `delivery:\n  enabled: true\n  mx_port: ${sink.port}`,
        'shutdown:\n  grace_seconds: 2',
        'smtp:\n  submission:\n    enabled: false\n  inbound:\n    enabled: false',
        '',
      ].join('\n'),
    );
    const cli = async (...args: string[]) => {
      const res = await run(['--config', config, ...args], dir);
      if (res.code !== 0) throw new Error(`postilion ${args.join(' ')} exited ${res.code}: ${res.stderr}${res.stdout}`);
      return res.stdout;
    };
    const { accountId: account, key } = initialised(await cli('init'));
    child = new Child(['--config', config, 'start'], dir);
    const url = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/, 30_000))[1]!;
    await child.waitFor(/control socket listening/, 30_000);
    await child.waitFor(/"msg":"delivery started"/, 30_000);

    const api = async (method: string, path: string, body?: unknown, as = key) => {
      const res = await fetch(`${url}/v2${path}`, {
        method,
        headers: { authorization: `Bearer ${as}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    };
    const until: DashboardDaemon['until'] = async (id, test, what, as = { account, key }) => {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const res = await api('GET', `/accounts/${as.account}/messages/${encodeURIComponent(id)}`, undefined, as.key);
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        if (test(res.body as ApiMessage)) return res.body as ApiMessage;
        if (Date.now() > deadline) throw new Error(`message ${id} not ${what} after 10 s: ${JSON.stringify(res.body)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const send: DashboardDaemon['send'] = async (message, as = { account, key }) => {
      const res = await api(
        'POST',
        `/accounts/${as.account}/messages`,
        { from: { email: message.from }, recipients: [{ email: message.to }], subject: message.subject, text_content: 'Hello from Postilion' },
        as.key,
      );
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      return until(res.body.data[0].id as string, () => true, 'readable', as);
    };

    /** Adds a sending domain through the API (what `domains add` does) and marks it verified by hand, as the README does: its DNS is not published. */
    const addDomain = async (domain: string, as: { account: string; key: string }) => {
      const added = await api('POST', `/accounts/${as.account}/domains`, { domain }, as.key);
      expect(added.status, JSON.stringify(added.body)).to.equal(201);
      await cli('domains', 'verify', domain);
    };
    await addDomain('example.test', { account, key });

    const running: DashboardDaemon = {
      url,
      account,
      key,
      dns,
      sink,
      child,
      cli,
      api,
      send,
      until,
      addAccount: async (name, domain) => {
        const created = await cli('accounts', 'create', '--name', name, '--owner-email', `owner@${domain}`);
        const other = /([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/.exec(created)?.[1];
        if (!other) throw new Error(`no account id in: ${created}`);
        const otherKey = /aha-sk-[A-Za-z0-9]{64}/.exec(await cli('keys', 'create', '--account', other, '--label', 'dashboard test'))?.[0];
        if (!otherKey) throw new Error('no key printed by keys create');
        await addDomain(domain, { account: other, key: otherKey });
        return { account: other, key: otherKey };
      },
      stop: cleanUp,
    };
    return running;
  } catch (err) {
    if (child) console.warn(child.stdout.slice(-3000), child.stderr.slice(-3000));
    await cleanUp();
    throw err;
  }
}

/** The one-time operator sign-in link `postilion ui login` prints. */
export async function operatorLink(daemon: DashboardDaemon): Promise<string> {
  const out = await daemon.cli('ui', 'login');
  const link = /https?:\/\/\S+\/ui\/#operator-login=[A-Za-z0-9_-]+/.exec(out)?.[0];
  if (!link) throw new Error(`postilion ui login printed no link: ${out}`);
  return link;
}

/** Signs in at `${url}/ui/` with an API key, as a person does; resolves once the navigation shows. */
export async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/ui/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

/** The text of what follows the h2 named `heading` up to the next h2 (its section of the page), and how many entries (list items, body rows) it has. */
export async function section(page: Page, heading: string): Promise<{ text: string; entries: number }> {
  await page.getByRole('heading', { level: 2, name: heading }).waitFor();
  return page.evaluate((name) => {
    const { document } = globalThis as unknown as InPage;
    const h2 = [...document.querySelectorAll('h2')].find((h) => h.textContent?.trim() === name)!;
    let text = '';
    let entries = 0;
    for (let el = h2.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling) {
      text += ` ${el.innerText}`;
      entries += el.querySelectorAll('li, tbody tr').length + (el.matches('li, tbody tr') ? 1 : 0);
    }
    return { text, entries };
  }, heading);
}

/** The description (dd) of a term (dt) in the page's `dl.fields`. */
export function field(page: Page, term: string): Locator {
  return page.locator('dl.fields dt', { hasText: new RegExp(`^\\s*${term}\\s*$`) }).locator('xpath=following-sibling::dd[1]');
}

/** Whether the page scrolls sideways (it must not at 390 px: wide tables scroll in their own box). */
export async function scrollsSideways(page: Page): Promise<boolean> {
  return page.evaluate(() => {
    const { document, innerWidth } = globalThis as unknown as InPage;
    return document.documentElement.scrollWidth > innerWidth + 1;
  });
}
