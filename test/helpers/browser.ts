/**
 * The real-browser harness of the dashboard's tests: the system's chromium driven by
 * playwright-core (nothing downloaded), one browser per spec file, one page per test.
 *
 * What a page does wrong fails the test that made it: an uncaught exception, a console error
 * (a failed load of a resource with a 4xx status excepted: "not signed in" and a refused key are
 * answers the screens show), a Content-Security-Policy violation, a request anywhere but the
 * page's own origin. A failing test leaves a screenshot, and tests take named ones, under
 * test/artifacts/dashboard/ (not tracked). `checkAccessibility` runs axe-core's WCAG 2 A and AA
 * rules on what the page shows.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Where screenshots go (gitignored). */
export const ARTIFACTS = join(ROOT, 'test', 'artifacts', 'dashboard');

/** A desktop window and a phone's (an iPhone 12 to 15's CSS pixels). */
export const VIEWPORTS = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;

/** How long one action or expectation of a page may take before it fails (the suite runs on a loaded machine). */
const ACTION_MS = 10_000;
/** How long the browser's processes may take to be gone once it is closed. */
const EXIT_MS = 5_000;
/** The environment variable that marks the processes of one launch (its children inherit it). */
const MARK = 'POSTILION_TEST_BROWSER';

/** The browser to drive: POSTILION_CHROMIUM, else Debian's chromium; null when there is none. */
export function chromiumPath(): string | null {
  const given = process.env.POSTILION_CHROMIUM;
  if (given) {
    if (!existsSync(given)) throw new Error(`POSTILION_CHROMIUM=${given}: no such file`);
    return given;
  }
  return ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path)) ?? null;
}

export interface PageOptions {
  /** The page's window: 'desktop' (the default), 'phone' (390 x 844, touch) or a size. */
  viewport?: keyof typeof VIEWPORTS | { width: number; height: number };
  /** prefers-color-scheme (default light). */
  colorScheme?: 'light' | 'dark';
}

/** An element as page-side code (a page.evaluate callback) reads it. */
export interface InPageElement {
  tagName: string;
  textContent: string | null;
  innerText: string;
  nextElementSibling: InPageElement | null;
  matches(selector: string): boolean;
  querySelectorAll(selector: string): ArrayLike<InPageElement> & Iterable<InPageElement>;
}

/**
 * The page's globals as page-side code uses them (`const { document } = globalThis as unknown as
 * InPage` in a page.evaluate callback, which runs in the page): the tests are typed without the
 * DOM library, which is the browser code's.
 */
export interface InPage {
  document: InPageElement & {
    documentElement: { scrollWidth: number };
    readyState: string;
    addEventListener(type: string, listener: (event: Record<string, string | number>) => void): void;
  };
  innerWidth: number;
  matchMedia(query: string): { matches: boolean };
  [name: string]: unknown;
}

/** A page and what went wrong on it. */
export interface WatchedPage {
  page: Page;
  /** Console errors, uncaught exceptions, CSP violations and foreign requests seen so far. */
  problems: string[];
}

/** The processes (pids) whose environment carries `mark`: a launch's browser and every process it started. */
function marked(mark: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(`${MARK}=${mark}`)) found.push(Number(entry));
    } catch {
      // gone, or not ours
    }
  }
  return found;
}

/** One launch of the browser. */
export class TestBrowser {
  private readonly pages = new Map<Page, { context: BrowserContext; problems: string[] }>();

  private constructor(
    private readonly browser: Browser,
    private readonly mark: string,
  ) {}

  /** Launches the browser headless; null when none is installed. */
  static async launch(): Promise<TestBrowser | null> {
    const executablePath = chromiumPath();
    if (!executablePath) return null;
    const mark = randomUUID();
    const browser = await chromium.launch({
      executablePath,
      headless: true,
      // Chromium's sandbox refuses to run as root.
      args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
      env: { ...process.env, [MARK]: mark },
      timeout: 30_000,
    });
    return new TestBrowser(browser, mark);
  }

  /** A new page in a context of its own (its own cookies), watched for problems. */
  async open(options: PageOptions = {}): Promise<WatchedPage> {
    const viewport = typeof options.viewport === 'object' ? options.viewport : VIEWPORTS[options.viewport ?? 'desktop'];
    const phone = options.viewport === 'phone';
    const context = await this.browser.newContext({
      viewport,
      colorScheme: options.colorScheme ?? 'light',
      isMobile: phone,
      hasTouch: phone,
      reducedMotion: 'reduce',
    });
    context.setDefaultTimeout(ACTION_MS);
    const problems: string[] = [];
    // Bindings and init scripts go through the DevTools protocol, which the page's CSP does not govern.
    await context.exposeBinding('__postilionCspViolation', (_source, text: string) => void problems.push(`CSP violation: ${text}`));
    await context.addInitScript(() => {
      const page = globalThis as unknown as InPage & { __postilionCspViolation: (text: string) => Promise<void> };
      page.document.addEventListener('securitypolicyviolation', (e) => {
        void page.__postilionCspViolation(`${e.effectiveDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`);
      });
    });
    // Nothing but loopback: a request to anywhere else is a problem, and does not leave the machine.
    await context.route(
      (url) => !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname),
      (route) => {
        problems.push(`a request to another host: ${route.request().method()} ${route.request().url()}`);
        return route.abort('blockedbyclient');
      },
    );
    const page = await context.newPage();
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.stack ?? err.message}`));
    page.on('console', (msg) => {
      if (msg.type() !== 'error') return;
      const text = msg.text();
      // A 4xx answer the page handles (401 "not signed in", a refused key, a 404 by URL) is logged by the browser too.
      if (/^Failed to load resource: the server responded with a status of 4\d\d\b/.test(text)) return;
      const at = msg.location();
      problems.push(`console error: ${text}${at.url ? ` (${at.url}:${at.lineNumber})` : ''}`);
    });
    this.pages.set(page, { context, problems });
    return { page, problems };
  }

  /** Closes a page's context. */
  async closePage(page: Page): Promise<void> {
    const entry = this.pages.get(page);
    if (!entry) return;
    this.pages.delete(page);
    await entry.context.close();
  }

  /** Closes everything and waits until none of the browser's processes is left (killing, by pid, any that lingers). */
  async close(): Promise<void> {
    for (const page of [...this.pages.keys()]) await this.closePage(page).catch(() => undefined);
    await this.browser.close();
    const deadline = Date.now() + EXIT_MS;
    let left = marked(this.mark);
    while (left.length > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      left = marked(this.mark);
    }
    if (left.length > 0) {
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
      throw new Error(`the browser's processes ${left.join(', ')} were still running ${EXIT_MS} ms after it was closed (killed)`);
    }
  }
}

