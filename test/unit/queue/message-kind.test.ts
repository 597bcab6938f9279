import { expect } from 'chai';
import { messageKind } from '../../../src/queue/message-kind.ts';
import type { MessageRecord } from '../../../src/store/records.ts';

describe('message job kind', () => {
  const message = (id: string, status: string) =>
    ({ id, status, recipient: `r@${id}.test`, dueAt: '2026-11-27T00:00:00.000Z', sandbox: true }) as unknown as MessageRecord;

  it('reads due messages in one read, and finds nothing to do for final or missing ones', async () => {
    const records = new Map([
      ['q', message('q', 'Received')],
      ['d', message('d', 'Deferred')],
      ['s', message('s', 'Delivered')],
    ]);
    const batches: string[][] = [];
    const kind = messageKind(
      {
        get: async (id) => records.get(id),
        getManyCached: async (ids) => {
          batches.push([...ids]);
          return ids.map((id) => records.get(id));
        },
      },
      { process: async () => undefined },
      async (domain) => domain,
    );
    const loaded = await kind.loadMany!(['q', 's', 'gone', 'd'], ['message:1:q', 'message:1:s', 'message:1:gone', 'message:1:d']);
    expect(batches).to.deep.equal([['q', 's', 'gone', 'd']]);
    expect(loaded.map((m) => m?.id ?? null)).to.deep.equal(['q', null, null, 'd']);
    expect(await kind.load('s', 'message:1:s')).to.equal(null);
    expect((await kind.load('q', 'message:1:q'))?.id).to.equal('q');
  });

  it('looks up the MX set of a domain once for the messages of a fill, and again for a later fill', async () => {
    const asked: string[] = [];
    const kind = messageKind(
      { get: async () => undefined, getManyCached: async () => [] },
      { process: async () => undefined },
      async (domain) => (asked.push(domain), `mx.${domain}`),
    );
    const mail = (recipient: string) => ({ recipient, sandbox: null }) as unknown as MessageRecord;
    const fill = await Promise.all([mail('a@one.test'), mail('b@one.test'), mail('c@two.test'), mail('d@one.test')].map((m) => kind.destination(m)));
    expect(fill).to.deep.equal(['mx.one.test', 'mx.one.test', 'mx.two.test', 'mx.one.test']);
    expect(asked).to.deep.equal(['one.test', 'two.test']);
    expect(await kind.destination(mail('e@one.test'))).to.equal('mx.one.test');
    expect(asked).to.deep.equal(['one.test', 'two.test', 'one.test']);
  });
});
