import { expect } from 'chai';
import { messageEventData } from '../../../src/events/message-data.ts';
import type { Event, MessageEventName } from '../../../src/events/types.ts';
import type { MessageRecord } from '../../../src/store/records.ts';
import { newId } from '../../../src/util/ids.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { call } from '../../helpers/harness.ts';

/**
 * The three statistics operations against a hand-computed data set: eight messages of two
 * sender domains to two recipient domains over five days (and one in December), with tags,
 * recorded through the daemon's own EventRecorder (so through the counters observer, in the
 * event's batch), at the times below. Every response is checked against the OpenAPI document
 * by `call`. The expected figures are written out by hand from this table:
 *
 *  m1 11-02 10:15 example.com→gmail.com [welcome]        delivered 10:17 (120 s)
 *  m2 11-02 10:40 example.com→yahoo.com                  bounced 10:41 InvalidRecipient
 *  m3 11-02 23:30 example.net→gmail.com [promo]          deferred 23:31, delivered 11-03 00:30 (3600 s)
 *  m4 11-03 09:00 example.com→gmail.com [welcome,promo]  delivered 09:00:30 (30 s), opened 12:00, clicked 12:01
 *  m5 11-03 09:05 example.net→yahoo.com [welcome]        suppressed 09:05
 *  m6 11-03 14:00 example.com→yahoo.com                  deferred 14:01, failed 11-04 14:00
 *  m7 11-09 08:00 example.com→gmail.com [promo]          delivered 08:10 (600 s), bounced 09:00 QuotaIssues (late)
 *  m8 12-01 00:30 example.net→gmail.com                  delivered 00:31 (60 s)
 *  plus a sandbox message (never counted), a bot's open and a second open of m4 (not counted).
 */
const T = (s: string) => Date.parse(`2026-${s}Z`);

type Step = { at: string; type: Event['type']; change?: Partial<MessageRecord>; first?: boolean };
interface Plan {
  at: string;
  domain: 'example.com' | 'example.net';
  to: string;
  tags?: string[];
  sandbox?: boolean;
  steps: Step[];
}