/** A file-system-safe name. */
function fileName(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 120);
}

/** Waits until nothing on the page says it is loading (the screens mark what they load `aria-busy="true"`). */
export async function settled(page: Page): Promise<void> {
  await page.locator('[aria-busy="true"]').first().waitFor({ state: 'detached' });
}

/** Saves a screenshot of the whole page, once loaded, as test/artifacts/dashboard/<name>.png; its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  await settled(page).catch(() => undefined);
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${fileName(name)}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Fails when the page has had a problem (console error, exception, CSP violation, foreign request). */
export function expectNoProblems(watched: WatchedPage, when = ''): void {
  if (watched.problems.length === 0) return;
  const list = watched.problems.splice(0);
  throw new Error(`the page had ${list.length} problem(s)${when ? ` ${when}` : ''}:\n  ${list.join('\n  ')}`);
}

let axeSource: string | undefined;

interface AxeNode {
  target: unknown[];
  html: string;
  failureSummary?: string;
}
interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  helpUrl: string;
  nodes: AxeNode[];
}

/**
 * Runs axe-core's WCAG 2.0/2.1 A and AA rules on the page once loaded; fails listing each
 * violation with the elements concerned. axe's source goes in through page.evaluate (the
 * DevTools protocol): the dashboard's CSP rightly refuses an injected <script>.
 */
export async function checkAccessibility(page: Page, screen: string): Promise<void> {
  await settled(page);
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  if (!(await page.evaluate(() => 'axe' in globalThis))) await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const { axe, document } = globalThis as unknown as InPage & {
      axe: { run: (context: unknown, options: object) => Promise<{ violations: AxeViolation[] }> };
    };
    const result = await axe.run(document, { runOnly: ['wcag2a', 'wcag2aa'], resultTypes: ['violations'] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      helpUrl: v.helpUrl,
      nodes: v.nodes.map((n) => ({ target: n.target, html: n.html, failureSummary: n.failureSummary })),
    }));
  });
  if (violations.length === 0) return;
  const lines = violations.map(
    (v) =>
      `${v.id} (${v.impact ?? 'no impact given'}): ${v.help} — ${v.helpUrl}\n` +
      v.nodes
        .slice(0, 5)
        .map((n) => `    ${n.target.join(' ')}: ${n.html.slice(0, 200)}\n      ${(n.failureSummary ?? '').replace(/\n/g, '\n      ')}`)
        .join('\n') +
      (v.nodes.length > 5 ? `\n    … and ${v.nodes.length - 5} more` : ''),
  );
  throw new Error(`axe-core found ${violations.length} accessibility violation(s) on ${screen}:\n  ${lines.join('\n  ')}`);
}

/**
 * Mocha hooks for a spec file's describe: one browser for the file (its tests are skipped, with
 * the reason, when no chromium is installed), a page per test, a screenshot of a failed test's
 * pages, the pages' problems checked after each test, everything closed at the end.
 */
export function useBrowser(): {
  /** A new page, closed after the test. */
  open(options?: PageOptions): Promise<WatchedPage>;
} {
  let browser: TestBrowser | null = null;
  let current: WatchedPage[] = [];

  before(async function () {
    this.timeout(40_000);
    browser = await TestBrowser.launch();
    if (!browser) {
      // CI installs Debian's chromium (.ci/run); elsewhere, say why nothing ran.
      console.warn('    no chromium: install Debian\'s "chromium" or set POSTILION_CHROMIUM; the browser tests are skipped');
      this.skip();
    }
  });

  afterEach(async function () {
    const pages = current;
    current = [];
    const test = this.currentTest;
    const failed = test?.state === 'failed';
    const problems: string[] = [];
    for (const [i, watched] of pages.entries()) {
      if (failed) {
        const base = `failed-${test.titlePath().join(' ')}${pages.length > 1 ? `-${i + 1}` : ''}`;
        const path = await screenshot(watched.page, base).catch((err: Error) => `(no screenshot: ${err.message})`);
        console.warn(`    screenshot of the failed test's page: ${path}`);
      }
      problems.push(...watched.problems);
      await browser?.closePage(watched.page);
    }
    if (!failed && problems.length > 0) throw new Error(`the test's pages had ${problems.length} problem(s):\n  ${problems.join('\n  ')}`);
  });

  after(async function () {
    this.timeout(15_000);
    await browser?.close();
    browser = null;
  });

  return {
    async open(options) {
      if (!browser) throw new Error('no browser (used outside a test?)');
      const watched = await browser.open(options);
      current.push(watched);
      return watched;
    },
  };
}
