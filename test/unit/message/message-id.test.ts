import { expect } from 'chai';
import { newMessageId, parseMessageRef } from '../../../src/message/message-id.ts';

const UUID = '01a1fdfb-3448-7a36-9a87-54669f3306a9';

describe('parseMessageRef', () => {
  it('reads a bare UUID as an id, lower-cased', () => {
    expect(parseMessageRef(UUID)).to.deep.equal({ kind: 'id', id: UUID });
    expect(parseMessageRef(UUID.toUpperCase())).to.deep.equal({ kind: 'id', id: UUID });
  });

  it('reads a full Message-ID with its angle brackets as a header', () => {
    expect(parseMessageRef(`<${UUID}@example.com>`)).to.deep.equal({ kind: 'header', header: `<${UUID}@example.com>` });
  });

  it('adds the angle brackets to a Message-ID given without them', () => {
    expect(parseMessageRef(`${UUID}@example.com`)).to.deep.equal({ kind: 'header', header: `<${UUID}@example.com>` });
  });

  it('ignores surrounding white space', () => {
    expect(parseMessageRef(`  ${UUID} `)).to.deep.equal({ kind: 'id', id: UUID });
    expect(parseMessageRef(' <a@b> ')).to.deep.equal({ kind: 'header', header: '<a@b>' });
  });

  for (const text of ['', 'not-a-message-id', '<>', '<a@b', 'a@b>', 'a b@c', 'a@b@c', '<<a@b>>', '@example.com', 'a@']) {
    it(`gives null for ${JSON.stringify(text)}`, () => {
      expect(parseMessageRef(text)).to.equal(null);
    });
  }

  it('reads back what newMessageId makes, both as the header and as its UUID', () => {
    const made = newMessageId('example.com', Date.parse('2026-11-21T12:00:00Z'));
    expect(made.header).to.equal(`<${made.id}@example.com>`);
    expect(parseMessageRef(made.header)).to.deep.equal({ kind: 'header', header: made.header });
    expect(parseMessageRef(made.id)).to.deep.equal({ kind: 'id', id: made.id });
  });
});
