import { expect } from 'chai';
import { botReason, type Hit } from '../../../src/tracking/bots.ts';

const CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';
const FIREFOX = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:125.0) Gecko/20100101 Firefox/125.0';
const APPLE_MAIL = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)';
const GOOGLE_PROXY = 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)';
const SCANNER_MS = 10_000;
const DELIVERED = Date.parse('2026-11-03T09:00:00Z');
const LATER = DELIVERED + 3_600_000;

function hit(fields: Partial<Hit> = {}): Hit {
  return { userAgent: CHROME, ip: '203.0.113.7', deliveredAt: DELIVERED, at: LATER, ...fields };
}

describe('botReason (who opened or clicked)', () => {
  it('lets a desktop browser an hour after delivery through as a person', () => {
    expect(botReason(hit(), SCANNER_MS)).to.equal(null);
    expect(botReason(hit({ userAgent: FIREFOX, ip: '2001:db8::1' }), SCANNER_MS)).to.equal(null);
    expect(botReason(hit({ deliveredAt: null }), SCANNER_MS)).to.equal(null);
  });

  it('flags user agents isbot knows: crawlers, HTTP libraries, headless browsers', () => {
    for (const ua of [
      'Googlebot/2.1 (+http://www.google.com/bot.html)',
      'Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)',
      'curl/8.4.0',
      'python-requests/2.31.0',
      'Go-http-client/1.1',
      'HeadlessChrome',
    ]) {
      expect(botReason(hit({ userAgent: ua }), SCANNER_MS), ua).to.equal('bot user agent');
    }
  });

  it('flags a missing or blank user agent', () => {
    expect(botReason(hit({ userAgent: '' }), SCANNER_MS)).to.equal('no user agent');
    expect(botReason(hit({ userAgent: '   \t' }), SCANNER_MS)).to.equal('no user agent');
  });

  it("flags mailbox providers' image proxies by user agent (Google, Yahoo, Outlook, Mail.ru), in any case", () => {
    for (const ua of [
      GOOGLE_PROXY,
      'Mozilla/5.0 (compatible; GoogleImageProxy)',
      'Mozilla/5.0 googleimageproxy',
      'YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html',
      'Mozilla/5.0 (compatible; OutlookProxy)',
      'Mozilla/5.0 (compatible; Mail.RU_Bot/2.0)',
    ]) {
      expect(botReason(hit({ userAgent: ua }), SCANNER_MS), ua).to.equal('mailbox image proxy');
    }
  });

  it('flags Apple Mail Privacy Protection: any agent from 17.0.0.0/8 (also IPv4-mapped IPv6), or the bare "Mozilla/5.0"', () => {
    expect(botReason(hit({ userAgent: APPLE_MAIL, ip: '17.58.101.3' }), SCANNER_MS)).to.equal('Apple Mail Privacy Protection');
    expect(botReason(hit({ userAgent: APPLE_MAIL, ip: '17.0.0.0' }), SCANNER_MS)).to.equal('Apple Mail Privacy Protection');
    expect(botReason(hit({ userAgent: APPLE_MAIL, ip: '17.255.255.255' }), SCANNER_MS)).to.equal('Apple Mail Privacy Protection');
    expect(botReason(hit({ userAgent: CHROME, ip: '::ffff:17.1.2.3' }), SCANNER_MS)).to.equal('Apple Mail Privacy Protection');
    expect(botReason(hit({ userAgent: 'Mozilla/5.0', ip: '198.51.100.4' }), SCANNER_MS)).to.equal('Apple Mail Privacy Protection');
    expect(botReason(hit({ userAgent: '  Mozilla/5.0 ', ip: '198.51.100.4' }), SCANNER_MS)).to.equal('Apple Mail Privacy Protection');
  });

  it("does not flag Apple Mail itself outside Apple's network, nor addresses that only look like 17.x", () => {
    expect(botReason(hit({ userAgent: APPLE_MAIL, ip: '198.51.100.4' }), SCANNER_MS)).to.equal(null);
    expect(botReason(hit({ userAgent: APPLE_MAIL, ip: '16.255.255.255' }), SCANNER_MS)).to.equal(null);
    expect(botReason(hit({ userAgent: APPLE_MAIL, ip: '18.0.0.1' }), SCANNER_MS)).to.equal(null);
    expect(botReason(hit({ userAgent: APPLE_MAIL, ip: '117.1.2.3' }), SCANNER_MS)).to.equal(null);
    expect(botReason(hit({ userAgent: APPLE_MAIL, ip: '2017::1' }), SCANNER_MS)).to.equal(null);
  });

  it("judges a user agent seen before as the first time, and still weighs each hit's address and time", () => {
    for (let i = 0; i < 3; i++) {
      expect(botReason(hit(), SCANNER_MS)).to.equal(null);
      expect(botReason(hit({ ip: '17.1.2.3' }), SCANNER_MS)).to.equal('Apple Mail Privacy Protection');
      expect(botReason(hit({ at: DELIVERED + 1_000 }), SCANNER_MS)).to.equal('within seconds of delivery');
      expect(botReason(hit({ userAgent: 'curl/8.4.0' }), SCANNER_MS)).to.equal('bot user agent');
      expect(botReason(hit({ userAgent: GOOGLE_PROXY }), SCANNER_MS)).to.equal('mailbox image proxy');
    }
    // Past the agents it keeps, it starts again and judges the same.
    for (let i = 0; i < 2_500; i++) botReason(hit({ userAgent: `${CHROME} build/${i}` }), SCANNER_MS);
    expect(botReason(hit({ userAgent: 'curl/8.4.0' }), SCANNER_MS)).to.equal('bot user agent');
    expect(botReason(hit(), SCANNER_MS)).to.equal(null);
  });

  it('does not throw on an IP address it cannot parse', () => {
    for (const ip of ['', 'unknown', '17.1.2.3.4', '999.1.1.1', '17.x.y.z']) {
      expect(() => botReason(hit({ ip }), SCANNER_MS), ip).to.not.throw();
      expect(botReason(hit({ ip }), SCANNER_MS), ip).to.equal(null);
    }
  });

  it('flags a hit within the scanner window after delivery, and not one at or after its end', () => {
    expect(botReason(hit({ at: DELIVERED }), SCANNER_MS)).to.equal('within seconds of delivery');
    expect(botReason(hit({ at: DELIVERED + 2_000 }), SCANNER_MS)).to.equal('within seconds of delivery');
    expect(botReason(hit({ at: DELIVERED + SCANNER_MS - 1 }), SCANNER_MS)).to.equal('within seconds of delivery');
    expect(botReason(hit({ at: DELIVERED + SCANNER_MS }), SCANNER_MS)).to.equal(null);
    expect(botReason(hit({ at: DELIVERED + SCANNER_MS + 1 }), SCANNER_MS)).to.equal(null);
  });

  it('takes the window length from its argument: 0 turns the scanner check off', () => {
    expect(botReason(hit({ at: DELIVERED + 20_000 }), 30_000)).to.equal('within seconds of delivery');
    expect(botReason(hit({ at: DELIVERED + 20_000 }), 10_000)).to.equal(null);
    expect(botReason(hit({ at: DELIVERED }), 0)).to.equal(null);
  });

  it('does not apply the scanner window to a message with no delivery time', () => {
    expect(botReason(hit({ deliveredAt: null, at: DELIVERED }), SCANNER_MS)).to.equal(null);
  });

  it('names the first reason that applies: the user agent before the network, the network before the timing', () => {
    expect(botReason(hit({ userAgent: '', ip: '17.1.2.3', at: DELIVERED }), SCANNER_MS)).to.equal('no user agent');
    expect(botReason(hit({ userAgent: GOOGLE_PROXY, ip: '17.1.2.3', at: DELIVERED }), SCANNER_MS)).to.equal('mailbox image proxy');
    expect(botReason(hit({ userAgent: 'curl/8.4.0', ip: '17.1.2.3' }), SCANNER_MS)).to.equal('Apple Mail Privacy Protection');
    expect(botReason(hit({ userAgent: 'curl/8.4.0', at: DELIVERED }), SCANNER_MS)).to.equal('bot user agent');
  });
});
