/**
 * The composition root of the HTTP dispatcher's thread, as daemon.ts is of the daemon (which
 * starts it through HttpClientThread, http-client-thread.ts): the thread holds the HttpClient
 * (its connections per origin, its DNS resolver, the target rules), signs and sends the posts
 * the daemon hands it, and hands back each one's outcome. It stores nothing.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createResolver } from '../domains/resolver.ts';
import { parseCidr } from '../util/cidr.ts';
import type { FromHttpThread, HttpThreadStart, ToHttpThread } from './http-client-thread.ts';
import { HttpClient, type HttpOutcome } from './http.ts';

const start = workerData as HttpThreadStart;
const port = parentPort!;
const allowNetworks = start.allowNetworks.map(parseCidr);
const client = new HttpClient({
  resolver: createResolver(start.dns),
  allowNetworks: () => allowNetworks,
  maxSocketsPerOrigin: start.maxSocketsPerOrigin,
  originSockets: start.originSockets,
});

/**
 * Outcomes are handed back together, HAND_BACK_MS after the first of them (or at once past
 * OUTCOMES_AT_ONCE). Each message costs both threads more than the outcomes in it, and each one
 * the daemon takes becomes a synced batch of their outcomes: once per turn of the loop a message
 * carried about three; a millisecond after the first, about six, some thousand synced batches
 * a second at full speed; four milliseconds, about twenty, and the daemon spent about a fifth
 * less CPU a delivery in the fan-out benchmark (test/bench/webhooks part 1, delivery alone). The
 * origins' connections do not wait meanwhile: the daemon hands each origin several times its
 * connections' worth of posts ahead (WEBHOOK_HAND_OFF), more than it sends in that time.
 */
const HAND_BACK_MS = 4;
const OUTCOMES_AT_ONCE = 256;
let answered: Array<{ seq: number; outcome: HttpOutcome }> = [];
let timer: NodeJS.Timeout | null = null;
let inFlight = 0;
let closing = false;
function handBack(): void {
  if (timer) clearTimeout(timer);
  timer = null;
  if (answered.length > 0) port.postMessage({ type: 'outcomes', outcomes: answered } satisfies FromHttpThread);
  answered = [];
  if (closing && inFlight === 0) {
    port.postMessage({ type: 'closed' } satisfies FromHttpThread);
    port.close();
  }
}

port.on('message', (message: ToHttpThread) => {
  if (message.type === 'withdraw') {
    client.withdraw(message.origin);
    return;
  }
  if (message.type === 'close') {
    closing = true;
    // The requests in flight fail at once; their outcomes go back before the thread ends.
    client.close();
    if (!timer) handBack();
    return;
  }
  for (const { seq, post } of message.posts) {
    inFlight += 1;
    void client.postSigned(post).then((outcome) => {
      inFlight -= 1;
      answered.push({ seq, outcome });
      if (answered.length >= OUTCOMES_AT_ONCE) handBack();
      else timer ??= setTimeout(handBack, HAND_BACK_MS);
    });
  }
});
