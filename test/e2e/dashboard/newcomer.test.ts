import { expect } from 'chai';
import { checkAccessibility, screenshot, settled, useBrowser } from '../../helpers/browser.ts';
import { field, scrollsSideways, section, signIn, startDashboardDaemon, type ApiMessage, type DashboardDaemon } from './daemon.ts';

/**
 * The "done when", in a real browser on a running daemon: a newcomer who followed the
 * README's first message (init's key, example.test added and marked verified by hand, "First message"
 * sent to you@example.org through the API and delivered) signs in with the key, finds that message
 * by its recipient, reads it delivered with its DKIM selector and its events, sees the domain's
 * DNS records and a statistics chart. Each screen passes the accessibility check, on a desktop
 * and on a phone in dark mode (screenshots kept under test/artifacts/dashboard/).
 */
describe('e2e: dashboard, the README newcomer', function () {
  this.timeout(60_000);
  const browser = useBrowser();
  let daemon: DashboardDaemon;
  let message: ApiMessage;
  /** The selector of the DKIM signature the sink received. */
  let selector: string;

  before(async function () {
    this.timeout(60_000);
    daemon = await startDashboardDaemon('postilion-e2e-dashboard-newcomer-');
    const sent = await daemon.send({ from: 'hello@example.test', to: 'you@example.org', subject: 'First message' });
    message = await daemon.until(sent.id, (m) => m.status === 'Delivered', 'Delivered');
    const [received] = await daemon.sink.waitFor(1);
    selector = /^DKIM-Signature:[^]*?\bs=([A-Za-z0-9._-]+);/m.exec(received!.raw)![1]!;
  });

  after(async () => {
    await daemon?.stop();
  });

  it('signs in with the key, finds the first message by its recipient and reads it delivered, DKIM-signed, with its events', async () => {
    const { page } = await browser.open();
    await signIn(page, daemon.url, daemon.key);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Messages' }).click();
    await page.getByRole('heading', { level: 1, name: 'Messages' }).waitFor();
    await checkAccessibility(page, 'Messages');

    await page.getByLabel('Recipient').fill('you@example.org');
    await page.getByRole('button', { name: 'Search' }).click();
    const table = page.getByRole('table', { name: 'Messages' });
    await table.getByRole('link', { name: 'First message' }).click();
    await page.waitForURL(`**/ui/#/messages/${message.id}`);
    await page.getByRole('heading', { level: 1, name: 'First message' }).waitFor();

    expect(await field(page, 'Status').innerText()).to.match(/delivered/i);
    expect(await field(page, 'From').innerText()).to.contain('hello@example.test');
    expect(await field(page, 'To').innerText()).to.contain('you@example.org');
    expect(await field(page, 'Message ID').innerText()).to.contain(message.id);
    expect((await field(page, 'DKIM selector').innerText()).trim()).to.equal(selector);
    expect(await field(page, 'Remote reply').innerText()).to.match(/\b250\b/);

    // Its reception and its delivery at least, the delivery last.
    const events = await section(page, 'Events');
    expect(events.entries, events.text).to.be.at.least(2);
    expect(events.text).to.match(/delivered/i);
    await page.getByRole('heading', { level: 2, name: 'Opens and clicks' }).waitFor();
    await page.getByRole('heading', { level: 2, name: 'Webhook deliveries' }).waitFor();
    // It was not scheduled: nothing to cancel.
    expect(await page.getByRole('button', { name: 'Cancel scheduled message' }).count()).to.equal(0);
    await checkAccessibility(page, 'the message');
    await screenshot(page, 'newcomer-message');
  });

  it("shows the domain's DNS records, each with its state as DNS holds it (what is there when wrong) and a value to copy, and its DKIM keys", async () => {
    // The newcomer's DNS holds an SPF record that does not name this server.
    const wrongSpf = 'v=spf1 ip4:198.51.100.7 -all';
    daemon.dns.zone.set('example.test', 'TXT', ['site-verification=1', wrongSpf]);
    const { page } = await browser.open();
    await signIn(page, daemon.url, daemon.key);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Domains' }).click();
    await page.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();
    await checkAccessibility(page, 'Domains');
    await page.getByRole('table', { name: 'Domains' }).getByRole('link', { name: 'example.test' }).click();
    await page.getByRole('heading', { level: 1, name: 'example.test' }).waitFor();

    const records = page.getByRole('table', { name: 'DNS records' });
    for (const column of ['Type', 'Name', 'Value', 'Status']) await records.getByRole('columnheader', { name: column }).waitFor();
    const domain = (await daemon.api('GET', `/accounts/${daemon.account}/domains/example.test`)).body;
    const expected = domain.dns_records as Array<{ type: string; host: string; content: string }>;
    const rows = records.locator('tbody tr');
    expect(await rows.count()).to.equal(expected.length);
    const statusAt = await records.getByRole('columnheader').evaluateAll((ths) => ths.findIndex((th) => th.textContent?.trim() === 'Status'));
    // The statuses come from a look-up in DNS when the page opens: the SPF record reads wrong, with what was found.
    const spf = rows.filter({ hasText: 'SPF (merge' });
    expect(await spf.count()).to.equal(1);
    await spf.getByRole('cell').nth(statusAt).getByText('wrong', { exact: true }).waitFor();
    expect(await spf.innerText()).to.contain(`Found instead: ${wrongSpf}`);
    expect(await spf.innerText()).to.not.contain('site-verification');
    for (let i = 0; i < expected.length; i++) {
      const cells = rows.nth(i).getByRole('cell');
      expect((await cells.nth(statusAt).innerText()).trim()).to.match(/^(propagated|missing|wrong)$/);
    }
    // Nothing is published in this set-up (the README's domain is verified by hand): the DKIM key is missing, and its exact value is there to copy.
    const dkim = rows.filter({ hasText: `${selector}._domainkey.example.test` });
    expect(await dkim.count()).to.equal(1);
    expect((await dkim.getByRole('cell').nth(statusAt).innerText()).trim()).to.equal('missing');
    const dkimValue = expected.find((r) => r.host === `${selector}._domainkey.example.test`)!.content;
    expect(await dkim.innerText()).to.contain(dkimValue.slice(0, 40));
    expect(await records.getByRole('button', { name: /^Copy/ }).count()).to.be.at.least(expected.length);
    expect((await section(page, 'DKIM keys')).text).to.contain(selector);
    await checkAccessibility(page, 'the domain');
    await screenshot(page, 'newcomer-domain');

    // Fixed in DNS, "Check now" reads the records again: SPF is propagated.
    const spfValue = expected.find((r) => r.type === 'TXT' && r.content.startsWith('v=spf1'))!.content;
    daemon.dns.zone.set('example.test', 'TXT', ['site-verification=1', spfValue]);
    await page.getByRole('button', { name: 'Check now' }).click();
    await spf.getByRole('cell').nth(statusAt).getByText('propagated', { exact: true }).waitFor();
    expect(await spf.innerText()).to.not.contain('Found instead');
    // DNS not answering: the records read "not checked".
    daemon.dns.failing = true;
    try {
      await page.getByRole('button', { name: 'Check now' }).click();
      await spf.getByRole('cell').nth(statusAt).getByText('not checked', { exact: true }).waitFor();
      expect((await dkim.getByRole('cell').nth(statusAt).innerText()).trim()).to.equal('not checked');
    } finally {
      daemon.dns.failing = false;
    }
    daemon.dns.zone.delete('example.test', 'TXT');
  });

  it('shows deliverability, bounces and delivery time as charts', async () => {
    const { page } = await browser.open();
    await signIn(page, daemon.url, daemon.key);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Statistics' }).click();
    await page.getByRole('heading', { level: 1, name: 'Statistics' }).waitFor();
    for (const control of ['From', 'To', 'Group by', 'Domain']) await page.getByLabel(control, { exact: true }).waitFor();
    // The first message was delivered today: the deliverability chart has a point.
    const deliverability = page.getByRole('figure', { name: 'Deliverability' });
    await deliverability.locator('canvas').first().waitFor();
    expect(await deliverability.getByRole('table').count(), 'the figures as a table too').to.be.at.least(1);
    for (const name of ['Bounces', 'Delivery time']) {
      const figure = page.getByRole('figure', { name });
      // A chart, or what an empty period says (no bounce here).
      await figure.locator('canvas').or(figure.getByText('No data for this period')).first().waitFor();
    }
    await checkAccessibility(page, 'Statistics');
    await screenshot(page, 'newcomer-statistics');
  });

  it('every screen on a phone in dark mode: readable at 390 px and accessible', async () => {
    const { page } = await browser.open({ viewport: 'phone', colorScheme: 'dark' });
    await page.goto(`${daemon.url}/ui/`);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await checkAccessibility(page, 'sign-in (phone, dark)');
    await screenshot(page, 'newcomer-phone-dark-sign-in');
    await page.getByLabel('API key').fill(daemon.key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Signed in, the account's first screen (the navigation may be folded away on a phone).
    await page.getByRole('heading', { level: 1, name: 'Messages' }).waitFor();
    for (const [route, title] of [
      ['#/messages', 'Messages'],
      [`#/messages/${message.id}`, 'First message'],
      ['#/domains', 'Domains'],
      ['#/domains/example.test', 'example.test'],
      ['#/statistics', 'Statistics'],
    ] as const) {
      await page.goto(`${daemon.url}/ui/${route}`);
      await page.getByRole('heading', { level: 1, name: title }).waitFor();
      // What the screen loads has arrived before it is judged.
      await settled(page);
      expect(await scrollsSideways(page), `${route} scrolls sideways at 390 px`).to.equal(false);
      await checkAccessibility(page, `${route} (phone, dark)`);
      await screenshot(page, `newcomer-phone-dark-${route.replace('#/', '')}`);
    }
  });
  it('offers to cancel a scheduled message, and cancelling it leaves it Cancelled', async () => {
    const firstAttempt = new Date(Date.now() + 3_600_000).toISOString();
    const res = await daemon.api('POST', `/accounts/${daemon.account}/messages`, {
      from: { email: 'hello@example.test' },
      recipients: [{ email: 'later@example.org' }],
      subject: 'Scheduled message',
      text_content: 'Later',
      schedule: { first_attempt: firstAttempt },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const scheduled = await daemon.until(res.body.data[0].id as string, () => true, 'readable');
    const { page } = await browser.open();
    await signIn(page, daemon.url, daemon.key);
    await page.goto(`${daemon.url}/ui/#/messages/${scheduled.id}`);
    await page.getByRole('heading', { level: 1, name: 'Scheduled message' }).waitFor();
    const ask = page.getByRole('button', { name: 'Cancel scheduled message' });
    await ask.waitFor();
    expect(await field(page, 'Scheduled for').locator('time').getAttribute('datetime')).to.equal(firstAttempt);
    expect((await field(page, 'DKIM selector').innerText()).trim()).to.equal('—');
    await ask.click();
    await page.getByRole('button', { name: 'Yes, cancel it' }).click();
    await page.getByRole('status').filter({ hasText: 'The message was cancelled' }).waitFor();
    await field(page, 'Status')
      .filter({ hasText: /cancelled/i })
      .waitFor();
    expect(await page.getByRole('button', { name: 'Cancel scheduled message' }).count()).to.equal(0);
    await daemon.until(scheduled.id, (m) => m.status === 'Cancelled', 'Cancelled');
    await checkAccessibility(page, 'a cancelled message');
    await screenshot(page, 'newcomer-message-cancelled');

    // Read again: nothing left to cancel.
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Scheduled message' }).waitFor();
    await settled(page);
    expect(await page.getByRole('button', { name: 'Cancel scheduled message' }).count()).to.equal(0);
  });
});
