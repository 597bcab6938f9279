import { expect } from 'chai';
import { AttemptLog, type HttpAttempt } from '../../../src/queue/attempt-log.ts';

const attempt = (target: string, n: number): HttpAttempt => ({
  job_id: `job-${n}`,
  kind: 'webhook',
  target_id: target,
  account_id: 'a',
  event_id: `event-${n}`,
  at: new Date(n * 1000).toISOString(),
  status: 204,
  response_ms: n,
  error: null,
  outcome: 'delivered',
  attempts: 0,
});

describe('AttemptLog', () => {
  it("keeps each target's last attempts, newest first, at most its bound", () => {
    const log = new AttemptLog(3, 10);
    for (let n = 1; n <= 5; n++) log.record(attempt('w1', n));
    log.record(attempt('w2', 9));
    expect(log.ofTarget('w1').map((a) => a.job_id)).to.deep.equal(['job-5', 'job-4', 'job-3']);
    expect(log.ofTarget('w2').map((a) => a.job_id)).to.deep.equal(['job-9']);
    expect(log.ofTarget('w3')).to.deep.equal([]);
  });

  it('forgets the least recently used targets past its bound', () => {
    const log = new AttemptLog(3, 2);
    log.record(attempt('w1', 1));
    log.record(attempt('w2', 2));
    log.record(attempt('w3', 3));
    expect(log.ofTarget('w1')).to.deep.equal([]);
    expect(log.ofTarget('w3')).to.have.length(1);
  });

  it('hands out copies: a caller cannot change what is kept', () => {
    const log = new AttemptLog();
    log.record(attempt('w1', 1));
    log.ofTarget('w1').pop();
    expect(log.ofTarget('w1')).to.have.length(1);
  });
});
