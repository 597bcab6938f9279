import { expect } from 'chai';
import { JsonBytes, jsonParts } from '../../../src/util/json-parts.ts';

describe('JSON in parts', () => {
  const joined = (value: unknown) => Buffer.concat(jsonParts(value));
  const stringified = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8');

  it('makes the bytes JSON.stringify makes, members without a JSON form left out or null as it does', () => {
    const headers: Record<string, string> = { 'X-B': 'b', '10': 'ten', A: 'a', '2': 'two' };
    const odd = Object.create(null) as Record<string, unknown>;
    odd.z = 1;
    odd.a = [undefined, () => 1, null, NaN, -0, 1e21];
    const value = {
      type: 'message.routing',
      text: 'quotes " and \\ backslashes, \u0000 \u001f controls, \u2028, é, 😀, a lone \ud800 surrogate',
      n: 0.1,
      flag: false,
      nothing: null,
      skipped: undefined,
      fn: () => 1,
      when: new Date(Date.UTC(2026, 0, 2)),
      headers,
      nested: [{ a: [], b: {} }, [], odd],
    };
    expect(joined(value).equals(stringified(value))).to.equal(true);
  });

  it('writes long strings a slice at a time without splitting a surrogate pair or an escape', () => {
    // Past one slice (256 Ki characters), with pairs and escapes across every possible boundary.
    const unit = 'ab"\\\n😀é\u0001';
    const long = unit.repeat(Math.ceil((3 * 256 * 1024 + 7) / unit.length));
    for (const shift of [0, 1, 2, 3, 4, 5, 6]) {
      const value = { plain_body: 'x'.repeat(shift) + long, html_body: long.slice(shift) };
      expect(joined(value).equals(stringified(value)), `shift ${shift}`).to.equal(true);
    }
    expect(jsonParts({ body: long }).length).to.be.above(3);
  });

  it('puts JsonBytes in as they are: the same bytes as the string they stand for', () => {
    const data = Buffer.alloc(3 * 1024 * 1024 + 1, 'Postilion ');
    const base64 = data.toString('base64');
    const bytes = new JsonBytes([Buffer.from('"'), Buffer.from(base64, 'latin1'), Buffer.from('"')]);
    const parts = jsonParts({ attachments: [{ filename: 'a.bin', data: bytes }], after: 1 });
    expect(
      parts.some((part) => part === bytes.parts[1]),
      'the base64 buffer itself',
    ).to.equal(true);
    expect(Buffer.concat(parts).equals(stringified({ attachments: [{ filename: 'a.bin', data: base64 }], after: 1 }))).to.equal(true);
  });
});
