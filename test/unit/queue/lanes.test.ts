import { expect } from 'chai';
import { DestinationStates } from '../../../src/queue/destination-states.ts';
import { resolveDestination } from '../../../src/queue/destination-name.ts';

describe('lanes of sources and destinations in the engine', () => {
  it("a lane has its destination's limits unless named itself; suspending the destination holds every lane of it", () => {
    const states = new DestinationStates({ 'mx.example.net': { concurrency: 2 }, 'b/mx.example.net': { rate: 1 } }, ['held.example.net'], {
      now: () => 0,
    });
    expect(states.limitsOf('a/mx.example.net')).to.deep.equal({ concurrency: 2 });
    expect(states.limitsOf('b/mx.example.net')).to.deep.equal({ rate: 1 });
    expect(states.limitsOf('a/other.example.net')).to.equal(undefined);
    expect(states.held('a/held.example.net', 0)).to.equal(true);
    expect(states.isSuspended('a/mx.example.net')).to.equal(false);
    states.suspend('mx.example.net');
    expect(states.held('a/mx.example.net', 0)).to.equal(true);
    expect(states.held('b/mx.example.net', 0)).to.equal(true);
    states.resume('mx.example.net');
    states.suspend('a/mx.example.net');
    expect(states.held('a/mx.example.net', 0)).to.equal(true);
    expect(states.held('b/mx.example.net', 0)).to.equal(false);
    // A paused lane is down; another lane of the destination is not.
    states.resume('a/mx.example.net');
    states.pause('a/mx.example.net', 10);
    expect(states.down('a/mx.example.net', 0)).to.equal(true);
    expect(states.down('b/mx.example.net', 0)).to.equal(false);
  });

  it('queue suspend names one lane as <source>/<name>', async () => {
    const facts = { transport: {}, smarthost: null, known: () => false, mxSet: async () => 'mx1.example.net,mx2.example.net' };
    expect(await resolveDestination('mta1/example.org', facts)).to.deep.equal({ destination: 'mta1/mx1.example.net,mx2.example.net', via: 'mx' });
    try {
      await resolveDestination('Bad Source/example.org', facts);
      expect.fail('not refused');
    } catch (err) {
      expect((err as Error).message).to.contain('is not a source name');
    }
  });
});