const PLANS: Plan[] = [
  {
    at: '11-02T10:15:00',
    domain: 'example.com',
    to: 'a@gmail.com',
    tags: ['welcome'],
    steps: [{ at: '11-02T10:17:00', type: 'message.delivered', change: { status: 'Delivered', deliveredAt: '2026-11-02T10:17:00.000Z' } }],
  },
  {
    at: '11-02T10:40:00',
    domain: 'example.com',
    to: 'b@yahoo.com',
    steps: [{ at: '11-02T10:41:00', type: 'message.bounced', change: { status: 'Bounced', bounceClassification: 'InvalidRecipient' } }],
  },
  {
    at: '11-02T23:30:00',
    domain: 'example.net',
    to: 'c@gmail.com',
    tags: ['promo'],
    steps: [
      {
        at: '11-02T23:31:00',
        type: 'message.transient_error',
        change: { status: 'Deferred', attempts: [{ time: '2026-11-02T23:31:00.000Z', log: '451', status: 'Deferred' }] },
      },
      { at: '11-03T00:30:00', type: 'message.delivered', change: { status: 'Delivered', deliveredAt: '2026-11-03T00:30:00.000Z' } },
    ],
  },
  {
    at: '11-03T09:00:00',
    domain: 'example.com',
    to: 'd@gmail.com',
    tags: ['welcome', 'promo'],
    steps: [
      { at: '11-03T09:00:30', type: 'message.delivered', change: { status: 'Delivered', deliveredAt: '2026-11-03T09:00:30.000Z' } },
      { at: '11-03T11:00:00', type: 'message.opened', first: false },
      { at: '11-03T12:00:00', type: 'message.opened', first: true },
      { at: '11-03T12:00:10', type: 'message.opened', first: false },
      { at: '11-03T12:01:00', type: 'message.clicked', first: true },
    ],
  },
  {
    at: '11-03T09:05:00',
    domain: 'example.net',
    to: 'e@yahoo.com',
    tags: ['welcome'],
    steps: [{ at: '11-03T09:05:00', type: 'message.suppressed', change: { status: 'Suppressed' } }],
  },
  {
    at: '11-03T14:00:00',
    domain: 'example.com',
    to: 'f@yahoo.com',
    steps: [
      {
        at: '11-03T14:01:00',
        type: 'message.transient_error',
        change: { status: 'Deferred', attempts: [{ time: '2026-11-03T14:01:00.000Z', log: '451', status: 'Deferred' }] },
      },
      {
        at: '11-04T14:00:00',
        type: 'message.transient_error',
        change: {
          status: 'Failed',
          attempts: [
            { time: '2026-11-03T14:01:00.000Z', log: '451', status: 'Deferred' },
            { time: '2026-11-04T14:00:00.000Z', log: '451', status: 'Failed' },
          ],
        },
      },
      { at: '11-04T14:00:00', type: 'message.failed' },
    ],
  },
  {
    at: '11-09T08:00:00',
    domain: 'example.com',
    to: 'g@gmail.com',
    tags: ['promo'],
    steps: [
      { at: '11-09T08:10:00', type: 'message.delivered', change: { status: 'Delivered', deliveredAt: '2026-11-09T08:10:00.000Z' } },
      { at: '11-09T09:00:00', type: 'message.bounced', change: { status: 'Bounced', bounceClassification: 'QuotaIssues' } },
    ],
  },
  {
    at: '12-01T00:30:00',
    domain: 'example.net',
    to: 'h@gmail.com',
    steps: [{ at: '12-01T00:31:00', type: 'message.delivered', change: { status: 'Delivered', deliveredAt: '2026-12-01T00:31:00.000Z' } }],
  },
  {
    at: '11-03T09:00:00',
    domain: 'example.com',
    to: 'sandbox@gmail.com',
    sandbox: true,
    steps: [{ at: '11-03T09:00:00', type: 'message.delivered', change: { status: 'Sandbox Delivered', deliveredAt: '2026-11-03T09:00:00.000Z' } }],
  },
];

const EVENT_NAMES: Record<string, MessageEventName> = {
  'message.reception': 'on_reception',
  'message.delivered': 'on_delivered',
  'message.transient_error': 'on_transient_error',
  'message.bounced': 'on_bounced',
  'message.failed': 'on_failed',
  'message.suppressed': 'on_suppressed',
};

type Counts = Partial<Record<'r' | 'd' | 'df' | 'b' | 'f' | 's' | 'o' | 'c', number>>;

/** A deliverability bucket as the API writes it, from short names (absent: 0). */
function bucket(from: string, to: string, c: Counts = {}) {
  return {
    from_timestamp: from,
    to_timestamp: to,
    reception_count: c.r ?? 0,
    delivered_count: c.d ?? 0,
    deferred_count: c.df ?? 0,
    bounced_count: c.b ?? 0,
    failed_count: c.f ?? 0,
    suppressed_count: c.s ?? 0,
    opened_count: c.o ?? 0,
    clicked_count: c.c ?? 0,
  };
}

/** Day buckets from `days` (YYYY-MM-DD → counts) over [first, last] day. */
function days(first: string, count: number, known: Record<string, Counts>) {
  const out = [];
  for (let i = 0; i < count; i++) {
    const from = new Date(Date.parse(`${first}T00:00:00Z`) + i * 86_400_000);
    const key = from.toISOString().slice(0, 10);
    out.push(bucket(`${key}T00:00:00Z`, new Date(from.getTime() + 86_400_000).toISOString().replace('.000Z', 'Z'), known[key]));
  }
  return out;
}

