import { expect } from 'chai';
import { checkAccessibility, screenshot, settled, useBrowser } from '../../helpers/browser.ts';
import { DEFERRING_DOMAIN, operatorLink, scrollsSideways, startDashboardDaemon, type DashboardDaemon } from './daemon.ts';

/**
 * The operator's view in a real browser on a running daemon: the one-time link `postilion ui
 * login` prints signs in (once), the queue shows a destination whose MX answers 4xx with the mail
 * waiting for it, and Suspend and Resume there act on the daemon's queue.
 */
describe('e2e: dashboard, the operator', function () {
  this.timeout(60_000);
  const browser = useBrowser();
  let daemon: DashboardDaemon;

  before(async function () {
    this.timeout(60_000);
    daemon = await startDashboardDaemon('postilion-e2e-dashboard-operator-');
    // Its MX refuses with 451: the message waits for its next attempt, minutes away.
    const sent = await daemon.send({ from: 'hello@example.test', to: `someone@${DEFERRING_DOMAIN}`, subject: 'Waits in the queue' });
    await daemon.until(sent.id, (m) => m.num_attempts > 0, 'tried once');
  });

  after(async () => {
    await daemon?.stop();
  });

  it('signs in with the link of `postilion ui login`, shows the waiting destination, suspends and resumes it', async () => {
    const { page } = await browser.open();
    // A confirmation, if the screen asks for one, is given.
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(await operatorLink(daemon));
    await page.getByRole('heading', { level: 1, name: 'Queue' }).waitFor();
    // The token is taken off the address at once.
    expect(page.url()).not.to.contain('operator-login');
    const nav = page.getByRole('navigation', { name: 'Main' });
    for (const name of ['Queue', 'Accounts', 'System']) await nav.getByRole('link', { name }).waitFor();
    expect(await nav.getByRole('link', { name: 'Messages' }).count(), "an account's screens are not the operator's").to.equal(0);

    const row = page.getByRole('table', { name: 'Queue by destination' }).getByRole('row').filter({ hasText: DEFERRING_DOMAIN });
    await row.waitFor();
    expect((await row.getByRole('cell').allInnerTexts()).map((text) => text.trim())).to.include('1');
    await page.getByRole('heading', { level: 2, name: 'Held mail' }).waitFor();
    await checkAccessibility(page, 'Queue');
    await screenshot(page, 'operator-queue');

    await row.getByRole('button', { name: 'Suspend' }).click();
    await row.getByRole('button', { name: 'Resume' }).waitFor();
    expect(await daemon.cli('queue', 'status')).to.match(/suspended/);
    await screenshot(page, 'operator-queue-suspended');
    await row.getByRole('button', { name: 'Resume' }).click();
    await row.getByRole('button', { name: 'Suspend' }).waitFor();
    expect(await daemon.cli('queue', 'status')).not.to.match(/suspended/);
    await row.getByRole('button', { name: 'Retry' }).waitFor();
  });

  it('refuses a link used once already', async () => {
    const link = await operatorLink(daemon);
    const first = await browser.open();
    await first.page.goto(link);
    await first.page.getByRole('heading', { level: 1, name: 'Queue' }).waitFor();

    const { page } = await browser.open();
    await page.goto(link);
    await page
      .getByRole('alert')
      .filter({ hasText: /not valid/ })
      .waitFor();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await checkAccessibility(page, 'sign-in after a used link');
  });

  it('shows the accounts and the system, accessible, and the queue on a phone in dark mode', async () => {
    const { page } = await browser.open();
    await page.goto(await operatorLink(daemon));
    const nav = page.getByRole('navigation', { name: 'Main' });
    await nav.getByRole('link', { name: 'Accounts' }).click();
    await page.getByRole('heading', { level: 1, name: 'Accounts' }).waitFor();
    await page.getByRole('button', { name: 'Suspend' }).first().waitFor();
    await checkAccessibility(page, 'Accounts');
    await screenshot(page, 'operator-accounts');
    await nav.getByRole('link', { name: 'System' }).click();
    await page.getByRole('heading', { level: 1, name: 'System' }).waitFor();
    for (const name of ['Readiness', 'Listeners', 'Nodes']) await page.getByRole('heading', { level: 2, name }).waitFor();
    await checkAccessibility(page, 'System');
    await screenshot(page, 'operator-system');

    const phone = await browser.open({ viewport: 'phone', colorScheme: 'dark' });
    await phone.page.goto(await operatorLink(daemon));
    await phone.page.getByRole('table', { name: 'Queue by destination' }).getByRole('row').filter({ hasText: DEFERRING_DOMAIN }).waitFor();
    await settled(phone.page);
    expect(await scrollsSideways(phone.page), 'the queue scrolls sideways at 390 px').to.equal(false);
    await checkAccessibility(phone.page, 'Queue (phone, dark)');
    await screenshot(phone.page, 'operator-phone-dark-queue');
  });
});
