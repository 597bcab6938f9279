import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkAccessibility, expectNoProblems, screenshot, TestBrowser, useBrowser, type InPage } from '../../helpers/browser.ts';
import { scrollsSideways } from './daemon.ts';

const BUILT = join(resolve(dirname(fileURLToPath(import.meta.url)), '../../..'), 'dist', 'ui');

/** The dashboard's Content-Security-Policy and headers, as the daemon sends them on /ui. */
const HEADERS = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/** Pages that do what the harness must catch. */
const BAD: Record<string, string> = {
  '/bad/inline-script.html': '<!doctype html><html lang="en"><title>t</title><script>document.title = "ran"</script><h1>Inline</h1></html>',
  '/bad/console-error.html': '<!doctype html><html lang="en"><title>t</title><script src="/bad/error.js"></script><h1>Error</h1></html>',
  '/bad/error.js': 'console.error("something broke");',
  '/bad/unlabelled.html': '<!doctype html><html lang="en"><title>t</title><main><h1>Form</h1><input type="text"></main></html>',
  '/bad/foreign.html': '<!doctype html><html lang="en"><title>t</title><h1>Foreign</h1><script src="/bad/foreign.js"></script></html>',
  '/bad/foreign.js': 'void fetch("http://example.com/x").catch(() => undefined);',
  // Served without the CSP: the harness itself stops the request.
  '/bare/foreign.html': '<!doctype html><html lang="en"><title>t</title><h1>Foreign</h1><img alt="" src="http://example.com/pixel.png"></html>',
};

/**
 * The browser harness itself (test/helpers/browser.ts), on the built shell served as the daemon
 * serves /ui (its files and headers; no session): its sign-in form passes the accessibility check
 * in both colour schemes and on a phone, and what the harness is there to catch is caught.
 */
describe('e2e: dashboard browser harness', function () {
  this.timeout(30_000);
  const browser = useBrowser();
  let server: Server;
  let base: string;

  before(async function () {
    if (!existsSync(join(BUILT, 'index.html'))) throw new Error('dist/ui is not built: run npm run build:ui');
    server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      const send = (status: number, type: string, body: string) => {
        res.writeHead(status, { ...HEADERS, 'Content-Type': type }).end(body);
      };
      if (path === '/ui/session') return send(401, 'application/json', JSON.stringify({ message: 'not signed in' }));
      if (path === '/ui/') return send(200, 'text/html; charset=utf-8', readFileSync(join(BUILT, 'index.html'), 'utf8'));
      const asset = /^\/ui\/assets\/(app\.js|app\.css)$/.exec(path);
      if (asset) return send(200, asset[1]!.endsWith('.js') ? 'text/javascript' : 'text/css', readFileSync(join(BUILT, asset[1]!), 'utf8'));
      const bad = BAD[path];
      if (bad !== undefined && path.startsWith('/bare/')) return res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(bad);
      if (bad !== undefined) return send(200, path.endsWith('.js') ? 'text/javascript' : 'text/html; charset=utf-8', bad);
      return send(404, 'application/json', JSON.stringify({ message: 'not found' }));
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    if (server) await new Promise((done) => server.close(done));
  });

  it('shows the built sign-in form, accessible in light and dark, on a desktop and a phone', async () => {
    for (const [viewport, colorScheme] of [
      ['desktop', 'light'],
      ['phone', 'dark'],
    ] as const) {
      const watched = await browser.open({ viewport, colorScheme });
      const { page } = watched;
      await page.goto(`${base}/ui/`);
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await page.getByLabel('API key').waitFor();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      const dark = await page.evaluate(() => (globalThis as unknown as InPage).matchMedia('(prefers-color-scheme: dark)').matches);
      expect(dark).to.equal(colorScheme === 'dark');
      // Nothing wider than the window (readable at 390 px without scrolling sideways).
      expect(await scrollsSideways(page)).to.equal(false);
      await checkAccessibility(page, `the sign-in form (${viewport}, ${colorScheme})`);
      await screenshot(page, `harness-sign-in-${viewport}-${colorScheme}`);
      expectNoProblems(watched);
    }
  });

  it('catches an inline script the CSP blocks, a console error and requests to another host', async () => {
    const watched = await browser.open();
    await watched.page.goto(`${base}/bad/inline-script.html`);
    expect(await watched.page.title()).to.equal('t');
    await watched.page.waitForTimeout(100);
    expect(() => expectNoProblems(watched)).to.throw(/CSP violation: script-src-elem blocked inline/);

    await watched.page.goto(`${base}/bad/console-error.html`);
    await watched.page.waitForFunction(() => (globalThis as unknown as InPage).document.readyState === 'complete');
    expect(() => expectNoProblems(watched)).to.throw(/console error: something broke/);

    await watched.page.goto(`${base}/bad/foreign.html`);
    await watched.page.waitForTimeout(200);
    // The CSP's connect-src stops it in the page; the harness would stop and report it otherwise.
    expect(() => expectNoProblems(watched)).to.throw(/CSP violation: connect-src blocked http:\/\/example\.com/);

    await watched.page.goto(`${base}/bare/foreign.html`);
    await watched.page.waitForFunction(() => (globalThis as unknown as InPage).document.readyState === 'complete');
    expect(() => expectNoProblems(watched)).to.throw(/a request to another host: GET http:\/\/example\.com\/pixel\.png/);
  });

  it('lists axe-core violations readably', async () => {
    const { page } = await browser.open();
    await page.goto(`${base}/bad/unlabelled.html`);
    let error: Error | null = null;
    await checkAccessibility(page, 'the unlabelled form').catch((err: Error) => (error = err));
    expect(error, 'a violation found').not.to.equal(null);
    expect(error!.message).to.match(/accessibility violation\(s\) on the unlabelled form:/);
    expect(error!.message).to.match(/label \((critical|serious)\): Form elements must have labels/);
    expect(error!.message).to.include('<input type="text">');
  });

  it("leaves none of the browser's processes behind when closed", async () => {
    const other = await TestBrowser.launch();
    const watched = await other!.open();
    await watched.page.goto(`${base}/ui/`);
    // close() waits for every process carrying the launch's mark to be gone, and fails otherwise.
    await other!.close();
  });
});
