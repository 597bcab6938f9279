import { expect } from 'chai';
import { LineCheck, MAX_LINE_OCTETS } from '../../../src/smtp/line-check.ts';

/** Runs chunks through a LineCheck: what came out, and the problem it found. */
async function run(chunks: Buffer[]): Promise<{ out: Buffer[]; problem: string | null }> {
  const check = new LineCheck();
  const out: Buffer[] = [];
  check.on('data', (c: Buffer) => out.push(c));
  const ended = new Promise((resolve) => check.on('end', resolve));
  for (const c of chunks) check.write(c);
  check.end();
  await ended;
  return { out, problem: check.problem };
}

const line = (octets: number, end = '\r\n') => Buffer.from(`${'a'.repeat(octets)}${end}`, 'latin1');

describe('LineCheck (DATA stage: line length and NUL)', () => {
  it('passes lines of 998 octets plus CRLF through, the very chunks it was given', async () => {
    const chunks = [Buffer.from('Subject: x\r\n\r\n'), line(MAX_LINE_OCTETS), line(MAX_LINE_OCTETS, '\n')];
    const { out, problem } = await run(chunks);
    expect(problem).to.equal(null);
    expect(out).to.have.length(3);
    out.forEach((c, i) => expect(c).to.equal(chunks[i]));
  });

  it('refuses a line of 999 octets plus CRLF, naming the line', async () => {
    const { problem } = await run([Buffer.from('Subject: x\r\n\r\n'), line(999)]);
    expect(problem).to.match(/line 3 is longer than 998 octets/);
  });

  it('counts a line split over chunks, and a CR at the end of one chunk with its LF in the next', async () => {
    const ok = await run([Buffer.from('a'.repeat(500)), Buffer.from(`${'a'.repeat(498)}\r`), Buffer.from('\nnext\r\n')]);
    expect(ok.problem).to.equal(null);
    const long = await run([Buffer.from('a'.repeat(500)), Buffer.from('a'.repeat(499)), Buffer.from('\r\n')]);
    expect(long.problem).to.match(/line 1 is longer/);
  });

  it('refuses a 1 MiB header line and stops passing data on from there', async () => {
    const mib = Buffer.alloc(1024 * 1024, 0x61);
    const { out, problem } = await run([Buffer.from('X-Long: '), mib, mib, Buffer.from('\r\n\r\nbody\r\n')]);
    expect(problem).to.match(/line 1 is longer/);
    expect(out.reduce((n, c) => n + c.length, 0)).to.equal(8);
  });

  it('refuses a NUL octet anywhere, in headers or body', async () => {
    expect((await run([Buffer.from('Subject: a\0b\r\n\r\nbody\r\n')])).problem).to.match(/line 1 contains a NUL/);
    expect((await run([Buffer.from('Subject: x\r\n\r\nbo'), Buffer.from('dy\0\r\n')])).problem).to.match(/line 3 contains a NUL/);
  });

  it('takes an empty message and a last line without CRLF', async () => {
    expect((await run([])).problem).to.equal(null);
    expect((await run([Buffer.from('a\r\nb')])).problem).to.equal(null);
  });
});
