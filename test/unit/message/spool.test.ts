import { expect } from 'chai';
import { bareLfToCrlf } from '../../../src/message/spool.ts';

describe('bare LF line ends in a spooled body', () => {
  const crlf = (text: string, afterCr = false) => bareLfToCrlf(Buffer.from(text, 'latin1'), afterCr).toString('latin1');

  it('become CRLF, also several in a row, and CRLF stays as it is', () => {
    expect(crlf('a\nb\n\n\nc\r\nd\n')).to.equal('a\r\nb\r\n\r\n\r\nc\r\nd\r\n');
    expect(crlf('\n\n')).to.equal('\r\n\r\n');
  });

  it('an LF after a CR that ended the previous chunk is not bare', () => {
    expect(crlf('\nnext\n', true)).to.equal('\nnext\r\n');
    expect(crlf('\nnext\n', false)).to.equal('\r\nnext\r\n');
  });
});
