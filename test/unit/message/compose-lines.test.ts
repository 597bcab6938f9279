import { expect } from 'chai';
import { composeBody, type BodyContent } from '../../../src/message/compose.ts';
import { AppError } from '../../../src/util/errors.ts';

/** API mail is built here: it must never hold a line the SMTP listeners would refuse (over 998 octets). */
const content = (fields: Partial<BodyContent>): BodyContent => ({
  from: { email: 'app@example.com' },
  subject: 'Hello',
  text: 'x',
  attachments: [],
  headers: [],
  date: new Date(0),
  ...fields,
});

async function longestLine(c: BodyContent): Promise<number> {
  const body = await composeBody(c, 'boundary');
  return Math.max(
    ...Buffer.concat(body.chunks)
      .toString('latin1')
      .split('\r\n')
      .map((l) => l.length),
  );
}

async function refusal(c: BodyContent): Promise<string> {
  try {
    await composeBody(c, 'boundary');
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).status).to.equal(400);
    return (err as AppError).message;
  }
  throw new Error('expected a 400');
}

describe('composeBody: lines of at most 998 octets', () => {
  it('folds a subject and a custom header whose longest word is 997 characters into lines of at most 998', async () => {
    expect(await longestLine(content({ subject: `Hi ${'b'.repeat(997)}`, headers: [['X-Long', 'e'.repeat(997)]] }))).to.be.at.most(998);
  });

  it('refuses (400) a subject or a custom header with an unbreakable word of 998 characters, which no folding could fit', async () => {
    expect(await refusal(content({ subject: 'b'.repeat(998) }))).to.match(/^subject has a word of 998 characters/);
    expect(await refusal(content({ headers: [['X-Long', 'e'.repeat(998)]] }))).to.match(/^headers: the value of X-Long has a word of 998/);
  });

  it('keeps a long non-ASCII subject (encoded-words, split by the composer) and long body lines within 998', async () => {
    expect(await longestLine(content({ subject: 'ü'.repeat(998), text: 'y'.repeat(5000), html: `<p>${'z'.repeat(5000)}</p>` }))).to.be.at.most(998);
  });
});
