import { expect } from 'chai';
import DataStream from 'nodemailer/lib/smtp-connection/data-stream';
import { DataEncoder } from '../../../src/delivery/data-encoder.ts';

function encoded(parts: Buffer[]): Buffer {
  const encoder = new DataEncoder();
  return Buffer.concat([...parts.map((p) => encoder.encode(p)), encoder.end()]);
}

/** What nodemailer's DataStream (the reference the pool used before) makes of the same parts. */
async function reference(parts: Buffer[]): Promise<Buffer> {
  const stream = new DataStream();
  const out: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => out.push(chunk));
  const ended = new Promise((resolve) => stream.on('end', resolve));
  for (const part of parts) stream.write(part);
  stream.end();
  await ended;
  return Buffer.concat(out);
}

const text = (s: string) => Buffer.from(s, 'latin1');
const show = (b: Buffer) => JSON.stringify(b.toString('latin1'));

/** A deterministic generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

describe('DataEncoder', () => {
  it('hands a CRLF message without leading dots back as the same buffer, then the dot line', () => {
    const message = text('Subject: x\r\n\r\nHello\r\n');
    const encoder = new DataEncoder();
    expect(encoder.encode(message)).to.equal(message);
    expect(encoder.end().toString()).to.equal('.\r\n');
  });

  it('doubles a dot at the start of a line, also at the start of the data and of a part', () => {
    expect(show(encoded([text('.a\r\n..b\r\nc.\r\n.')]))).to.equal(show(text('..a\r\n...b\r\nc.\r\n..\r\n.\r\n')));
    expect(show(encoded([text('a\r\n'), text('.b\r\n')]))).to.equal(show(text('a\r\n..b\r\n.\r\n')));
  });

  it('turns bare LF and bare CR into CRLF, across parts too, so that "\\r.\\r" cannot end the data', () => {
    expect(show(encoded([text('a\nb\rc\r\n')]))).to.equal(show(text('a\r\nb\r\nc\r\n.\r\n')));
    expect(show(encoded([text('a\r'), text('.\r'), text('\n')]))).to.equal(show(text('a\r\n..\r\n.\r\n')));
    expect(show(encoded([text('a\r'), text('\nb')]))).to.equal(show(text('a\r\nb\r\n.\r\n')));
  });

  it('closes the last line before the dot line when the message does not end with one', () => {
    expect(show(encoded([text('a')]))).to.equal(show(text('a\r\n.\r\n')));
    expect(show(encoded([text('a\r')]))).to.equal(show(text('a\r\n.\r\n')));
    expect(show(encoded([]))).to.equal(show(text('\r\n.\r\n')));
  });

  it('rewrites a large message of bare LF lines in linear time, as nodemailer does', async () => {
    const big = text('line of text\n.dot line\n'.repeat(50_000));
    const started = process.hrtime.bigint();
    const out = encoded([big]);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    expect(out.equals(await reference([big]))).to.equal(true);
    expect(ms, `${ms.toFixed(0)} ms for ${big.length} bytes`).to.be.below(1000);
  });

  it('makes what nodemailer DataStream makes, for random text of CR, LF, dots and letters split at random', async () => {
    const next = random(35);
    const alphabet = ['\r', '\n', '.', 'a', 'b', '\r\n', '\r\n.', ' '];
    for (let round = 0; round < 2000; round++) {
      let s = '';
      const length = Math.floor(next() * 40);
      for (let i = 0; i < length; i++) s += alphabet[Math.floor(next() * alphabet.length)];
      const whole = text(s);
      const parts: Buffer[] = [];
      for (let at = 0; at < whole.length;) {
        const size = 1 + Math.floor(next() * 8);
        parts.push(whole.subarray(at, at + size));
        at += size;
      }
      if (next() < 0.2) parts.splice(Math.floor(next() * (parts.length + 1)), 0, Buffer.alloc(0));
      expect(show(encoded(parts)), `parts ${JSON.stringify(parts.map((p) => p.toString('latin1')))}`).to.equal(show(await reference(parts)));
      expect(show(encoded([whole])), `input ${show(whole)}`).to.equal(show(await reference([whole])));
    }
  });
});
