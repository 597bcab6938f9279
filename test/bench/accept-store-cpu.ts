/**
 * The main thread's time per accepted message in the store's part of an accept (one recipient):
 * Acceptor.prepare (record, index keys, event, counter op), Store.commit (read cache, group
 * commit, encoding, the raw batch call) and what follows the landing (put listeners, journal).
 * Measured as event-loop active time (the loop's time outside of waiting for I/O), so the
 * LevelDB thread's write and fsync are not counted; process CPU (all threads) is shown alongside.
 *
 *   node --import tsx test/bench/accept-store-cpu.ts [messages per round] [concurrent accepts]
 *
 * Prints the median of several rounds; run it a few times, each in a fresh process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { EventRecorder } from '../../src/events/recorder.ts';
import { Acceptor, type Submission } from '../../src/message/accept.ts';
import { countersObserver } from '../../src/stats/counters.ts';
import { CountersRepo } from '../../src/store/counters-repo.ts';
import { EventsRepo } from '../../src/store/events-repo.ts';
import { MessagesRepo } from '../../src/store/messages-repo.ts';
import type { AccountRecord, DomainRecord } from '../../src/store/records.ts';
import { Store } from '../../src/store/store.ts';
import { newId } from '../../src/util/ids.ts';
import { Signals } from '../../src/util/signals.ts';
import { systemClock } from '../../src/util/time.ts';

const perRound = Number(process.argv[2] ?? 4000);
const concurrency = Number(process.argv[3] ?? 32);
const rounds = 7;

const dir = mkdtempSync(join(tmpdir(), 'accept-store-cpu-'));
const counters = new CountersRepo();
const store = await Store.open(dir, { journal: counters });
const messages = new MessagesRepo(store);
const eventsRepo = new EventsRepo(store);
// The daemon listens to landed events (webhook fan-out, metrics).
eventsRepo.onLanded(() => undefined);
const recorder = new EventRecorder(eventsRepo, systemClock, [countersObserver(counters)]);
const signals = new Signals<{ 'messages.accepted': { records: unknown[]; bodies: readonly unknown[] } }>();
signals.on('messages.accepted', () => undefined);
const acceptor = new Acceptor(store, messages, recorder, systemClock, signals);

const account = {
  v: 1,
  id: newId(),
  trackOpens: false,
  trackClicks: false,
  messageMetadataRetention: 30,
  messageDataRetention: 7,
} as unknown as AccountRecord;
const domain = { v: 1, id: newId(), accountId: account.id, name: 'example.com' } as unknown as DomainRecord;
const head =
  'From: Sender <sender@example.com>\r\nTo: someone@example.org\r\nSubject: Your order has shipped\r\nDate: Fri, 27 Nov 2026 23:00:00 +0000\r\n' +
  `Message-ID: <${newId()}@example.com>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary="b1"\r\n`;
const body = Buffer.from('x'.repeat(1500));

function submission(i: number): Submission {
  const bodyId = newId();
  return {
    account,
    domain,
    source: 'api',
    sender: 'sender@example.com',
    tags: ['orders'],
    sandbox: null,
    bodies: [{ id: bodyId, chunks: [Buffer.concat([Buffer.from(head), body])] }],
    messages: [
      { id: newId(), messageId: `<${i}.${bodyId}@example.com>`, recipient: `someone${i}@example.org`, head, bodyId, subject: 'Your order has shipped' },
    ],
  };
}

async function round(n: number): Promise<{ active: number; cpu: number }> {
  const subs = Array.from({ length: n }, (_, i) => submission(i));
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  for (let i = 0; i < n; i += concurrency) {
    await Promise.all(subs.slice(i, i + concurrency).map((s) => acceptor.accept(s)));
  }
  const used = performance.eventLoopUtilization(elu);
  const c = process.cpuUsage(cpu);
  return { active: (used.active * 1000) / n, cpu: (c.user + c.system) / n };
}

try {
  await round(perRound); // warm-up
  const results: Array<{ active: number; cpu: number }> = [];
  for (let r = 0; r < rounds; r++) results.push(await round(perRound));
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const active = median(results.map((r) => r.active));
  const cpu = median(results.map((r) => r.cpu));
  console.log(`main thread ${active.toFixed(1)} µs per accept (process CPU ${cpu.toFixed(1)} µs), ${perRound} × ${rounds}, ${concurrency} at once`);
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
