import { expect } from 'chai';
import { decodeFrames, encodeEnd, encodeFile, encodeRecords, isSafePath, MAGIC, type BackupSummary, type Frame } from '../../../src/backup/format.ts';

const summary: BackupSummary = {
  format: 'postilion-backup',
  version: 1,
  created_at: '2026-11-27T12:00:00.000Z',
  source: { data_dir: '/d', keys_dir: '/k' },
  records: 2,
  records_sha256: 'x',
  files: [],
};

async function decode(chunks: Buffer[]): Promise<Frame[]> {
  const frames: Frame[] = [];
  for await (const f of decodeFrames(
    (async function* () {
      yield* chunks;
    })(),
  ))
    frames.push(f);
  return frames;
}

describe('backup stream format', () => {
  it('decodes what it encodes whatever the chunking (one byte at a time, or all at once)', async () => {
    const stream = Buffer.concat([
      MAGIC,
      encodeFile({ path: 'dkim/d1/s1.pem', mode: 0o600, data: Buffer.from('PEM') }),
      encodeRecords([
        [Buffer.from('!messages!m1'), Buffer.from('{}')],
        [Buffer.from('!bodies!b1'), Buffer.alloc(0)],
      ]),
      encodeEnd(summary),
    ]);
    for (const chunks of [[stream], [...stream].map((b) => Buffer.from([b]))]) {
      const frames = await decode(chunks);
      expect(frames.map((f) => f.type)).to.deep.equal(['file', 'records', 'end']);
      const file = frames[0] as Extract<Frame, { type: 'file' }>;
      expect(file.file).to.deep.include({ path: 'dkim/d1/s1.pem', mode: 0o600 });
      expect(file.file.data.toString()).to.equal('PEM');
      const records = frames[1] as Extract<Frame, { type: 'records' }>;
      expect(records.entries.map(([k, v]) => [k.toString(), v.toString()])).to.deep.equal([
        ['!messages!m1', '{}'],
        ['!bodies!b1', ''],
      ]);
      expect((frames[2] as Extract<Frame, { type: 'end' }>).summary).to.deep.equal(summary);
    }
  });

  it('refuses streams cut short, with trailing bytes, unknown frames or malformed records', async () => {
    const whole = Buffer.concat([MAGIC, encodeRecords([[Buffer.from('k'), Buffer.from('v')]]), encodeEnd(summary)]);
    const cases: Array<[Buffer, string]> = [
      [whole.subarray(0, whole.length - 1), 'cut short'],
      [whole.subarray(0, MAGIC.length + 3), 'cut short'],
      [Buffer.concat([whole, Buffer.from('x')]), 'bytes after the end frame'],
      [Buffer.concat([MAGIC, Buffer.from('Z\u0000\u0000\u0000\u0000')]), 'unknown frame type'],
      [Buffer.concat([MAGIC, Buffer.from([0x52, 0, 0, 0, 2, 0, 9])]), 'malformed'],
      [Buffer.from('not a backup at all'), 'not a Postilion backup'],
    ];
    for (const [bytes, said] of cases) {
      let error: Error | null = null;
      try {
        await decode([bytes]);
      } catch (err) {
        error = err as Error;
      }
      expect(error?.message, said).to.contain(said);
    }
  });

  it('takes only key file paths that stay inside keys.dir', () => {
    for (const ok of ['verp.key', 'tls/smtp.crt', 'dkim/0190/s1.pem']) expect(isSafePath(ok), ok).to.equal(true);
    for (const bad of ['', '/etc/passwd', '../x', 'a/../../x', 'a//b', './a', 'a\\b', 'a\u0000b']) expect(isSafePath(bad), bad).to.equal(false);
  });
});
