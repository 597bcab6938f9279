import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { ReadyQueues } from '../../../src/queue/ready-queues.ts';
import { LaneShaping } from '../../../src/queue/shaping/lane-shaping.ts';
import { durationMs, matchReply, parseShapingFile, providerOfLane, shapingRules, ShapingRulesError, type Provider } from '../../../src/queue/shaping/rules.ts';
import { renewThrottle, startThrottle, throttledLimits } from '../../../src/queue/shaping/throttle.ts';

const shipped = parseShapingFile(readFileSync(new URL('../../../config/shaping.yaml', import.meta.url), 'utf8'), 'config/shaping.yaml');
const providers = shapingRules(shipped);
const byId = (id: string) => providers.find((p) => p.id === id)!;
const rule = (id: string, code: number, text: string) => matchReply(byId(id), code, `${code} ${text}`);

describe('traffic shaping rules (config/shaping.yaml)', () => {
  it('names a provider for the MX hosts of each large mailbox provider, by suffix, and none for others', () => {
    const cases: Record<string, string | null> = {
      'alt1.gmail-smtp-in.l.google.com,gmail-smtp-in.l.google.com': 'gmail',
      'aspmx.l.google.com': 'gmail',
      'hotmail-com.olc.protection.outlook.com': 'microsoft',
      'contoso-com.mail.protection.outlook.com': 'microsoft',
      'mta5.am0.yahoodns.net,mta6.am0.yahoodns.net': 'yahoo',
      'mx-aol.mail.gm0.yahoodns.net': 'yahoo',
      'mx01.mail.icloud.com,mx02.mail.icloud.com': 'icloud',
      'mx00.emig.gmx.net': 'gmx-webde',
      'mx-ha03.web.de': 'gmx-webde',
      'mxs.mail.ru': 'mailru',
      'mx.yandex.ru': 'yandex',
      'mx1.example.org,mx2.example.org': null,
      'notgoogle.com': null,
      'https://hooks.google.com': null,
    };
    for (const [destination, id] of Object.entries(cases)) expect(providerOfLane(providers, destination)?.id ?? null, destination).to.equal(id);
    // A lane of a delivery source: its destination decides.
    expect(providerOfLane(providers, 'ip2/gmail-smtp-in.l.google.com')?.id).to.equal('gmail');
  });

  it('slows or suspends on the throttling and reputation replies the providers document, and not on replies about one recipient', () => {
    expect(rule('gmail', 421, '4.7.28 [192.0.2.1] Our system has detected an unusual rate of unsolicited mail')).to.include({
      name: 'unsolicited-rate',
      action: 'slow',
    });
    expect(rule('gmail', 450, '4.2.1 The user you are trying to contact is receiving mail too quickly')).to.equal(null);
    expect(rule('gmail', 550, '5.1.1 The email account that you tried to reach does not exist')).to.equal(null);
    expect(rule('microsoft', 451, '4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation. (S775)')).to.include({
      name: 'ip-reputation-rate',
      action: 'slow',
    });
    expect(rule('microsoft', 550, "5.7.1 Unfortunately, messages from [192.0.2.1] weren't sent. (S3150)")).to.include({
      name: 'block-list',
      action: 'suspend',
    });
    expect(rule('yahoo', 421, '4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or user complaints')).to.include({
      name: 'tss04-volume-or-complaints',
      action: 'suspend',
    });
    expect(rule('yahoo', 250, 'ok')).to.equal(null);
  });

  it('gives every provider connections and messages per connection, and every reply rule a time', () => {
    for (const p of providers) {
      expect(p.limits.concurrency, p.id).to.be.a('number');
      expect(p.limits.messagesPerConnection, p.id).to.be.a('number');
      expect(p.replies.length, p.id).to.be.greaterThan(0);
      for (const r of p.replies) expect(r.holdMs, `${p.id}/${r.name}`).to.be.greaterThan(0);
    }
  });

  it("takes the operator's file over the shipped one: fields of a provider, its replies as a list, a provider dropped or added", () => {
    const operator = parseShapingFile(
      [
        'version: 1',
        'providers:',
        '  gmail: { connections: 3, per_second: 2, replies: [] }',
        '  yandex: { enabled: false }',
        '  corp: { mx: [mx.corp.example], connections: 2, replies: [{ name: slow-down, match: "/slow down/i", action: slow, for: 5m }] }',
      ].join('\n'),
      'mine.yaml',
    );
    const merged = shapingRules(shipped, operator, 'mine.yaml');
    const gmail = merged.find((p) => p.id === 'gmail')!;
    expect(gmail.limits).to.deep.equal({ concurrency: 3, rate: 2, messagesPerConnection: 100 });
    expect(gmail.replies).to.deep.equal([]);
    expect(merged.some((p) => p.id === 'yandex')).to.equal(false);
    expect(providerOfLane(merged, 'mx.corp.example')?.id).to.equal('corp');
    expect(() => shapingRules(shipped, parseShapingFile('version: 1\nproviders:\n  other: { connections: 2 }', 'mine.yaml'), 'mine.yaml')).to.throw(
      ShapingRulesError,
      /providers\.other: mx/,
    );
  });

  it('refuses a bad file with the place and the reason', () => {
    const bad = (text: string) => () => shapingRules(parseShapingFile(text, 'mine.yaml'), {}, 'mine.yaml');
    expect(bad('version: 2\nproviders: {}')).to.throw(ShapingRulesError, /mine\.yaml: version/);
    expect(bad('version: 1\nproviders:\n  x: { mx: [a.example], connections: 0 }')).to.throw(ShapingRulesError, /providers\.x\.connections/);
    expect(bad('version: 1\nproviders:\n  x: { mx: [a.example], colour: red }')).to.throw(ShapingRulesError, /providers\.x/);
    expect(bad('version: 1\nproviders:\n  x: { mx: [a.example], replies: [{ name: r, match: "/(/", action: slow, for: 5m }] }')).to.throw(
      ShapingRulesError,
      /replies\.r: match: bad regular expression/,
    );
    expect(bad('version: 1\nproviders:\n  x: { mx: [a.example], replies: [{ name: r, match: "/a/", action: slow, for: 5 }] }')).to.throw(ShapingRulesError);
    expect(() => durationMs('8d')).to.throw(ShapingRulesError, /longer than a week/);
    expect(durationMs('90s')).to.equal(90_000);
  });
});

