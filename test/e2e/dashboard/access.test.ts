import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { checkAccessibility, screenshot, useBrowser, type InPage } from '../../helpers/browser.ts';
import { signIn, startDashboardDaemon, type ApiMessage, type DashboardDaemon } from './daemon.ts';

/**
 * Who gets in and to what, in a real browser on a running daemon: a wrong key is refused with a
 * message and no session, signing out ends the session, the key is kept nowhere in the browser,
 * and another account's message and domain are out of reach by URL, from the screens and from the
 * page's own requests.
 */
/** The focused element, read in the page. */
type Focus = { document: { activeElement: { id: string } | null } };

describe('e2e: dashboard, sign-in, sign-out and tenants', function () {
  this.timeout(60_000);
  const browser = useBrowser();
  let daemon: DashboardDaemon;
  let other: { account: string; key: string };
  let private_: ApiMessage;

  before(async function () {
    this.timeout(60_000);
    daemon = await startDashboardDaemon('postilion-e2e-dashboard-access-');
    other = await daemon.addAccount('Other company', 'other.test');
    private_ = await daemon.send({ from: 'news@other.test', to: 'you@example.org', subject: 'Private to the other account' }, other);
  });

  after(async () => {
    await daemon?.stop();
  });

  it('refuses a wrong key with a message, and makes no session', async () => {
    const { page } = await browser.open();
    await page.goto(`${daemon.url}/ui/`);
    const wrong = `aha-sk-${randomBytes(48).toString('base64url').replace(/[-_]/g, 'x').slice(0, 64)}`;
    await page.getByLabel('API key').fill(wrong);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    expect((await page.getByRole('alert').innerText()).trim()).not.to.equal('');
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect((await page.context().cookies()).map((c) => c.name)).not.to.include('postilion_session');
    await checkAccessibility(page, 'sign-in with an error');
    await screenshot(page, 'access-wrong-key');
  });

  it('works from the keyboard alone: sign in, reach Domains from the navigation, open a domain', async () => {
    const { page } = await browser.open();
    await page.goto(`${daemon.url}/ui/`);
    // The key field is the first thing Tab reaches after the page loads (nothing before it takes focus).
    const focused = () => page.evaluate(() => (globalThis as unknown as Focus).document.activeElement?.id ?? '');
    const hasFocus = (locator: ReturnType<typeof page.locator>) => locator.evaluate((el) => el === (globalThis as unknown as Focus).document.activeElement);
    for (let i = 0; i < 5 && (await focused()) !== 'api-key'; i++) await page.keyboard.press('Tab');
    expect(await focused()).to.equal('api-key');
    await page.keyboard.type(daemon.key);
    await page.keyboard.press('Enter');
    const nav = page.getByRole('navigation', { name: 'Main' });
    await nav.waitFor();
    // Tab through the page until the Domains link has focus, then follow it with Enter.
    const domains = nav.getByRole('link', { name: 'Domains' });
    for (let i = 0; i < 40 && !(await hasFocus(domains)); i++) await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();
    const link = page.getByRole('table', { name: 'Domains' }).getByRole('link', { name: 'example.test' });
    for (let i = 0; i < 40 && !(await hasFocus(link)); i++) await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'example.test' }).waitFor();
  });

  it('signs in with an HttpOnly, SameSite=Strict session cookie, keeps the key nowhere, and signs out for good', async () => {
    const { page } = await browser.open();
    await signIn(page, daemon.url, daemon.key);
    const [cookie] = (await page.context().cookies()).filter((c) => c.name === 'postilion_session');
    expect(cookie, 'the session cookie').not.to.equal(undefined);
    expect([cookie!.httpOnly, cookie!.sameSite, cookie!.path]).to.deep.equal([true, 'Strict', '/ui']);
    expect(cookie!.value).not.to.contain(daemon.key);
    const stored = await page.evaluate(() => {
      const page = globalThis as unknown as InPage & { localStorage: { length: number; key(i: number): string; getItem(k: string): string } };
      const all: string[] = [(page.document as unknown as { cookie: string }).cookie];
      for (const store of [page.localStorage, page.sessionStorage as typeof page.localStorage])
        for (let i = 0; i < store.length; i++) all.push(`${store.key(i)}=${store.getItem(store.key(i))}`);
      return all.join('\n');
    });
    expect(stored).not.to.contain(daemon.key.slice(7));

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    // Gone on the server too: the old cookie, sent again, is refused; a reload shows the sign-in.
    const res = await page.request.get(`${daemon.url}/ui/session`, { headers: { cookie: `postilion_session=${cookie!.value}` } });
    expect(res.status()).to.equal(401);
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  });

  it("does not reach another account's message or domain by URL", async () => {
    const { page } = await browser.open();
    await signIn(page, daemon.url, daemon.key);

    await page.goto(`${daemon.url}/ui/#/messages/${private_.id}`);
    await page.getByRole('alert').waitFor();
    expect(await page.locator('body').innerText()).not.to.contain('Private to the other account');

    await page.goto(`${daemon.url}/ui/#/domains/other.test`);
    await page.getByRole('alert').waitFor();
    expect(await page.getByRole('table', { name: 'DNS records' }).count()).to.equal(0);

    // The page's own requests, with its session and CSRF token, to the other account's paths.
    const answers = await page.evaluate(
      async ({ account, id }) => {
        const { fetch } = globalThis as unknown as {
          fetch: (url: string, init?: object) => Promise<{ status: number; text(): Promise<string> }>;
        };
        const session = JSON.parse(await (await fetch('/ui/session')).text()) as { csrf_token: string };
        const out: Array<{ path: string; status: number; body: string }> = [];
        for (const path of [`/accounts/${account}/messages/${id}`, `/accounts/${account}/domains/other.test`, `/accounts/${account}/messages`]) {
          const res = await fetch(`/ui/api/v2${path}`, { headers: { 'X-CSRF-Token': session.csrf_token } });
          out.push({ path, status: res.status, body: await res.text() });
        }
        return out;
      },
      { account: other.account, id: private_.id },
    );
    for (const answer of answers) {
      expect(answer.status, `${answer.path}: ${answer.body}`).to.be.oneOf([401, 403, 404]);
      expect(answer.body).not.to.contain('Private to the other account');
      expect(JSON.parse(answer.body)).to.have.property('message').that.is.a('string');
    }
  });
});
