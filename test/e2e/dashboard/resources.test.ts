import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { checkAccessibility, useBrowser } from '../../helpers/browser.ts';
import { signIn, startDashboardDaemon, type DashboardDaemon } from './daemon.ts';

/**
 * The account's resource screens the newcomer does not visit, in a real browser on a running
 * daemon: a webhook and a route are created with their signing secret shown once, and the webhook
 * is edited and deleted after its confirmation; an API key and an SMTP credential are created with their
 * secret shown once; a suppression is added and deleted after its confirmation. Each screen, and
 * each confirmation, passes the accessibility check.
 */
describe('e2e: dashboard, webhooks, routes, keys, SMTP credentials and suppressions', function () {
  this.timeout(60_000);
  const browser = useBrowser();
  let daemon: DashboardDaemon;
  let page: Page;

  before(async function () {
    this.timeout(60_000);
    daemon = await startDashboardDaemon('postilion-e2e-dashboard-resources-');
  });

  after(async () => {
    await daemon?.stop();
  });

  beforeEach(async () => {
    page = (await browser.open()).page;
    await signIn(page, daemon.url, daemon.key);
  });

  const open = async (route: string, title: string) => {
    await page.goto(`${daemon.url}/ui/${route}`);
    await page.getByRole('heading', { level: 1, name: title }).waitFor();
  };

  /** The block of a secret shown once: its heading, the words "shown once", a Copy button, the secret. */
  const shownOnce = async (heading: string): Promise<string> => {
    const block = page.getByRole('region', { name: heading });
    await block.waitFor();
    expect(await block.innerText()).to.contain('shown once');
    await block.getByRole('button', { name: /^Copy/ }).waitFor();
    const secret = (await block.locator('code').first().innerText()).trim();
    expect(secret.length, 'the secret').to.be.at.least(16);
    return secret;
  };

  it('creates a webhook with its signing secret shown once, edits it and deletes it after confirming', async () => {
    await open('#/webhooks', 'Webhooks');
    await checkAccessibility(page, 'Webhooks');
    await page.getByRole('button', { name: 'New webhook' }).click();
    await page.getByRole('heading', { level: 1, name: 'New webhook' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('Order system');
    await page.getByLabel('URL', { exact: true }).fill('https://hooks.example.com/mail');
    // Created disabled: nothing is ever sent to that address.
    await page.getByLabel('Enabled', { exact: true }).uncheck();
    await checkAccessibility(page, 'New webhook');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    await shownOnce('Signing secret');
    await checkAccessibility(page, 'New webhook, its secret');

    await page.getByRole('link', { name: 'Open the webhook' }).click();
    await page.getByRole('heading', { level: 1, name: 'Order system' }).waitFor();
    await page.getByRole('heading', { level: 2, name: 'Recent deliveries' }).waitFor();
    for (const name of ['Enable', 'Send test event']) await page.getByRole('button', { name }).waitFor();
    await checkAccessibility(page, 'a webhook');

    await page.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: 'Edit webhook' });
    await edit.getByLabel('Name', { exact: true }).fill('Order system (old)');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'Changes saved.' }).waitFor();
    await page.getByRole('heading', { level: 1, name: 'Order system (old)' }).waitFor();

    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this webhook?' });
    await dialog.waitFor();
    await checkAccessibility(page, 'deleting a webhook');
    await dialog.getByRole('button', { name: 'Delete webhook' }).click();
    await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
    await page.getByText('No webhooks yet.').waitFor();
    const listed = await daemon.api('GET', `/accounts/${daemon.account}/webhooks`);
    expect(listed.body.data).to.deep.equal([]);
  });

  it('creates a route with its signing secret shown once, and lists it', async () => {
    await open('#/routes', 'Routes');
    await page.getByRole('button', { name: 'New route' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Support');
    await page.getByLabel('Recipient', { exact: true }).fill('support@example.test');
    await page.getByLabel('URL', { exact: true }).fill('https://hooks.example.com/inbound');
    await page.getByLabel('Enabled', { exact: true }).uncheck();
    await page.getByRole('button', { name: 'Create route' }).click();
    await shownOnce('Signing secret');
    await page.getByRole('link', { name: 'Back to routes' }).click();
    await page.getByRole('table', { name: 'Routes' }).getByRole('link', { name: 'Support' }).waitFor();
    await checkAccessibility(page, 'Routes');
  });

  it('creates an API key and an SMTP credential, each secret shown once', async () => {
    await open('#/api-keys', 'API keys');
    await page.getByRole('button', { name: 'New API key' }).click();
    await page.getByLabel('Label', { exact: true }).fill('Reporting');
    await page.getByRole('checkbox', { name: 'messages:read' }).check();
    await checkAccessibility(page, 'New API key');
    await page.getByRole('button', { name: 'Create API key' }).click();
    const secret = await shownOnce('Secret');
    expect(secret).to.match(/-sk-/);
    await page
      .getByRole('table', { name: 'API keys' })
      .getByRole('rowheader', { name: /Reporting/ })
      .waitFor();
    await checkAccessibility(page, 'API keys, a secret');

    await open('#/smtp-credentials', 'SMTP credentials');
    await page.getByRole('button', { name: 'New SMTP credential' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Billing app');
    await page.getByLabel('Domains', { exact: true }).fill('example.test');
    await page.getByRole('button', { name: 'Create SMTP credential' }).click();
    await shownOnce('Password');
    await page.getByRole('table', { name: 'SMTP credentials' }).getByRole('rowheader', { name: 'Billing app' }).waitFor();
    await checkAccessibility(page, 'SMTP credentials, a password');
  });

  it('adds a suppression and deletes it after confirming', async () => {
    await open('#/suppressions', 'Suppressions');
    await page.getByRole('button', { name: 'Add suppression' }).click();
    await page.getByLabel('Email address', { exact: true }).fill('gone@example.org');
    await page.getByLabel('Expires', { exact: true }).fill('2099-01-01T00:00');
    await checkAccessibility(page, 'Add a suppression');
    await page.getByRole('button', { name: 'Add suppression', exact: true }).last().click();
    const row = page.getByRole('table', { name: 'Suppressions' }).getByRole('row').filter({ hasText: 'gone@example.org' });
    await row.waitFor();
    await row.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await checkAccessibility(page, 'deleting a suppression');
    await dialog.getByRole('button', { name: 'Delete suppression' }).click();
    await page.getByRole('status').filter({ hasText: 'gone@example.org' }).waitFor();
    await row.waitFor({ state: 'detached' });
  });

  it('shows the members and sub-accounts screens and their forms accessibly', async () => {
    for (const [route, title, button, form] of [
      ['#/members', 'Members', 'Add member', 'Add a member'],
      ['#/sub-accounts', 'Sub-accounts', 'New sub-account', 'New sub-account'],
    ] as const) {
      await open(route, title);
      await checkAccessibility(page, title);
      await page.getByRole('button', { name: button }).click();
      await page.getByRole('form', { name: form }).waitFor();
      await checkAccessibility(page, form);
    }
  });
});