describe('throttles', () => {
  const T0 = 1_800_000_000_000;
  const gmail = byId('gmail');
  const slow = gmail.replies.find((r) => r.name === 'unsolicited-rate')!;
  const yahooSuspend = byId('yahoo').replies[0]!;

  it('holds the slowed limits for the rule time, then ramps back evenly to the lane own, then ends', () => {
    const t = startThrottle('gmail', slow, '421 4.7.28 …', T0);
    const base = { concurrency: 10, rate: undefined };
    expect(throttledLimits(base, t, T0)).to.deep.equal({ concurrency: 1, rate: 600 / 3600 });
    expect(throttledLimits(base, t, T0 + slow.holdMs - 1)).to.deep.equal({ concurrency: 1, rate: 600 / 3600 });
    const half = throttledLimits(base, t, T0 + slow.holdMs + slow.rampMs / 2)!;
    expect(half.concurrency).to.equal(5);
    // Without a rate of its own the lane climbs to ten times the slowed rate, then none.
    expect(half.rate).to.be.closeTo((600 / 3600) * 5.5, 1e-9);
    expect(throttledLimits(base, t, T0 + slow.holdMs + slow.rampMs)).to.equal(null);
    // Never above the lane's own.
    expect(throttledLimits({ concurrency: 1, rate: 0.01 }, t, T0)).to.deep.equal({ concurrency: 1, rate: 0.01 });
  });

  it('holds a throttle longer on another match, and never softens a suspension into a slow-down', () => {
    const t = startThrottle('yahoo', yahooSuspend, 'a', T0);
    expect(renewThrottle(t, 'yahoo', slow, 'b', T0 + 1000)).to.equal(null);
    const again = renewThrottle(t, 'yahoo', yahooSuspend, 'c', T0 + 60_000)!;
    expect(again.since).to.equal(T0);
    expect(again.holdUntil).to.equal(T0 + 60_000 + yahooSuspend.holdMs);
    expect(again.reply).to.equal('c');
  });
});