describe('statistics from counters', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let stats: (endpoint: string, query: string, key?: string) => Promise<{ status: number; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any

  before(async () => {
    bed = await startMessageBed({ api: { rate_limits: { general: { per_second: 1000, burst: 10_000 }, statistics: { per_second: 1000, burst: 1000 } } } });
    const net = await bed.create('example.net');
    bed.publish(net);
    expect((await bed.recheck('example.net')).body.dns_valid).to.equal(true);
    const core = bed.server.daemon.core;
    const domainIds = {
      'example.com': (await core.domainsRepo.getByName('example.com'))!.id,
      'example.net': (await core.domainsRepo.getByName('example.net'))!.id,
    };
    for (const plan of PLANS) {
      bed.clock.ms = T(plan.at);
      const id = newId();
      let m: MessageRecord = {
        v: 1,
        id,
        accountId: bed.server.accountId,
        domainId: domainIds[plan.domain],
        domain: plan.domain,
        messageId: `<${id}@${plan.domain}>`,
        direction: 'outbound',
        source: 'api',
        sender: `app@${plan.domain}`,
        recipient: plan.to,
        subject: 'Hello',
        tags: plan.tags ?? [],
        status: 'Received',
        sandbox: plan.sandbox ? 'deliver' : null,
        tracking: { open: true, click: true },
        retention: { metadataDays: 30, dataDays: 30 },
        schedule: null,
        dueAt: new Date(bed.clock.ms).toISOString(),
        bodyId: 'none',
        head: '',
        contentPurged: true,
        createdAt: new Date(bed.clock.ms).toISOString(),
        updatedAt: new Date(bed.clock.ms).toISOString(),
        sentAt: null,
        deliveredAt: null,
        retainUntil: '2027-01-01T00:00:00.000Z',
        dataRetainUntil: '2027-01-01T00:00:00.000Z',
        attempts: [],
        openCount: 0,
        clickCount: 0,
        bounceClassification: '',
        isBounceNotification: false,
        referenceMessageId: null,
      };
      await core.store.commit(
        core.events.record({ type: 'message.reception', accountId: m.accountId, data: messageEventData(m, 'on_reception') }, { message: m }),
      );
      for (const step of plan.steps) {
        bed.clock.ms = T(step.at);
        m = { ...m, ...step.change, updatedAt: new Date(bed.clock.ms).toISOString() };
        const event =
          step.type === 'message.opened' || step.type === 'message.clicked'
            ? ({
                type: step.type,
                accountId: m.accountId,
                data: {
                  account_id: m.accountId,
                  event: step.type === 'message.opened' ? 'on_opened' : 'on_clicked',
                  from: m.sender,
                  recipient: m.recipient,
                  subject: m.subject,
                  message_id_header: m.messageId,
                  id: m.id,
                  url: 'https://x.example/',
                  user_agent: 'ua',
                  ip: '192.0.2.1',
                  is_bot: !step.first,
                },
              } as Event)
            : ({ type: step.type, accountId: m.accountId, data: messageEventData(m, EVENT_NAMES[step.type]!) } as Event);
        await core.store.commit(core.events.record(event, { message: m, first: step.first ?? false }));
      }
    }
    bed.clock.ms = T('12-15T00:00:00');
    stats = (endpoint, query, key) =>
      call(bed.server, 'GET', `/v2/accounts/${bed.server.accountId}/statistics/transactional/${endpoint}?${query}`, key ? { key } : {});
  });

  after(async () => {
    await bed?.stop();
  });

  const WEEK = 'from_time=2026-11-02T00:00:00Z&to_time=2026-11-10T00:00:00Z';

  it('deliverability by day, with empty days, opened and clicked counted per message', async () => {
    const res = await stats('deliverability', `${WEEK}&group_by=day`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body).to.deep.equal({
      object: 'list',
      data: days('2026-11-02', 8, {
        '2026-11-02': { r: 3, d: 1, df: 1, b: 1 },
        '2026-11-03': { r: 3, d: 2, df: 1, s: 1, o: 1, c: 1 },
        '2026-11-04': { f: 1 },
        '2026-11-09': { r: 1, d: 1, b: 1 },
      }),
    });
  });

  it('group_by defaults to day', async () => {
    expect((await stats('deliverability', WEEK)).body).to.deep.equal((await stats('deliverability', `${WEEK}&group_by=day`)).body);
  });

  it('by hour, by week (from Monday) and by month, cut to the window', async () => {
    const hours = await stats('deliverability', 'from_time=2026-11-03T00:00:00Z&to_time=2026-11-04T00:00:00Z&group_by=hour');
    expect(hours.body.data).to.have.length(24);
    const nonEmpty = hours.body.data.filter((b: Record<string, number>) => Object.entries(b).some(([k, v]) => k.endsWith('_count') && v > 0));
    expect(nonEmpty).to.deep.equal([
      bucket('2026-11-03T00:00:00Z', '2026-11-03T01:00:00Z', { d: 1 }),
      bucket('2026-11-03T09:00:00Z', '2026-11-03T10:00:00Z', { r: 2, d: 1, s: 1 }),
      bucket('2026-11-03T12:00:00Z', '2026-11-03T13:00:00Z', { o: 1, c: 1 }),
      bucket('2026-11-03T14:00:00Z', '2026-11-03T15:00:00Z', { r: 1, df: 1 }),
    ]);
    const weeks = await stats('deliverability', 'from_time=2026-11-02T00:00:00Z&to_time=2026-11-16T00:00:00Z&group_by=week');
    expect(weeks.body.data).to.deep.equal([
      bucket('2026-11-02T00:00:00Z', '2026-11-09T00:00:00Z', { r: 6, d: 3, df: 2, b: 1, f: 1, s: 1, o: 1, c: 1 }),
      bucket('2026-11-09T00:00:00Z', '2026-11-16T00:00:00Z', { r: 1, d: 1, b: 1 }),
    ]);
    const clipped = await stats('deliverability', 'from_time=2026-11-04T00:00:00Z&to_time=2026-11-10T12:00:00Z&group_by=week');
    expect(clipped.body.data).to.deep.equal([
      bucket('2026-11-04T00:00:00Z', '2026-11-09T00:00:00Z', { f: 1 }),
      bucket('2026-11-09T00:00:00Z', '2026-11-10T12:00:00Z', { r: 1, d: 1, b: 1 }),
    ]);
    const months = await stats('deliverability', 'from_time=2026-11-01T00:00:00Z&to_time=2027-01-01T00:00:00Z&group_by=month');
    expect(months.body.data).to.deep.equal([
      bucket('2026-11-01T00:00:00Z', '2026-12-01T00:00:00Z', { r: 7, d: 4, df: 2, b: 2, f: 1, s: 1, o: 1, c: 1 }),
      bucket('2026-12-01T00:00:00Z', '2027-01-01T00:00:00Z', { r: 1, d: 1 }),
    ]);
  });

  it("partial days at the window's ends, and a window rounded out to whole hours", async () => {
    const edges = await stats('deliverability', 'from_time=2026-11-02T12:00:00Z&to_time=2026-11-04T06:00:00Z&group_by=day');
    expect(edges.body.data).to.deep.equal([
      bucket('2026-11-02T12:00:00Z', '2026-11-03T00:00:00Z', { r: 1, df: 1 }),
      bucket('2026-11-03T00:00:00Z', '2026-11-04T00:00:00Z', { r: 3, d: 2, df: 1, s: 1, o: 1, c: 1 }),
      bucket('2026-11-04T00:00:00Z', '2026-11-04T06:00:00Z'),
    ]);
    const rounded = await stats('deliverability', 'from_time=2026-11-03T09:30:00Z&to_time=2026-11-03T09:45:00%2B00:00&group_by=hour');
    expect(rounded.body.data).to.deep.equal([bucket('2026-11-03T09:00:00Z', '2026-11-03T10:00:00Z', { r: 2, d: 1, s: 1 })]);
  });

  it('filters: sender domain, recipient domains, one tag, several tags (a message once), and combinations', async () => {
    const week = async (query: string) => {
      const res = await stats('deliverability', `${WEEK}&${query}`);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body.data;
    };
    expect(await week('sender_domain=example.net')).to.deep.equal(
      days('2026-11-02', 8, {
        '2026-11-02': { r: 1, df: 1 },
        '2026-11-03': { r: 1, d: 1, s: 1 },
      }),
    );
    expect(await week('recipient_domains=yahoo.com')).to.deep.equal(
      days('2026-11-02', 8, {
        '2026-11-02': { r: 1, b: 1 },
        '2026-11-03': { r: 2, df: 1, s: 1 },
        '2026-11-04': { f: 1 },
      }),
    );
    expect(await week('recipient_domains=yahoo.com,gmail.com')).to.deep.equal(await week(''));
    expect(await week('tags=promo')).to.deep.equal(
      days('2026-11-02', 8, {
        '2026-11-02': { r: 1, df: 1 },
        '2026-11-03': { r: 1, d: 2, o: 1, c: 1 },
        '2026-11-09': { r: 1, d: 1, b: 1 },
      }),
    );
    expect(await week('tags=welcome,promo')).to.deep.equal(
      days('2026-11-02', 8, {
        '2026-11-02': { r: 2, d: 1, df: 1 },
        '2026-11-03': { r: 2, d: 2, s: 1, o: 1, c: 1 },
        '2026-11-09': { r: 1, d: 1, b: 1 },
      }),
    );
    expect(await week('sender_domain=example.com&recipient_domains=gmail.com')).to.deep.equal(
      days('2026-11-02', 8, {
        '2026-11-02': { r: 1, d: 1 },
        '2026-11-03': { r: 1, d: 1, o: 1, c: 1 },
        '2026-11-09': { r: 1, d: 1, b: 1 },
      }),
    );
    expect(await week('sender_domain=example.com&tags=welcome')).to.deep.equal(
      days('2026-11-02', 8, {
        '2026-11-02': { r: 1, d: 1 },
        '2026-11-03': { r: 1, d: 1, o: 1, c: 1 },
      }),
    );
    expect(await week('recipient_domains=yahoo.com&tags=welcome')).to.deep.equal(days('2026-11-02', 8, { '2026-11-03': { r: 1, s: 1 } }));
    expect(await week('sender_domain=example.com,example.net')).to.deep.equal(await week(''));
    expect(await week('tags=nosuchtag')).to.deep.equal(days('2026-11-02', 8, {}));
  });

  it('bounce statistics by classification', async () => {
    const res = await stats('bounce', `${WEEK}&group_by=week`);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({
      object: 'list',
      data: [
        { from_timestamp: '2026-11-02T00:00:00Z', to_timestamp: '2026-11-09T00:00:00Z', bounces: [{ classification: 'InvalidRecipient', count: 1 }] },
        { from_timestamp: '2026-11-09T00:00:00Z', to_timestamp: '2026-11-10T00:00:00Z', bounces: [{ classification: 'QuotaIssues', count: 1 }] },
      ],
    });
    const yahoo = await stats('bounce', `${WEEK}&group_by=month&recipient_domains=yahoo.com`);
    expect(yahoo.body.data).to.deep.equal([
      { from_timestamp: '2026-11-02T00:00:00Z', to_timestamp: '2026-11-10T00:00:00Z', bounces: [{ classification: 'InvalidRecipient', count: 1 }] },
    ]);
  });

  it('delivery time from acceptance to delivery, per recipient domain', async () => {
    const res = await stats('delivery-time', `${WEEK}&group_by=day`);
    expect(res.status).to.equal(200);
    const byDay = Object.fromEntries(res.body.data.map((b: { from_timestamp: string }) => [b.from_timestamp.slice(0, 10), b]));
    expect(byDay['2026-11-02']).to.deep.equal({
      from_timestamp: '2026-11-02T00:00:00Z',
      to_timestamp: '2026-11-03T00:00:00Z',
      avg_delivery_time: 120,
      delivered_count: 1,
      delivery_times: [{ recipient_domain: 'gmail.com', delivery_time: 120, count: 1 }],
    });
    expect(byDay['2026-11-03']).to.include({ avg_delivery_time: 1815, delivered_count: 2 });
    expect(byDay['2026-11-03'].delivery_times).to.deep.equal([{ recipient_domain: 'gmail.com', delivery_time: 1815, count: 2 }]);
    expect(byDay['2026-11-05']).to.deep.equal({
      from_timestamp: '2026-11-05T00:00:00Z',
      to_timestamp: '2026-11-06T00:00:00Z',
      avg_delivery_time: 0,
      delivered_count: 0,
      delivery_times: [],
    });
    const month = await stats('delivery-time', 'from_time=2026-11-01T00:00:00Z&to_time=2026-12-01T00:00:00Z&group_by=month&sender_domain=example.com');
    expect(month.body.data).to.deep.equal([
      {
        from_timestamp: '2026-11-01T00:00:00Z',
        to_timestamp: '2026-12-01T00:00:00Z',
        avg_delivery_time: 250,
        delivered_count: 3,
        delivery_times: [{ recipient_domain: 'gmail.com', delivery_time: 250, count: 3 }],
      },
    ]);
  });

  it('defaults to the 30 days before to_time (or now)', async () => {
    const res = await stats('deliverability', 'to_time=2026-12-02T00:00:00Z');
    expect(res.body.data).to.have.length(30);
    expect(res.body.data[0].from_timestamp).to.equal('2026-11-02T00:00:00Z');
    const now = await stats('deliverability', '');
    expect(now.body.data.at(-1).to_timestamp).to.equal('2026-12-15T00:00:00Z');
  });

  it('a domain-scoped key reads only its domains, and must hold every sender_domain it names', async () => {
    const key = await bed.key(['statistics-transactional:read:{example.net}']);
    const own = await stats('deliverability', WEEK, key);
    expect(own.status).to.equal(200);
    expect(own.body).to.deep.equal((await stats('deliverability', `${WEEK}&sender_domain=example.net`)).body);
    expect((await stats('deliverability', `${WEEK}&sender_domain=example.net`, key)).status).to.equal(200);
    for (const q of ['sender_domain=example.com', 'sender_domain=example.net,example.com']) {
      const res = await stats('deliverability', `${WEEK}&${q}`, key);
      expect(res.status).to.equal(403);
      expect(res.body.message).to.include('example.com');
    }
    const other = await bed.key(['messages:read:all']);
    expect((await stats('bounce', WEEK, other)).status).to.equal(403);
  });

  it('refuses bad queries with 400 and a message', async () => {
    for (const [query, says] of [
      ['group_by=year', 'group_by'],
      ['from_time=yesterday', 'from_time'],
      ['from_time=2026-11-05T00:00:00Z&to_time=2026-11-04T00:00:00Z', 'before'],
      ['from_time=2020-01-01T00:00:00Z&to_time=2026-01-01T00:00:00Z&group_by=hour', 'buckets'],
      [`tags=${Array.from({ length: 21 }, (_, i) => `t${i}`).join(',')}`, 'tags'],
      ['sender_domain=a|b', 'sender_domain'],
      [`tags=${'x'.repeat(65)}`, 'tags'],
    ] as const) {
      const res = await stats('deliverability', query);
      expect(res.status, query).to.equal(400);
      expect(res.body.message, query).to.include(says);
    }
  });
});

describe('statistics rate limit', function () {
  this.timeout(30_000);
  let bed: MessageBed;

  before(async () => {
    bed = await startMessageBed();
  });

  after(async () => {
    await bed?.stop();
  });

  it('allows one statistics request per second per account (429 with a message), apart from the general limit', async () => {
    const path = `/v2/accounts/${bed.server.accountId}/statistics/transactional/deliverability`;
    expect((await bed.api('GET', path)).status).to.equal(200);
    const limited = await bed.api('GET', path.replace('deliverability', 'bounce'));
    expect(limited.status).to.equal(429);
    expect(limited.body.message).to.be.a('string');
    expect((await bed.api('GET', `/v2/accounts/${bed.server.accountId}/domains`)).status).to.equal(200);
    bed.clock.advance(1000);
    expect((await bed.api('GET', path)).status).to.equal(200);
  });
});
