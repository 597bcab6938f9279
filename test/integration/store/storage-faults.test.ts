import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * The store refusing writes (a full disk, as LevelDB reports it), injected through the store's
 * batch writer: each path that writes (accept, outcome, event, counters) fails as it would, and
 * the daemon must refuse new mail clearly, never send a message twice, and recover by itself.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
/** LevelDB's own words for a full disk. */
const diskFull = () => new Error('IO error: /data/000123.log: No space left on device');
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a store that refuses writes (injected faults)', function () {
  this.timeout(40_000);
  let bed: MessageBed;
  let sink: SmtpSink;

  async function setUp() {
    sink = await startSink();
    bed = await startMessageBed({
      ...POLLING,
      delivery: { enabled: true, mx_port: sink.port },
      storage: { check_interval_ms: 100, min_free_bytes: 0, min_free_percent: 0 },
    });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
  }

  afterEach(async () => {
    bed?.server.daemon.core.store.injectFault(null);
    await bed?.stop();
    await sink?.close();
  });

  /** Waits for the guard to see writes land again (the store reopened and probed). */
  const untilWritable = async (timeoutMs = 15_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!bed.server.daemon.storage.ok) {
      if (Date.now() > deadline) throw new Error(`storage still refuses writes: ${bed.server.daemon.storage.reason}`);
      await wait(50);
    }
  };

  const readyz = async () => {
    const res = await fetch(bed.server.daemon.parts.metrics.url + '/readyz');
    return { status: res.status, text: await res.text() };
  };

  it("sends a message once when its outcome cannot be stored after the peer's 250, and records it Delivered once writes land again", async () => {
    await setUp();
    const store = bed.server.daemon.core.store;
    let failing = false;
    // Sticky, as LevelDB is: once a write failed, every later one fails until the store is reopened.
    store.injectFault(() => (failing ? diskFull() : null), { sticky: true });
    // The disk fills between the peer's 250 and the outcome's write.
    sink.hold = () => {
      failing = true;
    };
    const res = await bed.send({ recipients: [{ email: 'once@example.org' }] });
    expect(res.status).to.equal(202);
    const id = res.body.data[0].id as string;
    await sink.waitFor(1);
    // Two seconds of a full disk: outcome writes retried, probe writes failing, engine idle.
    await wait(2000);
    expect(sink.received).to.have.length(1);
    expect(bed.server.daemon.storage.ok).to.equal(false);
    failing = false;
    await untilWritable();
    const message = await bed.until(id, 'Delivered', 15_000);
    expect(message.num_attempts).to.equal(1);
    await wait(500);
    expect(sink.received).to.have.length(1);
  });

  it('refuses new mail with 507 and /readyz 503 naming storage while writes fail; accepts and delivers again once they land, without a restart', async () => {
    await setUp();
    const store = bed.server.daemon.core.store;
    let failing = true;
    store.injectFault(() => (failing ? diskFull() : null), { sticky: true });
    // The first failed write (an accept) closes the guard.
    const first = await bed.send({ recipients: [{ email: 'a@example.org' }] }, { operationId: null });
    expect(first.status).to.equal(507);
    expect(first.body.message).to.match(/insufficient storage/);
    const refused = await bed.send({ recipients: [{ email: 'b@example.org' }] }, { operationId: null });
    expect(refused.status).to.equal(507);
    expect(refused.body.message).to.match(/insufficient storage.*no space left/);
    const ready = await readyz();
    expect(ready.status).to.equal(503);
    expect(ready.text).to.match(/storage \(no space left/);
    const metrics = await (await fetch(bed.server.daemon.parts.metrics.url + '/metrics')).text();
    expect(metrics).to.match(/^postilion_storage_writable 0$/m);
    expect(metrics).to.match(/^postilion_storage_free_bytes\{dir="data"\} \d+/m);
    expect(metrics).to.match(/^postilion_storage_free_bytes\{dir="keys"\} \d+/m);
    failing = false;
    await untilWritable();
    expect((await readyz()).status).to.equal(200);
    const again = await bed.send({ recipients: [{ email: 'c@example.org' }] });
    expect(again.status).to.equal(202);
    await bed.until(again.body.data[0].id, 'Delivered');
    expect(sink.received.map((r) => r.to[0])).to.deep.equal(['c@example.org']);
  });

  it('starts no attempt while writes fail: mail accepted before is delivered once, after the store recovers', async () => {
    await setUp();
    const store = bed.server.daemon.core.store;
    let failing = false;
    store.injectFault(() => (failing ? diskFull() : null));
    // Held at the sink: the first message is in flight while the disk fills.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    sink.hold = () => held;
    const accepted = await bed.send({ recipients: [{ email: 'first@example.org' }, { email: 'second@example.org' }, { email: 'third@example.org' }] });
    expect(accepted.status).to.equal(202);
    await sink.waitFor(1);
    failing = true;
    // A failed write (the fold of the counters, the outcome) closes the guard.
    bed.server.daemon.storage.writeFailed(diskFull());
    release();
    sink.hold = () => undefined;
    await wait(1500);
    const during = sink.received.length;
    failing = false;
    await untilWritable();
    for (const d of accepted.body.data as Array<{ id: string }>) await bed.until(d.id, 'Delivered', 15_000);
    const to = sink.received.map((r) => r.to[0]).sort();
    expect(to).to.deep.equal(['first@example.org', 'second@example.org', 'third@example.org']);
    // While the guard was closed nothing new started (at most what was already in flight).
    expect(during).to.be.at.most(3);
  });

  it('stops within the grace period while every write fails, an outcome still unstored', async () => {
    await setUp();
    const store = bed.server.daemon.core.store;
    let failing = false;
    store.injectFault(() => (failing ? diskFull() : null), { sticky: true });
    sink.hold = () => {
      failing = true;
    };
    const res = await bed.send({ recipients: [{ email: 'stop@example.org' }] });
    expect(res.status).to.equal(202);
    await sink.waitFor(1);
    await wait(300);
    expect(bed.server.daemon.storage.ok).to.equal(false);
    const started = Date.now();
    // The harness's grace period is 2 s.
    await bed.server.daemon.stop();
    expect(Date.now() - started).to.be.below(3500);
    expect(bed.server.daemon.core.store.isOpen).to.equal(false);
  });

  for (const { kind, error, reason } of [
    { kind: 'a read-only filesystem', error: 'IO error: /data/000123.log: Read-only file system', reason: /read-only/ },
    { kind: 'a permission error', error: 'IO error: /data/000123.log: Permission denied', reason: /permission denied/ },
  ]) {
    it(`refuses clearly on ${kind}, probes with back-off rather than in a loop, and recovers once it is fixed`, async () => {
      await setUp();
      const store = bed.server.daemon.core.store;
      let broken = true;
      let tries = 0;
      store.injectFault(
        () => {
          tries += 1;
          return broken ? new Error(error) : null;
        },
        { sticky: true },
      );
      const refused = await bed.send({ recipients: [{ email: 'a@example.org' }] }, { operationId: null });
      expect(refused.status).to.equal(507);
      expect(bed.server.daemon.storage.reason).to.match(reason);
      expect((await readyz()).text).to.match(reason);
      const before = tries;
      await wait(3000);
      // Probes at 1 s and 2 s of back-off (and a fold or two refused before the guard): no busy loop.
      expect(tries - before).to.be.at.most(4);
      broken = false;
      await untilWritable();
      const again = await bed.send({ recipients: [{ email: 'b@example.org' }] });
      expect(again.status).to.equal(202);
      await bed.until(again.body.data[0].id, 'Delivered');
    });
  }
});
