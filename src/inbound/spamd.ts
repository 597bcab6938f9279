import { connect } from 'node:net';

/** Bytes of a message sent to spamd at most (SpamAssassin itself skips larger ones by default). */
const MAX_CHECK_BYTES = 512 * 1024;
const TIMEOUT_MS = 10_000;
/** Bytes of spamd's answer read at most (its headers: a few lines). */
const MAX_ANSWER_BYTES = 16 * 1024;

/**
 * The spam score of a message from SpamAssassin's spamd (SPAMC/1.5 `CHECK`), or 0 when it cannot
 * say (unreachable, timed out, a malformed answer): a route POST never waits on it for long and
 * never fails because of it.
 */
export async function spamdScore(address: { host: string; port: number }, raw: Buffer | readonly Buffer[]): Promise<number> {
  const body = firstBytes(Buffer.isBuffer(raw) ? [raw] : raw, MAX_CHECK_BYTES);
  const length = body.reduce((sum, part) => sum + part.length, 0);
  return new Promise((resolve) => {
    let answer = '';
    let settled = false;
    const done = (score: number) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(score);
    };
    const socket = connect({ host: address.host, port: address.port }, () => {
      socket.write(`CHECK SPAMC/1.5\r\nContent-length: ${length}\r\nUser: postilion\r\n\r\n`);
      for (const part of body) socket.write(part);
      socket.end();
    });
    socket.setTimeout(TIMEOUT_MS, () => done(0));
    socket.on('error', () => done(0));
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1');
      if (answer.length > MAX_ANSWER_BYTES) done(0);
    });
    socket.on('end', () => done(parseScore(answer)));
    socket.on('close', () => done(parseScore(answer)));
  });
}

/** The first `limit` bytes of the chunks, as views of them. */
function firstBytes(chunks: readonly Buffer[], limit: number): Buffer[] {
  const out: Buffer[] = [];
  let left = limit;
  for (const chunk of chunks) {
    if (left <= 0) break;
    out.push(chunk.length <= left ? chunk : chunk.subarray(0, left));
    left -= chunk.length;
  }
  return out;
}

/** `Spam: True ; 7.3 / 5.0` → 7.3; 0 when there is no such line. */
export function parseScore(answer: string): number {
  if (!/^SPAMD\/\d\.\d+ 0 /.test(answer)) return 0;
  const m = /^Spam:\s*(?:True|False|Yes|No)\s*;\s*(-?\d+(?:\.\d+)?)\s*\/\s*-?\d+(?:\.\d+)?\s*$/im.exec(answer);
  const score = m ? Number(m[1]) : 0;
  return Number.isFinite(score) ? score : 0;
}
