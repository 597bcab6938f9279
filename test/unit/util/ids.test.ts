import { expect } from 'chai';
import { v7 as uuidv7, validate, version } from 'uuid';
import { idFloor, isUuid, newId, newIdAt } from '../../../src/util/ids.ts';

describe('ids', () => {
  const timeOf = (id: string) => parseInt(id.replaceAll('-', '').slice(0, 12), 16);
  const variantOf = (id: string) => parseInt(id[19]!, 16) >> 2;

  it('makes RFC 9562 version 7 UUIDs with the time given, counting up within a millisecond', () => {
    const at = Date.parse('2026-11-27T01:00:00.123Z');
    const ids = Array.from({ length: 5000 }, (_, i) => newIdAt(at + Math.floor(i / 1000)));
    for (const id of ids) {
      expect(validate(id), id).to.equal(true);
      expect(version(id)).to.equal(7);
      expect(variantOf(id)).to.equal(2);
      expect(isUuid(id)).to.equal(true);
    }
    expect(ids.map(timeOf)).to.deep.equal(ids.map((_, i) => at + Math.floor(i / 1000)));
    // In the order made, and all different.
    expect([...ids].sort()).to.deep.equal(ids);
    expect(new Set(ids).size).to.equal(ids.length);
    expect(ids[0]! >= idFloor(at)).to.equal(true);
  });

  it('makes ids on the machine clock that sort in the order made and after the time they were made', () => {
    const before = Date.now();
    const ids = Array.from({ length: 20_000 }, () => newId());
    const after = Date.now();
    for (const id of ids.slice(0, 100)) expect(version(id)).to.equal(7);
    expect([...ids].sort()).to.deep.equal(ids);
    expect(new Set(ids).size).to.equal(ids.length);
    expect(timeOf(ids[0]!)).to.be.within(before, after);
    // The same layout as the uuid package's own v7 (time first, then the counter).
    expect(uuidv7({ msecs: timeOf(ids[0]!), seq: 0 }).slice(0, 14)).to.equal(ids[0]!.slice(0, 14));
  });
});
