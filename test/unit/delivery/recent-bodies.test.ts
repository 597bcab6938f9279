import { expect } from 'chai';
import { RecentBodies } from '../../../src/delivery/recent-bodies.ts';

describe('recent bodies', () => {
  /** A store of bodies that counts reads and can fail one. */
  function source(bodies: Record<string, string>) {
    const reads: string[] = [];
    let failNext = false;
    return {
      reads,
      failOnce: () => (failNext = true),
      read: async function* (id: string): AsyncGenerator<Buffer> {
        reads.push(id);
        await new Promise((resolve) => setImmediate(resolve));
        if (failNext) {
          failNext = false;
          throw new Error('read failed');
        }
        const body = bodies[id]!;
        // Two chunks, as a stored body of several records comes.
        yield Buffer.from(body.slice(0, 2));
        yield Buffer.from(body.slice(2));
      },
    };
  }

  it('serves a body put in at acceptance without reading it, within the limits', async () => {
    const s = source({ a: 'stored body', big: 'x'.repeat(20) });
    const cache = new RecentBodies(s.read, { totalBytes: 15, bodyBytes: 12, holdMs: 60_000 });
    cache.put('a', [Buffer.from('stored '), Buffer.from('body')]);
    expect((await cache.get('a')).toString()).to.equal('stored body');
    cache.put('big', [Buffer.from('x'.repeat(20))]);
    expect((await cache.get('big')).toString()).to.equal('x'.repeat(20));
    expect(s.reads).to.deep.equal(['big']);
    // Its send done, a second body over the total pushes the first out.
    cache.release('a');
    cache.put('b', [Buffer.from('another one')]);
    await cache.get('a');
    expect(s.reads).to.deep.equal(['big', 'a']);
  });

  it('reads a body once for consecutive and concurrent deliveries, whole', async () => {
    const s = source({ a: 'hello body' });
    const cache = new RecentBodies(s.read);
    const [one, two] = await Promise.all([cache.get('a'), cache.get('a')]);
    const three = await cache.get('a');
    expect([one, two, three].map((b) => b.toString())).to.deep.equal(['hello body', 'hello body', 'hello body']);
    expect(s.reads).to.deep.equal(['a']);
  });

  it('drops the least recently used body when the byte limit is reached', async () => {
    const s = source({ a: 'aaaa', b: 'bbbb', c: 'cccc' });
    const cache = new RecentBodies(s.read, { totalBytes: 8, bodyBytes: 8, holdMs: 60_000 });
    await cache.get('a');
    await cache.get('b');
    await cache.get('a'); // a is now the most recently used
    await cache.get('c'); // over 8 bytes: b goes
    await cache.get('a');
    await cache.get('b');
    expect(s.reads).to.deep.equal(['a', 'b', 'c', 'b']);
  });

  it('holds bodies put in until their sends are done, rather than keep newer ones', async () => {
    const s = source({ a: 'aaaa', b: 'bbbb', c: 'cccc', d: 'dddd' });
    const cache = new RecentBodies(s.read, { totalBytes: 8, bodyBytes: 8, holdMs: 1000 }, () => 0);
    cache.put('a', [Buffer.from('aaaa')], 2);
    cache.put('b', [Buffer.from('bbbb')]);
    // Full of bodies still awaited: c is not kept, and a and b stay.
    cache.put('c', [Buffer.from('cccc')]);
    await cache.get('c');
    await cache.get('a');
    await cache.get('b');
    expect(s.reads).to.deep.equal(['c']);
    // b's one send is done (a send that never reads, a suppressed one, counts the same): d may
    // take its place; a still has a send to come.
    cache.release('b');
    cache.release('a');
    cache.put('d', [Buffer.from('dddd')]);
    await cache.get('a');
    await cache.get('d');
    await cache.get('b');
    expect(s.reads).to.deep.equal(['c', 'b']);
  });

  it('drops nothing for a body it cannot make room for', async () => {
    const s = source({ r: 'rrrr', big: 'x'.repeat(8) });
    const cache = new RecentBodies(s.read, { totalBytes: 12, bodyBytes: 8, holdMs: 1000 }, () => 0);
    await cache.get('r');
    cache.put('a', [Buffer.from('aaaa')]);
    cache.put('b', [Buffer.from('bbbb')]);
    // 8 bytes more need 8 freed; only r (4) is not held: nothing goes, and big is not kept.
    cache.put('big', [Buffer.from('x'.repeat(8))]);
    await cache.get('r');
    await cache.get('big');
    expect(s.reads).to.deep.equal(['r', 'big']);
  });

  it('lets a held body go once its hold is over (sends that never come)', async () => {
    const s = source({ a: 'aaaa', b: 'bbbb' });
    let now = 0;
    const cache = new RecentBodies(s.read, { totalBytes: 4, bodyBytes: 8, holdMs: 1000 }, () => now);
    cache.put('a', [Buffer.from('aaaa')], 3);
    cache.put('b', [Buffer.from('bbbb')]);
    now = 1001;
    cache.put('b', [Buffer.from('bbbb')]);
    await cache.get('b');
    await cache.get('a');
    expect(s.reads).to.deep.equal(['a']);
  });

  it('gives a body put in again a new hold for its new sends', async () => {
    const s = source({ a: 'aaaa', b: 'bbbb' });
    let now = 0;
    const cache = new RecentBodies(s.read, { totalBytes: 4, bodyBytes: 8, holdMs: 1000 }, () => now);
    cache.put('a', [Buffer.from('aaaa')]);
    now = 600;
    cache.put('a', [Buffer.from('aaaa')]);
    now = 1001;
    // Still held (until 1600): b is not kept.
    cache.put('b', [Buffer.from('bbbb')]);
    await cache.get('a');
    await cache.get('b');
    expect(s.reads).to.deep.equal(['b']);
    // Both sends done: a may go for b.
    cache.release('a');
    cache.release('a');
    cache.put('b', [Buffer.from('bbbb')]);
    await cache.get('b');
    await cache.get('a');
    expect(s.reads).to.deep.equal(['b', 'a']);
  });

  it('does not keep a body larger than bodyBytes', async () => {
    const s = source({ big: 'x'.repeat(100) });
    const cache = new RecentBodies(s.read, { totalBytes: 1000, bodyBytes: 10, holdMs: 60_000 });
    expect((await cache.get('big')).length).to.equal(100);
    await cache.get('big');
    expect(s.reads).to.deep.equal(['big', 'big']);
  });

  it('reads again after a failed read', async () => {
    const s = source({ a: 'hello' });
    const cache = new RecentBodies(s.read);
    s.failOnce();
    let error: unknown;
    try {
      await cache.get('a');
    } catch (err) {
      error = err;
    }
    expect((error as Error).message).to.equal('read failed');
    expect((await cache.get('a')).toString()).to.equal('hello');
    expect(s.reads).to.deep.equal(['a', 'a']);
  });
});
