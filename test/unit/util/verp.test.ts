import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { VerpTokens } from '../../../src/util/verp.ts';

describe('VERP tokens', () => {
  const tokens = new VerpTokens(randomBytes(32));
  const id = '01a1fdfb-3448-7290-b0f9-bd172324b836';

  it('name the message and verify under the same key', () => {
    const token = tokens.token(id);
    expect(token).to.match(/^01a1fdfb34487290b0f9bd172324b836[0-9a-f]{16}$/);
    expect(tokens.messageId(token)).to.equal(id);
    expect(tokens.messageId(token.toUpperCase())).to.equal(id);
  });

  it('refuse forged, altered, truncated and foreign tokens', () => {
    const token = tokens.token(id);
    const flipped = token.slice(0, -1) + (token.endsWith('0') ? '1' : '0');
    expect(tokens.messageId(flipped)).to.equal(null);
    expect(tokens.messageId('01a1fdfb34487290b0f9bd172324b836')).to.equal(null);
    expect(tokens.messageId(`${token}00`)).to.equal(null);
    expect(tokens.messageId('z'.repeat(48))).to.equal(null);
    expect(tokens.messageId('')).to.equal(null);
    expect(new VerpTokens(randomBytes(32)).messageId(token)).to.equal(null);
    // Another message's id with this message's MAC.
    expect(tokens.messageId(`01a1fdfb34487290b0f9bd172324b837${token.slice(32)}`)).to.equal(null);
  });
});
