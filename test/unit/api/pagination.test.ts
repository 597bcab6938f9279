import { expect } from 'chai';
import { decodeCursor, encodeCursor, paginationInfo, parsePageQuery } from '../../../src/api/pagination.ts';
import type { Page } from '../../../src/store/page.ts';
import { AppError } from '../../../src/util/errors.ts';

function badRequestOf(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).status).to.equal(400);
    return err as AppError;
  }
  throw new Error('expected a 400 AppError');
}

const b64 = (text: string) => Buffer.from(text).toString('base64url');

function page(keys: string[], hasNext: boolean, hasPrevious: boolean): Page<unknown> {
  return { items: keys.map((k) => ({ k })), keys, hasNext, hasPrevious };
}

describe('cursor encoding', () => {
  it('decodes what it encodes', () => {
    for (const key of ['a', '0192a4c8-7d1e-7000-8000-000000000000', 'ünïcode/with spaces\u0000and nul']) {
      expect(decodeCursor(encodeCursor(key))).to.equal(key);
    }
  });

  it('produces URL-safe cursors that do not show the key in clear', () => {
    const cursor = encodeCursor('example.com/é?&=');
    expect(cursor).to.match(/^[A-Za-z0-9_-]+$/);
    expect(cursor).to.not.contain('example.com');
  });

  it('refuses a cursor that is not base64 JSON with 400', () => {
    expect(badRequestOf(() => decodeCursor('!!!not-a-cursor!!!')).message).to.equal('invalid cursor');
    badRequestOf(() => decodeCursor(''));
    badRequestOf(() => decodeCursor(b64('{"v":1,"k":')));
  });

  it('refuses JSON of the wrong shape with 400', () => {
    badRequestOf(() => decodeCursor(b64('null')));
    badRequestOf(() => decodeCursor(b64('42')));
    badRequestOf(() => decodeCursor(b64('{"k":"a"}')));
    badRequestOf(() => decodeCursor(b64('{"v":2,"k":"a"}')));
    badRequestOf(() => decodeCursor(b64('{"v":1,"k":7}')));
  });

  it('refuses a cursor with an empty key with 400', () => {
    badRequestOf(() => decodeCursor(b64('{"v":1,"k":""}')));
  });
});

describe('parsePageQuery', () => {
  it('defaults the limit to 100 with no cursor', () => {
    expect(parsePageQuery({})).to.deep.equal({ limit: 100 });
  });

  it('accepts the limits 1 and 100', () => {
    expect(parsePageQuery({ limit: '1' })).to.deep.equal({ limit: 1 });
    expect(parsePageQuery({ limit: '100' })).to.deep.equal({ limit: 100 });
  });

  for (const limit of ['0', '101', 'abc', '1.5', '-1', '', ' 5']) {
    it(`refuses limit ${JSON.stringify(limit)} with 400 "limit must be between 1 and 100"`, () => {
      expect(badRequestOf(() => parsePageQuery({ limit })).message).to.equal('limit must be between 1 and 100');
    });
  }

  it('decodes an after cursor to its key', () => {
    expect(parsePageQuery({ after: encodeCursor('k-after'), limit: '10' })).to.deep.equal({ limit: 10, after: 'k-after' });
  });

  it('decodes a before cursor to its key', () => {
    expect(parsePageQuery({ before: encodeCursor('k-before') })).to.deep.equal({ limit: 100, before: 'k-before' });
  });

  it('refuses after and before together with 400', () => {
    const err = badRequestOf(() => parsePageQuery({ after: encodeCursor('a'), before: encodeCursor('b') }));
    expect(err.message).to.contain('mutually exclusive');
  });

  it('refuses an invalid cursor with 400', () => {
    expect(badRequestOf(() => parsePageQuery({ after: 'garbage' })).message).to.equal('invalid cursor');
  });

  for (const name of ['limit', 'after', 'before']) {
    it(`refuses ${name} given more than once with 400`, () => {
      const err = badRequestOf(() => parsePageQuery({ [name]: ['1', '2'] }));
      expect(err.message).to.equal(`${name} must be given once`);
    });
  }
});

describe('paginationInfo', () => {
  it('gives a next cursor for the last key only when there is a next page', () => {
    const info = paginationInfo(page(['a', 'b', 'c'], true, false));
    expect(info).to.deep.equal({ has_more: true, next_cursor: encodeCursor('c') });
  });

  it('gives a previous cursor for the first key only when there is a previous page', () => {
    const info = paginationInfo(page(['a', 'b', 'c'], false, true));
    expect(info).to.deep.equal({ has_more: false, previous_cursor: encodeCursor('a') });
  });

  it('gives both cursors in the middle of a listing', () => {
    const info = paginationInfo(page(['a', 'b'], true, true));
    expect(decodeCursor(info.next_cursor!)).to.equal('b');
    expect(decodeCursor(info.previous_cursor!)).to.equal('a');
    expect(info.has_more).to.equal(true);
  });

  it('gives no cursor on a single complete page', () => {
    expect(paginationInfo(page(['a'], false, false))).to.deep.equal({ has_more: false });
  });

  it('gives no cursor for an empty page', () => {
    expect(paginationInfo(page([], false, true))).to.deep.equal({ has_more: false });
  });
});
