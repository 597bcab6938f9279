import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

describe('cancelling a scheduled message the delivery engine has taken', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;

  before(async () => {
    sink = await startSink();
    bed = await startMessageBed({ ...POLLING, delivery: { enabled: true, mx_port: sink.port } });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
  });
  after(async () => {
    await bed?.stop();
    await sink?.close();
  });

  it('refuses with 409 while its first attempt is in flight, and the message ends Delivered', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    sink.hold = () => gate;
    const res = await bed.send({ recipients: [{ email: 'r@example.org' }], schedule: { first_attempt: new Date(bed.clock.now() + 60_000).toISOString() } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const id = res.body.data[0].id as string;
    bed.clock.advance(61_000);
    await bed.server.daemon.parts.jobs.engine.wake();
    const deadline = Date.now() + 10_000;
    while (sink.held === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(sink.held).to.equal(1);

    const cancel = await bed.api('DELETE', `${bed.messages}/${encodeURIComponent(id)}/cancel`);
    expect(cancel.status).to.equal(409);
    expect(cancel.body.message).to.contain('being delivered');

    release();
    await bed.until(id, 'Delivered');
  });
});
