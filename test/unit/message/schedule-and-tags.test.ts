import { expect } from 'chai';
import { checkTags, MAX_TAG_LENGTH, MAX_TAGS, scheduleTimes } from '../../../src/message/send.ts';
import { appErrorOf } from '../../helpers/app-error.ts';

const NOW = Date.parse('2026-11-21T12:00:00Z');
const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const at = (ms: number) => new Date(ms).toISOString();

describe('scheduleTimes', () => {
  it('gives undefined without a schedule and an empty object for an empty schedule', () => {
    expect(scheduleTimes(undefined, NOW)).to.equal(undefined);
    expect(scheduleTimes({}, NOW)).to.deep.equal({});
  });

  it('converts first_attempt and expires to epoch milliseconds', () => {
    expect(scheduleTimes({ first_attempt: at(NOW + HOUR), expires: at(NOW + 2 * DAY) }, NOW)).to.deep.equal({
      firstAttempt: NOW + HOUR,
      expires: NOW + 2 * DAY,
    });
  });

  it('reads RFC 3339 times with an offset', () => {
    expect(scheduleTimes({ first_attempt: '2026-11-21T14:00:00+01:00' }, NOW)).to.deep.equal({ firstAttempt: NOW + HOUR });
  });

  it('accepts first_attempt exactly 7 days ahead and refuses one millisecond more', () => {
    expect(scheduleTimes({ first_attempt: at(NOW + 7 * DAY) }, NOW)?.firstAttempt).to.equal(NOW + 7 * DAY);
    expect(appErrorOf(() => scheduleTimes({ first_attempt: at(NOW + 7 * DAY + 1) }, NOW))).to.match(/7 days/);
  });

  it('refuses a first_attempt now or in the past', () => {
    expect(appErrorOf(() => scheduleTimes({ first_attempt: at(NOW) }, NOW))).to.match(/future/);
    appErrorOf(() => scheduleTimes({ first_attempt: at(NOW - HOUR) }, NOW));
  });

  it('accepts expires exactly 8 days ahead and refuses one millisecond more', () => {
    expect(scheduleTimes({ expires: at(NOW + 8 * DAY) }, NOW)?.expires).to.equal(NOW + 8 * DAY);
    expect(appErrorOf(() => scheduleTimes({ expires: at(NOW + 8 * DAY + 1) }, NOW))).to.match(/8 days/);
  });

  it('refuses an expires now or in the past', () => {
    expect(appErrorOf(() => scheduleTimes({ expires: at(NOW) }, NOW))).to.match(/future/);
    appErrorOf(() => scheduleTimes({ expires: at(NOW - 1) }, NOW));
  });

  it('refuses an expires at or before the first attempt', () => {
    expect(appErrorOf(() => scheduleTimes({ first_attempt: at(NOW + 2 * HOUR), expires: at(NOW + HOUR) }, NOW))).to.match(/after/);
    appErrorOf(() => scheduleTimes({ first_attempt: at(NOW + HOUR), expires: at(NOW + HOUR) }, NOW));
  });

  it('refuses times that are not times', () => {
    expect(appErrorOf(() => scheduleTimes({ first_attempt: 'tomorrow' }, NOW))).to.match(/RFC3339/);
    expect(appErrorOf(() => scheduleTimes({ expires: 'soon' }, NOW))).to.match(/RFC3339/);
  });
});

describe('checkTags', () => {
  it('keeps tags in order and collapses duplicates', () => {
    expect(checkTags(['a', 'b', 'a', 'c'])).to.deep.equal(['a', 'b', 'c']);
  });

  it('treats tags as case-sensitive', () => {
    expect(checkTags(['Tag', 'tag'])).to.deep.equal(['Tag', 'tag']);
  });

  it(`accepts ${MAX_TAGS} tags and refuses ${MAX_TAGS + 1}`, () => {
    const ten = Array.from({ length: MAX_TAGS }, (_, i) => `t${i}`);
    expect(checkTags(ten)).to.have.length(MAX_TAGS);
    expect(appErrorOf(() => checkTags([...ten, 'one-more']))).to.match(/at most 10 tags/);
  });

  it('counts distinct tags against the limit: eleven entries with a duplicate pass', () => {
    const ten = Array.from({ length: MAX_TAGS }, (_, i) => `t${i}`);
    expect(checkTags([...ten, 't0'])).to.have.length(MAX_TAGS);
  });

  it(`accepts a tag of ${MAX_TAG_LENGTH} characters and refuses ${MAX_TAG_LENGTH + 1}`, () => {
    expect(checkTags(['x'.repeat(MAX_TAG_LENGTH)])).to.have.length(1);
    appErrorOf(() => checkTags(['x'.repeat(MAX_TAG_LENGTH + 1)]));
  });

  for (const tag of ['', 'a,b', 'new\nline', 'bell\u0007', 'rtl\u202e']) {
    const shown = tag.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    it(`refuses the tag "${shown}"`, () => {
      appErrorOf(() => checkTags([tag]));
    });
  }
});
