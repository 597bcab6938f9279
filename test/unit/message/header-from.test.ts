import { expect } from 'chai';
import { headerFromAddresses } from '../../../src/message/header-from.ts';

const head = (...lines: string[]) => Buffer.from([...lines, '', 'body From: x@y.z', ''].join('\r\n'));

describe('headerFromAddresses', () => {
  it('reads the addresses of the one From field, folded or not, groups flattened', () => {
    expect(headerFromAddresses(head('Subject: x', 'From: "Doe, Jane" <jane@Example.com>,', '\tbob@example.com'))).to.deep.equal([
      { address: 'jane@example.com', valid: true },
      { address: 'bob@example.com', valid: true },
    ]);
    expect(headerFromAddresses(head('from: Team: a@example.com, b@example.com;'))!.map((a) => a.address)).to.deep.equal(['a@example.com', 'b@example.com']);
  });

  it('gives IDN domains in A-labels and marks what is not an address', () => {
    expect(headerFromAddresses(Buffer.from('From: Ünï <info@bücher.example>\r\n\r\n', 'utf8'))).to.deep.equal([
      { address: 'info@xn--bcher-kva.example', valid: true },
    ]);
    expect(headerFromAddresses(head('From: nobody'))).to.deep.equal([{ address: 'nobody', valid: false }]);
  });

  it('is null without a From field or with two (accept() refuses those), and never reads the body', () => {
    expect(headerFromAddresses(head('Subject: x'))).to.equal(null);
    expect(headerFromAddresses(head('From: a@example.com', 'From: b@example.com'))).to.equal(null); // A From line in the body (after the empty line, CRLF or bare LF) is not a header field.
    const body = (eol: string) => Buffer.from(['From: a@example.com', 'Subject: x', '', 'From: b@example.net', ''].join(eol));
    expect(headerFromAddresses(body('\r\n'))).to.deep.equal([{ address: 'a@example.com', valid: true }]);
    expect(headerFromAddresses(body('\n'))).to.deep.equal([{ address: 'a@example.com', valid: true }]);
  });
});