describe('LaneShaping', () => {
  let now = 1_800_000_000_000;
  const clock = { now: () => now };
  const make = (list: Provider[] = providers) => new LaneShaping(list, 5, clock);
  const gmailLane = 'gmail-smtp-in.l.google.com';

  it("gives a lane its provider's limits, the operator's own winning field by field, and no limits to other lanes", () => {
    const s = make();
    expect(s.limitsOf(gmailLane, undefined)).to.include({ concurrency: 10 });
    expect(s.limitsOf(gmailLane, { rate: 3 })).to.deep.equal({ concurrency: 10, rate: 3 });
    expect(s.limitsOf(gmailLane, { concurrency: 2 })).to.deep.equal({ concurrency: 2, rate: undefined });
    expect(s.limitsOf('mx1.example.org', undefined)).to.equal(undefined);
    expect(s.limitsOf('mx1.example.org', { concurrency: 2 })).to.deep.equal({ concurrency: 2 });
    expect(s.messagesPerConnection('alt2.gmail-smtp-in.l.google.com')).to.equal(100);
    expect(s.messagesPerConnection('mx1.example.org')).to.equal(undefined);
  });

  it('slows only the lane (source and destination) whose reply matched, shows it, and lets it go once over', () => {
    const s = make();
    const change = s.observe(`ip1/${gmailLane}`, 421, '421 4.7.28 [192.0.2.1] unusual rate of unsolicited mail')!;
    expect(change.started).to.equal(true);
    expect(s.limitsOf(`ip1/${gmailLane}`, undefined)).to.deep.equal({ concurrency: 1, rate: 600 / 3600 });
    expect(s.limitsOf(`ip2/${gmailLane}`, undefined)).to.include({ concurrency: 10 });
    expect(s.limitsOf(gmailLane, undefined)).to.include({ concurrency: 10 });
    expect(s.throttledLanes()).to.deep.equal([`ip1/${gmailLane}`]);
    expect(s.view(`ip1/${gmailLane}`)!.throttle).to.include({
      rule: 'unsolicited-rate',
      action: 'slow',
      reply: '421 4.7.28 [192.0.2.1] unusual rate of unsolicited mail',
    });
    expect(s.view(`ip2/${gmailLane}`)).to.deep.equal({ provider: 'gmail', throttle: null });
    expect(s.view('mx1.example.org')).to.equal(null);
    // A second reply holds it longer: not a new throttle.
    expect(s.observe(`ip1/${gmailLane}`, 421, '421 4.7.28 again')!.started).to.equal(false);
    expect(s.observe('mx1.example.org', 421, '421 4.7.28 not a provider of ours')).to.equal(null);
    now += 3 * 3_600_000;
    expect(s.limitsOf(`ip1/${gmailLane}`, undefined)).to.include({ concurrency: 10 });
    expect(s.throttledLanes()).to.deep.equal([]);
  });
});

describe('ready queues under a concurrency that changes (shaping)', () => {
  it('counts against the total only what runs within the concurrency of the moment, and nothing once all is released', () => {
    const pool = new ReadyQueues({ concurrency: 20, perDestination: 5, readyLimit: 100 });
    // Slowed to one: one runs.
    pool.start('lane', 1);
    expect(pool.running).to.equal(1);
    // Ramping back to three: two more.
    pool.start('lane', 3);
    pool.start('lane', 3);
    expect(pool.running).to.equal(3);
    // The first one's release carries the concurrency it started under; the count stays right.
    pool.release('lane', 1);
    pool.release('lane', 3);
    expect(pool.running).to.equal(1);
    pool.release('lane', 3);
    expect(pool.running).to.equal(0);
    expect(pool.names().size).to.equal(0);
  });
});
