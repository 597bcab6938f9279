import { expect } from 'chai';
import { otherAccount, startDomainBed, type ApiDomain, type DomainBed } from '../../helpers/domains.ts';

describe('listing domains', () => {
  let bed: DomainBed;
  beforeEach(async () => {
    bed = await startDomainBed();
  });
  afterEach(async () => {
    await bed.stop();
  });

  it('refuses dns_valid=maybe with 400', async () => {
    const res = await bed.api('GET', `${bed.base}?dns_valid=maybe`);
    expect(res.status).to.equal(400);
    expect(res.body.message).to.be.a('string').and.not.empty;
  });

  it("lists only this account's domains, in creation order", async () => {
    const other = await otherAccount(bed);
    expect((await bed.api('POST', other.base, { key: other.key, body: { domain: 'theirs.com' } })).status).to.equal(201);
    const names = ['a.com', 'b.com', 'c.com'];
    for (const name of names) await bed.create(name);
    const res = await bed.api('GET', bed.base);
    expect(res.body.data.map((d: ApiDomain) => d.domain)).to.deep.equal(names);
    expect(res.body.pagination).to.deep.equal({ has_more: false });
  });

  it('moves a domain between the dns_valid filters when its validity changes', async () => {
    for (const name of ['a.com', 'b.com']) {
      bed.publish(await bed.create(name));
      expect((await bed.recheck(name)).body.dns_valid).to.equal(true);
    }
    const names = async (query: string) => (await bed.api('GET', `${bed.base}?${query}`)).body.data.map((d: ApiDomain) => d.domain);
    expect(await names('dns_valid=true')).to.deep.equal(['a.com', 'b.com']);
    bed.dns.zone.delete('_dmarc.a.com');
    expect((await bed.recheck('a.com')).body.dns_valid).to.equal(false);
    expect(await names('dns_valid=true')).to.deep.equal(['b.com']);
    expect(await names('dns_valid=false')).to.deep.equal(['a.com']);
    expect(await names('')).to.deep.equal(['a.com', 'b.com']);
  });

  it('says has_more when walking back from the first invalid domain onto valid ones', async () => {
    bed.publish(await bed.create('a.com'));
    expect((await bed.recheck('a.com')).body.dns_valid).to.equal(true);
    await bed.create('b.com');
    const first = await bed.api('GET', `${bed.base}?limit=1`);
    const second = await bed.api('GET', `${bed.base}?limit=1&after=${first.body.pagination.next_cursor}`);
    expect(second.body.data.map((d: ApiDomain) => d.domain)).to.deep.equal(['b.com']);
    const back = await bed.api('GET', `${bed.base}?limit=1&before=${second.body.pagination.previous_cursor}`);
    expect(back.body.data.map((d: ApiDomain) => d.domain)).to.deep.equal(['a.com']);
    // b.com comes after this page, whatever its validity.
    expect(back.body.pagination.has_more).to.equal(true);
    expect(back.body.pagination.next_cursor).to.be.a('string');
  });
});

describe('listing domains across valid and invalid DNS', () => {
  // d0 d1 d2 d3 d4 d5 in creation order; d1, d2 and d4 have valid DNS. One server for all the
  // tests, which only read: six RSA keys per test would make them slow.
  let bed: DomainBed;
  const names = ['d0.com', 'd1.com', 'd2.com', 'd3.com', 'd4.com', 'd5.com'];
  const valid = ['d1.com', 'd2.com', 'd4.com'];
  const invalid = names.filter((n) => !valid.includes(n));
  before(async () => {
    bed = await startDomainBed();
    for (const name of names) {
      const d = await bed.create(name);
      if (valid.includes(name)) {
        bed.publish(d);
        expect((await bed.recheck(name)).body.dns_valid).to.equal(true);
      }
    }
  });
  after(async () => {
    await bed.stop();
  });

  const list = async (query: string) => {
    const res = await bed.api('GET', `${bed.base}?${query}`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return { names: res.body.data.map((d: ApiDomain) => d.domain), pagination: res.body.pagination };
  };

  it('filters on dns_valid=true and dns_valid=false', async () => {
    expect((await list('dns_valid=true')).names).to.deep.equal(valid);
    expect((await list('dns_valid=false')).names).to.deep.equal(invalid);
    expect((await list('')).names).to.deep.equal(names);
  });

  it('walks forward with after and back with before, without a filter', async () => {
    const walked: string[][] = [];
    let page = await list('limit=2');
    walked.push(page.names);
    while (page.pagination.has_more) {
      page = await list(`limit=2&after=${page.pagination.next_cursor}`);
      walked.push(page.names);
    }
    expect(walked).to.deep.equal([names.slice(0, 2), names.slice(2, 4), names.slice(4, 6)]);
    expect(page.pagination).to.not.have.property('next_cursor');

    const back = await list(`limit=2&before=${page.pagination.previous_cursor}`);
    expect(back.names).to.deep.equal(names.slice(2, 4));
    expect(back.pagination.has_more).to.equal(true);
    const first = await list(`limit=2&before=${back.pagination.previous_cursor}`);
    expect(first.names).to.deep.equal(names.slice(0, 2));
    expect(first.pagination.has_more).to.equal(true);
    expect(first.pagination).to.not.have.property('previous_cursor');
  });

  it('pages within a filter', async () => {
    const p1 = await list('dns_valid=false&limit=2');
    expect(p1.names).to.deep.equal(['d0.com', 'd3.com']);
    expect(p1.pagination.has_more).to.equal(true);
    const p2 = await list(`dns_valid=false&limit=2&after=${p1.pagination.next_cursor}`);
    expect(p2.names).to.deep.equal(['d5.com']);
    expect(p2.pagination.has_more).to.equal(false);
    const back = await list(`dns_valid=false&limit=2&before=${p2.pagination.previous_cursor}`);
    expect(back.names).to.deep.equal(['d0.com', 'd3.com']);
    const v1 = await list('dns_valid=true&limit=2');
    expect(v1.names).to.deep.equal(['d1.com', 'd2.com']);
    expect((await list(`dns_valid=true&limit=2&after=${v1.pagination.next_cursor}`)).names).to.deep.equal(['d4.com']);
  });
});
