import { scryptSync } from 'node:crypto';
import { expect } from 'chai';
import { hashPassword, verifyPassword } from '../../../src/accounts/smtp-credentials.ts';
import type { PasswordHashRecord } from '../../../src/store/records.ts';

describe('SMTP credential password hashing', () => {
  it('keeps an scrypt hash with its own salt and cost, never the password', async () => {
    const a = await hashPassword('correct horse');
    const b = await hashPassword('correct horse');
    expect(a).to.include({ scheme: 'scrypt', n: 16384, r: 8, p: 1 });
    expect(Buffer.from(a.salt, 'base64')).to.have.length(16);
    expect(Buffer.from(a.hash, 'base64')).to.have.length(32);
    expect(a.salt).to.not.equal(b.salt);
    expect(a.hash).to.not.equal(b.hash);
    expect(JSON.stringify(a)).to.not.contain('correct horse');
  });

  it('verifies the right password only', async () => {
    const stored = await hashPassword('s3cret');
    expect(await verifyPassword('s3cret', stored)).to.equal(true);
    expect(await verifyPassword('s3creT', stored)).to.equal(false);
    expect(await verifyPassword('', stored)).to.equal(false);
  });

  it('verifies with the cost stored in the hash, so the cost can change later', async () => {
    const salt = Buffer.from('0123456789abcdef');
    const stored: PasswordHashRecord = {
      scheme: 'scrypt',
      n: 1024,
      r: 4,
      p: 2,
      salt: salt.toString('base64'),
      hash: scryptSync('older', salt, 64, { N: 1024, r: 4, p: 2 }).toString('base64'),
    };
    expect(await verifyPassword('older', stored)).to.equal(true);
    expect(await verifyPassword('newer', stored)).to.equal(false);
  });
});
