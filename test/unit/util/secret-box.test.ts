import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SecretBox } from '../../../src/util/secret-box.ts';

describe('SecretBox', () => {
  // Boxes with fresh keys, made as the daemon makes them: from a key file created on first use.
  let keys: string;
  let box: SecretBox;
  before(() => {
    keys = mkdtempSync(join(tmpdir(), 'postilion-secret-box-keys-'));
    box = SecretBox.loadOrCreate(join(keys, 'box.key'));
  });
  after(() => rmSync(keys, { recursive: true, force: true }));

  it('opens what it sealed', () => {
    const plaintext = '{"secret":"pk_live_ünïcode"}';
    expect(box.open(box.seal(plaintext))).to.equal(plaintext);
  });

  it('does not show the plaintext in the sealed text and seals the same text differently each time', () => {
    const first = box.seal('hunter2');
    const second = box.seal('hunter2');
    expect(first).to.not.equal(second);
    expect(Buffer.from(first, 'base64').toString('latin1')).to.not.contain('hunter2');
  });

  it('refuses to open tampered ciphertext', () => {
    const raw = Buffer.from(box.seal('keep me intact'), 'base64');
    raw[raw.length - 1]! ^= 0x01;
    expect(() => box.open(raw.toString('base64'))).to.throw();
  });

  it('refuses to open a tampered authentication tag', () => {
    const raw = Buffer.from(box.seal('keep me intact'), 'base64');
    raw[12]! ^= 0x01;
    expect(() => box.open(raw.toString('base64'))).to.throw();
  });

  it('refuses to open text sealed under another key', () => {
    const other = SecretBox.loadOrCreate(join(keys, 'other.key'));
    expect(() => other.open(box.seal('private'))).to.throw();
  });

  describe('loadOrCreate', () => {
    let dir: string;

    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'postilion-secret-box-'));
    });

    afterEach(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    it('creates a key file readable by the owner only, in a directory it creates', () => {
      const path = join(dir, 'keys', 'secret-box.key');
      SecretBox.loadOrCreate(path);
      expect(statSync(path).mode & 0o777).to.equal(0o600);
      expect(readFileSync(path, 'utf8').trim()).to.match(/^[0-9a-f]{64}$/);
    });

    it('reloads the same key from the file it created', () => {
      const path = join(dir, 'secret-box.key');
      const sealed = SecretBox.loadOrCreate(path).seal('survives a restart');
      const keyText = readFileSync(path, 'utf8');
      const reloaded = SecretBox.loadOrCreate(path);
      expect(reloaded.open(sealed)).to.equal('survives a restart');
      expect(readFileSync(path, 'utf8')).to.equal(keyText);
    });

    it('refuses a key file that does not hold a 32-byte hex key', () => {
      const path = join(dir, 'bad.key');
      writeFileSync(path, 'abcd\n');
      expect(() => SecretBox.loadOrCreate(path)).to.throw('32-byte hex key');
    });
  });
});
