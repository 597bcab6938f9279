import { expect } from 'chai';
import { BodyDigests, digestOf, type BodyDigest } from '../../../src/delivery/body-digests.ts';
import { DkimMessageReader } from '../../../src/domains/dkim-canonical.ts';

describe('body digests', () => {
  /** The header block and body hash the signer reads from the whole message, joined. */
  function whole(head: string, body: Buffer[]): { header: string; bodyHash: string } {
    return new DkimMessageReader().update(Buffer.concat([Buffer.from(head, 'utf8'), ...body])).end();
  }

  /** A digest function that counts its calls. */
  function counting() {
    const calls: number[] = [];
    return { calls, digest: (chunks: readonly Buffer[]): BodyDigest => (calls.push(1), digestOf(chunks)) };
  }

  const composed = ['From: App <app@example.com>\r\nSubject: Grüße\r\nMIME-Version: 1.0\r\n', '\r\n', 'Hello  there \r\n\r\n.dot\r\n\r\n'];
  const cases: Array<{ name: string; head: string; body: string[] }> = [
    {
      name: 'composed mail: To and Message-ID in the head, the other fields in the body',
      head: 'To: r@example.org\r\nMessage-ID: <1@example.com>\r\n',
      body: composed,
    },
    { name: 'relayed mail: no head, the whole header block in the body', head: '', body: composed },
    { name: 'the body begins with the empty line', head: 'To: r@example.org\r\nFrom: a@example.com\r\n', body: ['\r\nbody\r\n'] },
    { name: 'bare LF line ends, the header split across chunks', head: 'To: r@example.org\n', body: ['From: a@exa', 'mple.com\nSubject: x\r', '\n\nbody\n'] },
    { name: 'a body without an empty line', head: 'To: r@example.org\r\n', body: ['From: a@example.com\r\nSubject: x\r\n'] },
    { name: 'a head not ended by a line end', head: 'To: r@example.org', body: ['\r\nFrom: a@example.com\r\n\r\nbody\r\n'] },
    { name: 'a head holding the empty line', head: 'To: r@example.org\r\n\r\n', body: ['From: a@example.com\r\n\r\nbody\r\n'] },
    { name: 'a head with a bare CR line end', head: 'To: r@example.org\rCc: c@example.org\r\n', body: composed },
  ];

  for (const c of cases) {
    it(`gives the signer what it reads from the joined message: ${c.name}`, () => {
      const chunks = c.body.map((b) => Buffer.from(b, 'utf8'));
      const view = new BodyDigests().view('b1', Buffer.from(c.head, 'utf8'), chunks);
      expect(view).to.deep.equal(whole(c.head, chunks));
    });
  }

  it('hashes a body once for every message that shares it, each with its own head', () => {
    const { calls, digest } = counting();
    const digests = new BodyDigests(10, digest);
    const body = composed.map((b) => Buffer.from(b));
    for (const to of ['a', 'b', 'c']) {
      const head = `To: ${to}@example.org\r\nMessage-ID: <${to}@example.com>\r\n`;
      expect(digests.view('shared', Buffer.from(head), body)).to.deep.equal(whole(head, body));
    }
    expect(calls).to.have.length(1);
  });

  it('keeps the digests of the most recently used bodies up to its limit', () => {
    const { calls, digest } = counting();
    const digests = new BodyDigests(2, digest);
    const body = [Buffer.from('From: a@example.com\r\n\r\nbody\r\n')];
    const head = Buffer.alloc(0);
    digests.view('a', head, body);
    digests.view('b', head, body);
    digests.view('a', head, body); // a is the most recently used
    digests.view('c', head, body); // b goes
    digests.view('a', head, body);
    expect(calls).to.have.length(3);
    digests.view('b', head, body);
    expect(calls).to.have.length(4);
  });
});
