import { expect } from 'chai';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_LINK_INDEX, TrackingTokens } from '../../../src/tracking/tokens.ts';
import { newId } from '../../../src/util/ids.ts';
import { SecretBox } from '../../../src/util/secret-box.ts';

/** The token with the base64url character at `at` replaced by a different one. */
function flip(token: string, at: number): string {
  const i = at < 0 ? token.length + at : at;
  const c = token[i]!;
  return token.slice(0, i) + (c === 'A' ? 'B' : 'A') + token.slice(i + 1);
}

/** The token with one bit of its decoded byte `byte` flipped (so the change is never lost in base64 padding bits). */
function flipByte(token: string, byte: number): string {
  const raw = Buffer.from(token, 'base64url');
  const i = byte < 0 ? raw.length + byte : byte;
  raw[i]! ^= 0x01;
  return raw.toString('base64url');
}

describe('tracking tokens', () => {
  const tokens = new TrackingTokens(randomBytes(32));
  const id = newId();

  it('reads back the message of an open token', () => {
    const token = tokens.open(id);
    expect(token).to.match(/^[A-Za-z0-9_-]+$/);
    expect(tokens.readOpen(token)).to.deep.equal({ messageId: id });
  });

  it('reads back the message and link index of a click token, for the whole index range', () => {
    for (const index of [0, 1, 7, 255, 256, 4242, MAX_LINK_INDEX]) {
      expect(tokens.readClick(tokens.click(id, index))).to.deep.equal({ messageId: id, index });
    }
  });

  it('gives different tokens for different messages and different links, and the same token for the same input', () => {
    const other = newId();
    expect(tokens.open(id)).to.equal(tokens.open(id));
    expect(tokens.open(id)).to.not.equal(tokens.open(other));
    expect(tokens.click(id, 0)).to.not.equal(tokens.click(id, 1));
    expect(tokens.click(id, 0)).to.not.equal(tokens.click(other, 0));
    expect(tokens.readOpen(tokens.open(other))).to.deep.equal({ messageId: other });
  });

  it('does not put the URL or anything but the id, index and MAC in a token', () => {
    // 16-byte id + 12-byte MAC, and + 2-byte index for a click.
    expect(Buffer.from(tokens.open(id), 'base64url')).to.have.length(28);
    expect(Buffer.from(tokens.click(id, 3), 'base64url')).to.have.length(30);
    expect(Buffer.from(tokens.open(id), 'base64url').subarray(0, 16).toString('hex')).to.equal(id.replace(/-/g, ''));
  });

  it('rejects an open token with one character changed in the MAC or in the payload', () => {
    const token = tokens.open(id);
    expect(tokens.readOpen(flip(token, -1))).to.equal(null);
    expect(tokens.readOpen(flip(token, -5))).to.equal(null);
    expect(tokens.readOpen(flip(token, 0))).to.equal(null);
    expect(tokens.readOpen(flip(token, 10))).to.equal(null);
    expect(tokens.readOpen(flipByte(token, -1))).to.equal(null);
    expect(tokens.readOpen(flipByte(token, 3))).to.equal(null);
    expect(tokens.readOpen(token)).to.deep.equal({ messageId: id });
  });

  it('rejects a click token with the link index, the id or the MAC changed', () => {
    const token = tokens.click(id, 5);
    // Bytes 16 and 17 are the index: 5 → 4 (or 261), a forged redirect to another link.
    expect(tokens.readClick(flipByte(token, 17))).to.equal(null);
    expect(tokens.readClick(flipByte(token, 16))).to.equal(null);
    expect(tokens.readClick(flipByte(token, 0))).to.equal(null);
    expect(tokens.readClick(flipByte(token, -1))).to.equal(null);
    expect(tokens.readClick(flip(token, 0))).to.equal(null);
    expect(tokens.readClick(flip(token, -1))).to.equal(null);
    expect(tokens.readClick(token)).to.deep.equal({ messageId: id, index: 5 });
  });

  it('does not accept an open token as a click token, nor a click token as an open token', () => {
    const open = tokens.open(id);
    const click = tokens.click(id, 0);
    expect(tokens.readClick(open)).to.equal(null);
    expect(tokens.readOpen(click)).to.equal(null);
  });

  it("does not accept a token whose payload has the other kind's length but is signed as the first kind", () => {
    // An open token of 28 bytes padded to 30 cannot pass as a click: the MAC is keyed by kind.
    const raw = Buffer.from(tokens.open(id), 'base64url');
    const asClick = Buffer.concat([raw.subarray(0, 16), Buffer.from([0, 0]), raw.subarray(16)]).toString('base64url');
    expect(tokens.readClick(asClick)).to.equal(null);
  });

  describe('the MAC is keyed by the kind of token', () => {
    const key = randomBytes(32);
    const keyed = new TrackingTokens(key);
    const mac = (label: string, payload: Buffer) => createHmac('sha256', key).update(label).update(payload).digest().subarray(0, 12);
    const idBytes = Buffer.from(id.replace(/-/g, ''), 'hex');
    const clickPayload = Buffer.concat([idBytes, Buffer.from([0x01, 0x02])]);

    it('is HMAC-SHA256 under the key of "track:<kind>:" and the payload, cut to 12 bytes (tokens in sent mail must keep working)', () => {
      expect(keyed.open(id)).to.equal(Buffer.concat([idBytes, mac('track:o:', idBytes)]).toString('base64url'));
      expect(keyed.click(id, 0x0102)).to.equal(Buffer.concat([clickPayload, mac('track:c:', clickPayload)]).toString('base64url'));
    });

    it('a payload of the right length signed as the other kind is refused', () => {
      expect(keyed.readClick(Buffer.concat([clickPayload, mac('track:o:', clickPayload)]).toString('base64url'))).to.equal(null);
      expect(keyed.readOpen(Buffer.concat([idBytes, mac('track:c:', idBytes)]).toString('base64url'))).to.equal(null);
      expect(keyed.readClick(Buffer.concat([clickPayload, mac('track:c:', clickPayload)]).toString('base64url'))).to.deep.equal({
        messageId: id,
        index: 0x0102,
      });
    });
  });

  it('answers a token read before (kept once verified) as the first time, and still never as the other kind', () => {
    const keyed = new TrackingTokens(randomBytes(32));
    const open = keyed.open(id);
    const click = keyed.click(id, 7);
    for (let i = 0; i < 2; i++) {
      expect(keyed.readOpen(open)).to.deep.equal({ messageId: id });
      expect(keyed.readClick(click)).to.deep.equal({ messageId: id, index: 7 });
      expect(keyed.readClick(open)).to.equal(null);
      expect(keyed.readOpen(click)).to.equal(null);
      expect(keyed.readOpen(flipByte(open, -1))).to.equal(null);
    }
  });

  it('rejects tokens made with another key', () => {
    const other = new TrackingTokens(randomBytes(32));
    expect(tokens.readOpen(other.open(id))).to.equal(null);
    expect(tokens.readClick(other.click(id, 2))).to.equal(null);
    expect(other.readOpen(tokens.open(id))).to.equal(null);
  });

  it('rejects garbage, empty, padded, non-canonical and over-long input without throwing', () => {
    const open = tokens.open(id);
    const click = tokens.click(id, 9);
    const bad = [
      '',
      'x',
      'not a token',
      '../../etc/passwd',
      `${open}=`,
      `${open}==`,
      ` ${open}`,
      `${open}\n`,
      `${open.slice(0, -2)}+/`,
      open.slice(0, -1),
      `${open}A`,
      `${open}AAAA`,
      'A'.repeat(38),
      'A'.repeat(40),
      'A'.repeat(65),
      'A'.repeat(10_000),
      open + open,
      '\u0000'.repeat(38),
      'é'.repeat(38),
    ];
    for (const token of bad) {
      expect(() => tokens.readOpen(token), JSON.stringify(token)).to.not.throw();
      expect(() => tokens.readClick(token), JSON.stringify(token)).to.not.throw();
      expect(tokens.readOpen(token), JSON.stringify(token)).to.equal(null);
      expect(tokens.readClick(token), JSON.stringify(token)).to.equal(null);
    }
    expect(tokens.readClick(click.slice(0, -1))).to.equal(null);
    expect(tokens.readClick(`${click}A`)).to.equal(null);
  });

  it('rejects a token whose last character carries non-zero padding bits (only the canonical spelling passes)', () => {
    const open = tokens.open(id);
    // 28 bytes in base64url: 38 characters, the last one holding 4 data bits and 2 unused bits.
    expect(open).to.have.length(38);
    const last = open[open.length - 1]!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const value = alphabet.indexOf(last);
    const sibling = alphabet[value ^ 0x01]!;
    const variant = open.slice(0, -1) + sibling;
    // Same bytes when decoded, different text: still refused.
    expect(Buffer.from(variant, 'base64url').equals(Buffer.from(open, 'base64url'))).to.equal(true);
    expect(tokens.readOpen(variant)).to.equal(null);
  });

  it('refuses to make tokens of a non-UUID message id or an out-of-range link index', () => {
    expect(() => tokens.open('not-a-uuid')).to.throw(TypeError);
    expect(() => tokens.click('', 0)).to.throw(TypeError);
    expect(() => tokens.click(id, -1)).to.throw(RangeError);
    expect(() => tokens.click(id, MAX_LINK_INDEX + 1)).to.throw(RangeError);
    expect(() => tokens.click(id, 1.5)).to.throw(RangeError);
    expect(() => tokens.click(id, Number.NaN)).to.throw(RangeError);
  });

  it('refuses a key shorter than 32 bytes', () => {
    expect(() => new TrackingTokens(randomBytes(31))).to.throw(/at least 32 bytes/);
    expect(() => new TrackingTokens(Buffer.alloc(0))).to.throw();
    expect(() => new TrackingTokens(randomBytes(64))).to.not.throw();
  });

  describe('with the key file the daemon uses (keys/tracking.key via SecretBox.loadOrCreate)', () => {
    let dir: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'postilion-tracking-key-'));
    });
    after(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    it('creates the key once, and tokens made before a restart still read after it', () => {
      const path = join(dir, 'keys', 'tracking.key');
      const first = new TrackingTokens(SecretBox.loadOrCreate(path).rawKey());
      const open = first.open(id);
      const click = first.click(id, 12);
      const again = new TrackingTokens(SecretBox.loadOrCreate(path).rawKey());
      expect(again.readOpen(open)).to.deep.equal({ messageId: id });
      expect(again.readClick(click)).to.deep.equal({ messageId: id, index: 12 });
      const elsewhere = new TrackingTokens(SecretBox.loadOrCreate(join(dir, 'other', 'tracking.key')).rawKey());
      expect(elsewhere.readOpen(open)).to.equal(null);
    });
  });
});
