/**
 * The reference of test/bench/deliver.ts: how many RSA-2048 signatures per second this machine
 * makes with the asynchronous crypto.sign (libuv's thread pool), kept saturated.
 */
import { sign, type KeyObject } from 'node:crypto';
import { machineBusy } from './deliver-cpu.ts';

/** Calls in flight: enough to keep every thread of the pool (4 by default) busy. */
export const SIGN_IN_FLIGHT = 16;

/** A relaxed-canonicalised header block of the size DKIM signs for such a message. */
export const SIGNED_HEADERS = Buffer.from(
  [
    'from:Shop <app@example.com>',
    'to:Customer 1 <run1-1@sink.test>',
    'subject:Your receipt (run1)',
    'message-id:<0195f3a2-7c1e-7b3d-9a4f-2c6d8e0f1a2b@example.com>',
    'date:Sat, 21 Nov 2026 12:00:00 +0000',
    'mime-version:1.0',
    'content-type:text/html; charset=utf-8',
    'content-transfer-encoding:quoted-printable',
    'dkim-signature:v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.com; q=dns/txt; s=pst202611; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; h=From:To:Subject:Message-ID:Date:MIME-Version:Content-Type:Content-Transfer-Encoding; t=1795262400; b=',
  ].join('\r\n'),
);

export interface SignRun {
  perSecond: number;
  /** Process CPU seconds per second of the run (2.0 = both cores busy). */
  cores: number;
  /** What the machine's other processes used meanwhile. */
  otherCores: number | null;
}

/** Async RSA-2048 signatures per second with SIGN_IN_FLIGHT calls in flight, for `seconds`. */
export function signRate(key: KeyObject, seconds: number): Promise<SignRun> {
  return new Promise((done, reject) => {
    const started = performance.now();
    const cpu = process.cpuUsage();
    const machine = machineBusy();
    const end = started + seconds * 1000;
    let signed = 0;
    let active = 0;
    let failed = false;
    const launch = (): void => {
      active += 1;
      sign('sha256', SIGNED_HEADERS, key, (err) => {
        active -= 1;
        if (err) {
          if (!failed) reject(err);
          failed = true;
          return;
        }
        signed += 1;
        if (performance.now() < end) launch();
        else if (active === 0) {
          const elapsed = (performance.now() - started) / 1000;
          const usage = process.cpuUsage(cpu);
          const used = (usage.user + usage.system) / 1e6;
          const busy = machineBusy();
          done({
            perSecond: signed / elapsed,
            cores: used / elapsed,
            otherCores: machine === null || busy === null ? null : Math.max(0, busy - machine - used) / elapsed,
          });
        }
      });
    };
    for (let i = 0; i < SIGN_IN_FLIGHT; i++) launch();
  });
}

/** Synchronous signatures per second on this thread: one core's worth, for context. */
export function syncSignRate(key: KeyObject, seconds: number): number {
  const started = performance.now();
  let signed = 0;
  while (performance.now() - started < seconds * 1000) {
    sign('sha256', SIGNED_HEADERS, key);
    signed += 1;
  }
  return signed / ((performance.now() - started) / 1000);
}
