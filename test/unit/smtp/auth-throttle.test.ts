import { expect } from 'chai';
import { AuthThrottle } from '../../../src/smtp/auth-throttle.ts';

describe('AuthThrottle', () => {
  it('blocks an address past the limit within the window, until its failures age out', () => {
    let now = 0;
    const throttle = new AuthThrottle(3, 60_000, { now: () => now });
    for (let i = 0; i < 3; i++) {
      expect(throttle.blocked('10.0.0.1')).to.equal(false);
      throttle.fail('10.0.0.1');
      now += 1000;
    }
    expect(throttle.blocked('10.0.0.1')).to.equal(true);
    expect(throttle.blocked('10.0.0.2')).to.equal(false);
    now = 60_500; // the first failure (t=0) left the window
    expect(throttle.blocked('10.0.0.1')).to.equal(false);
  });

  it('forgets an address after a success', () => {
    const throttle = new AuthThrottle(2, 60_000, { now: () => 0 });
    throttle.fail('a');
    throttle.succeed('a');
    throttle.fail('a');
    expect(throttle.blocked('a')).to.equal(false);
  });
});
