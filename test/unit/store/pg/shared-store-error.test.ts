import { expect } from 'chai';
import pg from 'pg';
import { KvConflictError, decodeKey, encodeKey } from '../../../../src/store/pg/kv.ts';
import { isUnreachable, reaching, SharedStoreError } from '../../../../src/store/pg/shared-store-error.ts';
import { sharedStoreRefusal } from '../../../../src/smtp/storage-reply.ts';

function databaseError(code: string): pg.DatabaseError {
  return Object.assign(new pg.DatabaseError(`sqlstate ${code}`, 0, 'error'), { code });
}

describe('the cluster database out of reach (SharedStoreError)', () => {
  it('tells a database that is away or cannot serve now from a statement it refused', () => {
    // Connection lost, shutdown or restart, too many connections, a serialization failure, a standby.
    for (const code of ['08006', '57P01', '57P03', '53300', '40001', '25006', '58000']) expect(isUnreachable(databaseError(code)), code).to.equal(true);
    // Syntax, a constraint, bad text: ours to fix, not a moment to wait.
    for (const code of ['42601', '23505', '22021', 'XX000']) expect(isUnreachable(databaseError(code)), code).to.equal(false);
  });

  it("counts socket errors and node-postgres's lost connections, not errors of ours", () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect' });
    expect(isUnreachable(refused)).to.equal(true);
    for (const message of ['Connection terminated unexpectedly', 'timeout exceeded when trying to connect', 'Cannot use a pool after calling end on the pool'])
      expect(isUnreachable(new Error(message)), message).to.equal(true);
    expect(isUnreachable(new TypeError('x is not a function'))).to.equal(false);
    expect(isUnreachable(new KvConflictError('idempotency/k changed meanwhile'))).to.equal(false);
    expect(isUnreachable('a string')).to.equal(false);
  });

  it('wraps what it counts, with its cause, and lets anything else through as it is', async () => {
    const lost = new Error('Connection terminated unexpectedly');
    const wrapped = await reaching(() => Promise.reject(lost)).catch((err: unknown) => err);
    expect(wrapped).to.be.instanceOf(SharedStoreError);
    expect((wrapped as Error).message).to.equal('the cluster database could not be reached: Connection terminated unexpectedly');
    expect((wrapped as Error).cause).to.equal(lost);
    const syntax = databaseError('42601');
    expect(await reaching(() => Promise.reject(syntax)).catch((err: unknown) => err)).to.equal(syntax);
    expect(await reaching(() => Promise.resolve(7))).to.equal(7);
  });

  it('is answered over SMTP with 451 4.3.0, and only it', () => {
    const answer = sharedStoreRefusal(new SharedStoreError(new Error('down')));
    expect(answer).to.include({ responseCode: 451, message: '4.3.0 The cluster database cannot be reached; try again later' });
    expect(sharedStoreRefusal(new Error('other'))).to.equal(null);
  });
});

describe('keys in the shared database', () => {
  it('hold no U+0000, read back as written, and keep their order', () => {
    const keys = ['', 'a', 'a\u0000', 'a\u0000\u0000', 'a\u0001', 'a\u0001\u0000', 'a\u0002', 'a\u0001b', 'ab', '\u0000', '\u0001\u0001', 'é\u0000'];
    for (const key of keys) {
      expect(encodeKey(key)).to.not.include('\u0000');
      expect(decodeKey(encodeKey(key)), JSON.stringify(key)).to.equal(key);
    }
    const bytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
    const sorted = [...keys].sort(bytes);
    expect([...keys].sort((a, b) => bytes(encodeKey(a), encodeKey(b))).map((k) => JSON.stringify(k))).to.deep.equal(sorted.map((k) => JSON.stringify(k)));
    expect(encodeKey('plain:key')).to.equal('plain:key');
  });
});
