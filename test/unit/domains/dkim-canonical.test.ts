import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import { DkimMessageReader, parseHeaderFields, RelaxedBodyHash, relaxedHeader, signedFields } from '../../../src/domains/dkim-canonical.ts';

const sha = (text: string) => createHash('sha256').update(text, 'latin1').digest('base64');
const bodyHash = (...chunks: string[]) => {
  const hash = new RelaxedBodyHash();
  for (const chunk of chunks) hash.update(Buffer.from(chunk, 'latin1'));
  return hash.digest();
};
// mailauth ships no types for its body hasher: this is the part of its shape used here.
const { dkimBody } = createRequire(import.meta.url)('mailauth/lib/dkim/body/index.js') as {
  dkimBody: (canonicalization: string, hash: string, maxLength: false) => { update(chunk: Buffer): void; digest(encoding: 'base64'): string };
};

/** mailauth's relaxed body hash: an independent implementation to compare with. */
const mailauthHash = (body: string) => {
  const hash = dkimBody('relaxed', 'sha256', false);
  hash.update(Buffer.from(body, 'latin1'));
  return hash.digest('base64');
};

describe('DKIM relaxed canonicalisation', () => {
  describe('body', () => {
    it('turns whitespace runs into one space and drops whitespace at line ends (RFC 6376 §3.4.6)', () => {
      expect(bodyHash(' C \r\nD \t E\r\n\r\n\r\n')).to.equal(sha(' C\r\nD E\r\n'));
    });

    it('drops empty lines at the end, also lines of whitespace only', () => {
      expect(bodyHash('Hi\r\n\r\n \t\r\n\r\n')).to.equal(sha('Hi\r\n'));
    });

    it('ends a body without a final line end with one CRLF', () => {
      expect(bodyHash('Hi  ')).to.equal(sha('Hi\r\n'));
    });

    it('hashes an empty body, or one of empty lines only, as nothing', () => {
      const empty = '47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=';
      expect(bodyHash()).to.equal(empty);
      expect(bodyHash('\r\n\r\n')).to.equal(empty);
      expect(bodyHash(' \t ')).to.equal(empty);
    });

    it('keeps empty lines between lines, and leading whitespace as one space', () => {
      expect(bodyHash('a\r\n\r\n\r\n\t\t b\r\n')).to.equal(sha('a\r\n\r\n\r\n b\r\n'));
    });

    it('counts a bare LF and a bare CR as line ends, as the SMTP DATA stream sends them', () => {
      expect(bodyHash('a \nb\rc\r\r\nd\n\n')).to.equal(sha('a\r\nb\r\nc\r\n\r\nd\r\n'));
    });

    it('gives the same hash however the body is split into chunks', () => {
      const body = 'Dear  Customer, \r\n\r\n\t line two\t\r\n.\r\nbare\nlf and\rcr \r\n\r\n  \r\n';
      const whole = bodyHash(body);
      for (let i = 0; i <= body.length; i++) {
        for (const j of [i, Math.min(body.length, i + 1), Math.min(body.length, i + 2)]) {
          expect(bodyHash(body.slice(0, i), body.slice(i, j), body.slice(j)), `split at ${i}, ${j}`).to.equal(whole);
        }
      }
    });

    it('writes out empty lines carried over from earlier chunks when content follows, however many', () => {
      const blank = '\r\n'.repeat(50_000);
      expect(bodyHash('a\r\n', blank, 'b')).to.equal(sha(`a\r\n${blank}b\r\n`));
    });

    // Ending in CRLF, as every body does on the wire (mailauth keeps the trailing whitespace of
    // an unterminated last line, which the DATA stream's final CRLF makes a terminated one).
    it('agrees with mailauth on CRLF-terminated bodies of random whitespace, text and CRLFs', () => {
      const pieces = ['a', 'b', ' ', '\t', '  ', '\r\n', '\r\n\r\n', 'é', '.', ' \r\n'];
      let seed = 7;
      const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
      for (let round = 0; round < 300; round++) {
        const body = `${Array.from({ length: Math.floor(random() * 40) }, () => pieces[Math.floor(random() * pieces.length)]).join('')}\r\n`;
        expect(bodyHash(body), JSON.stringify(body)).to.equal(mailauthHash(body));
      }
    });
  });

  describe('header', () => {
    it('lower-cases the name, unfolds, collapses whitespace and trims around the colon (RFC 6376 §3.4.6)', () => {
      expect(relaxedHeader('A: X')).to.equal('a:X');
      expect(relaxedHeader('B : Y\t\r\n\tZ  ')).to.equal('b:Y Z');
    });

    it('trims only spaces and tabs: a value ending in byte 0xA0 (UTF-8 "à" read as latin1) keeps it', () => {
      const subject = Buffer.from('Subject: Voilà \t', 'utf8').toString('latin1');
      expect(relaxedHeader(subject)).to.equal(`subject:${Buffer.from('Voilà', 'utf8').toString('latin1')}`);
      expect(relaxedHeader('X-A:\u00a0b\u00a0')).to.equal('x-a:\u00a0b\u00a0');
    });

    it('parses fields with their continuation lines, whatever the line ends', () => {
      const fields = parseHeaderFields('From: a@example.com\r\nSubject: one\n two\r\tthree\r\nX-Empty:\r\nnot a field\r\n');
      expect(fields).to.deep.equal([
        { name: 'from', raw: 'From: a@example.com' },
        { name: 'subject', raw: 'Subject: one\r\n two\r\n\tthree' },
        { name: 'x-empty', raw: 'X-Empty:' },
      ]);
      expect(relaxedHeader(fields[1]!.raw)).to.equal('subject:one two three');
    });

    it('trims the one space a plain value may have at either end, and reads a field name as far as its colon', () => {
      expect(relaxedHeader('Subject: Hello there ')).to.equal('subject:Hello there');
      expect(relaxedHeader('Subject:Hello')).to.equal('subject:Hello');
      expect(relaxedHeader('Subject: ')).to.equal('subject:');
      expect(relaxedHeader('X-A:  a  b  ')).to.equal('x-a:a b');
      expect(relaxedHeader('X-Long \t: v')).to.equal('x-long:v');
      expect(parseHeaderFields('X-Long \t: v\r\n\r\nBody: not a field')).to.deep.equal([
        { name: 'x-long', raw: 'X-Long \t: v' },
        { name: 'body', raw: 'Body: not a field' },
      ]);
    });

    it('signs every instance of a name from the bottom up, and an oversigned name once more', () => {
      const fields = parseHeaderFields('Received: x\r\nTo: first\r\nFrom: me\r\nTo: second\r\nDate: now\r\n');
      const { h, fields: chosen } = signedFields(fields, ['From', 'To', 'Date', 'Cc'], new Set(['from', 'cc']));
      expect(h).to.deep.equal(['From', 'From', 'To', 'To', 'Date']);
      expect(chosen.map((f) => f.raw)).to.deep.equal(['From: me', 'To: second', 'To: first', 'Date: now']);
    });
  });

  describe('splitting a message', () => {
    const read = (...chunks: string[]) => {
      const reader = new DkimMessageReader();
      for (const chunk of chunks) reader.update(Buffer.from(chunk, 'latin1'));
      return reader.end();
    };

    it('splits at the first empty line and hashes only what follows', () => {
      expect(read('A: 1\r\nB: 2\r\n\r\nbody\r\n')).to.deep.equal({ header: 'A: 1\r\nB: 2\r\n', bodyHash: sha('body\r\n') });
      expect(read('A: 1\nB: 2\n\nbody\n')).to.deep.equal({ header: 'A: 1\nB: 2\n', bodyHash: sha('body\r\n') });
    });

    it('finds the empty line however the chunks cut it', () => {
      const message = 'A: 1\r\nB: 2\r\n\r\nbody\r\n\r\nmore\r\n';
      for (let i = 0; i <= message.length; i++) {
        expect(read(message.slice(0, i), message.slice(i)), `split at ${i}`).to.deep.equal({
          header: 'A: 1\r\nB: 2\r\n',
          bodyHash: sha('body\r\n\r\nmore\r\n'),
        });
      }
    });

    it('takes a message without an empty line as all header, and one that starts with it as all body', () => {
      expect(read('A: 1\r\nB: 2\r\n')).to.deep.equal({ header: 'A: 1\r\nB: 2\r\n', bodyHash: sha('') });
      expect(read('A: 1\r')).to.deep.equal({ header: 'A: 1\r', bodyHash: sha('') });
      expect(read('\r\nbody')).to.deep.equal({ header: '', bodyHash: sha('body\r\n') });
    });
  });
});
