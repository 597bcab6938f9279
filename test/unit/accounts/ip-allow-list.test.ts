import { expect } from 'chai';
import ipaddr from 'ipaddr.js';
import { AllowListError, allowListCovers, MAX_ALLOW_LIST_ENTRIES, normalizeAllowList } from '../../../src/accounts/ip-allow-list.ts';
import { parseClientIp } from '../../../src/util/cidr.ts';

function refusal(entries: string[]): AllowListError {
  try {
    normalizeAllowList(entries);
  } catch (err) {
    expect(err).to.be.instanceOf(AllowListError);
    return err as AllowListError;
  }
  throw new Error(`expected ${JSON.stringify(entries.slice(0, 3))}… to be refused`);
}

/** n distinct IPv4 host entries 10.0.x.y. */
function distinctHosts(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `10.0.${Math.floor(i / 256)}.${i % 256}`);
}

describe('normalizeAllowList', () => {
  it('stores a bare IPv4 address as /32', () => {
    expect(normalizeAllowList(['192.0.2.7'])).to.deep.equal(['192.0.2.7/32']);
  });

  it('stores a bare IPv6 address as /128 in compressed lower-case form', () => {
    expect(normalizeAllowList(['2001:DB8:0:0:0:0:0:1'])).to.deep.equal(['2001:db8::1/128']);
  });

  it('masks the host bits of an IPv4 block', () => {
    expect(normalizeAllowList(['10.1.2.3/8'])).to.deep.equal(['10.0.0.0/8']);
  });

  it('masks the host bits of an IPv6 block and compresses it', () => {
    expect(normalizeAllowList(['2001:0db8:0000:0000:abcd::1/32'])).to.deep.equal(['2001:db8::/32']);
  });

  it('folds an IPv4-mapped IPv6 address to IPv4', () => {
    expect(normalizeAllowList(['::ffff:1.2.3.4'])).to.deep.equal(['1.2.3.4/32']);
  });

  it('folds an IPv4-mapped IPv6 block to the IPv4 block, 96 bits shorter', () => {
    expect(normalizeAllowList(['::ffff:10.0.0.0/104'])).to.deep.equal(['10.0.0.0/8']);
  });

  it('trims surrounding spaces', () => {
    expect(normalizeAllowList([' 192.0.2.7 '])).to.deep.equal(['192.0.2.7/32']);
  });

  it('removes duplicates after canonicalisation, keeping the first occurrence order', () => {
    expect(normalizeAllowList(['192.0.2.7', '10.0.0.0/8', '192.0.2.7/32', '10.9.9.9/8', '::ffff:192.0.2.7', '2001:db8::1'])).to.deep.equal([
      '192.0.2.7/32',
      '10.0.0.0/8',
      '2001:db8::1/128',
    ]);
  });

  it('refuses the IPv4 allow-all block', () => {
    expect(refusal(['0.0.0.0/0']).message).to.contain('every address');
  });

  it('refuses the IPv6 allow-all block', () => {
    expect(refusal(['::/0']).message).to.contain('every address');
  });

  it('refuses any /0 block, even written with host bits', () => {
    expect(refusal(['1.2.3.4/0']).message).to.contain('every address');
  });

  it('refuses an IPv4-mapped block that folds to /0', () => {
    expect(refusal(['::ffff:0.0.0.0/96']).message).to.contain('every address');
  });

  it('refuses text that is not an address or block, naming it', () => {
    expect(refusal(['not-an-ip']).message).to.contain('not-an-ip');
    refusal(['192.0.2.300']);
    refusal(['192.0.2.0/33']);
    refusal(['2001:db8::/129']);
    refusal(['']);
  });

  it('refuses short and octal IPv4 forms that would silently mean another address', () => {
    expect(refusal(['10']).message).to.contain('"10"');
    refusal(['10.1']);
    refusal(['010.0.0.1']);
    refusal(['0x7f.0.0.1/32']);
  });

  it('refuses the whole list when one entry is bad', () => {
    refusal(['192.0.2.7', 'garbage']);
  });

  it(`accepts exactly ${MAX_ALLOW_LIST_ENTRIES} entries`, () => {
    expect(normalizeAllowList(distinctHosts(MAX_ALLOW_LIST_ENTRIES))).to.have.length(MAX_ALLOW_LIST_ENTRIES);
  });

  it(`refuses ${MAX_ALLOW_LIST_ENTRIES + 1} distinct entries`, () => {
    expect(refusal(distinctHosts(MAX_ALLOW_LIST_ENTRIES + 1)).message).to.contain(`at most ${MAX_ALLOW_LIST_ENTRIES}`);
  });

  it(`accepts ${MAX_ALLOW_LIST_ENTRIES + 1} entries that de-duplicate to ${MAX_ALLOW_LIST_ENTRIES}`, () => {
    const entries = [...distinctHosts(MAX_ALLOW_LIST_ENTRIES), '10.0.0.0/32'];
    expect(normalizeAllowList(entries)).to.deep.equal(normalizeAllowList(distinctHosts(MAX_ALLOW_LIST_ENTRIES)));
  });

  it('returns an empty list for an empty list', () => {
    expect(normalizeAllowList([])).to.deep.equal([]);
  });
});

describe('allowListCovers', () => {
  const ip = (text: string) => ipaddr.parse(text);

  it('lets every client through an empty list', () => {
    expect(allowListCovers([], ip('203.0.113.9'))).to.equal(true);
    expect(allowListCovers([], ip('2001:db8::9'))).to.equal(true);
  });

  it('covers an IPv4 client inside a listed block and not one outside', () => {
    const list = ['10.0.0.0/8', '192.0.2.7/32'];
    expect(allowListCovers(list, ip('10.200.3.4'))).to.equal(true);
    expect(allowListCovers(list, ip('192.0.2.7'))).to.equal(true);
    expect(allowListCovers(list, ip('192.0.2.8'))).to.equal(false);
    expect(allowListCovers(list, ip('11.0.0.1'))).to.equal(false);
  });

  it('covers an IPv6 client inside a listed block and not one outside', () => {
    const list = ['2001:db8::/32'];
    expect(allowListCovers(list, ip('2001:db8:ffff::1'))).to.equal(true);
    expect(allowListCovers(list, ip('2001:db9::1'))).to.equal(false);
  });

  it('covers a client seen as IPv4-mapped on the socket with its IPv4 entry', () => {
    const client = parseClientIp('::ffff:127.0.0.1');
    expect(client).to.not.equal(null);
    expect(client!.kind()).to.equal('ipv4');
    expect(allowListCovers(['127.0.0.1/32'], client!)).to.equal(true);
  });

  it('never matches an IPv4 entry against an IPv6 client', () => {
    expect(allowListCovers(['127.0.0.1/32', '0.0.0.0/1', '128.0.0.0/1'], ip('::1'))).to.equal(false);
    expect(allowListCovers(['1.2.3.4/32'], ip('::102:304'))).to.equal(false);
  });

  it('never matches an IPv6 entry against an IPv4 client', () => {
    expect(allowListCovers(['::/1', '8000::/1'], ip('192.0.2.1'))).to.equal(false);
  });
});

describe('allow lists that together allow everything', () => {
  for (const entries of [
    ['0.0.0.0/1', '128.0.0.0/1'],
    ['0.0.0.0/2', '64.0.0.0/2', '128.0.0.0/2', '192.0.0.0/2'],
    ['128.0.0.0/1', '0.0.0.0/2', '64.0.0.0/3', '96.0.0.0/3'],
    ['::/1', '8000::/1'],
    ['8000::/1', '::/2', '4000::/2'],
    ['10.0.0.0/8', '0.0.0.0/1', '128.0.0.0/1', '2001:db8::/32'],
  ]) {
    it(`refuses ${entries.join(' + ')}`, () => {
      expect(refusal(entries).message).to.match(/its entries together allow every IPv[46] address$/);
    });
  }

  for (const entries of [
    ['0.0.0.0/1', '128.0.0.0/2', '192.0.0.0/3', '224.0.0.0/4', '240.0.0.0/5', '248.0.0.0/6', '252.0.0.0/7', '254.0.0.0/8', '255.0.0.0/9'],
    ['0.0.0.0/1', '::/1', '8000::/2'],
    ['0.0.0.0/1', '128.0.0.1/32'],
  ]) {
    it(`accepts ${entries.slice(0, 3).join(' + ')}${entries.length > 3 ? ' …' : ''}, which leaves addresses out`, () => {
      expect(normalizeAllowList(entries)).to.have.length(entries.length);
    });
  }
});

/** The IPv6 blocks that together cover every address except those of `block` (one per prefix bit). */
function everyIpv6But(block: string): string[] {
  const [net, bits] = ipaddr.parseCIDR(block);
  const start = net.toByteArray().reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
  return Array.from({ length: bits }, (_, i) => {
    // Same first i bits as the block, the next one flipped: the sibling at prefix length i + 1.
    const sibling = ((start >> BigInt(127 - i)) ^ 1n) << BigInt(127 - i);
    const bytes = Array.from({ length: 16 }, (_, b) => Number((sibling >> BigInt(8 * (15 - b))) & 0xffn));
    return `${ipaddr.fromByteArray(bytes).toString()}/${i + 1}`;
  });
}

describe('allow lists that allow every client of a family, short of what no client can have', () => {
  it('refuses IPv6 entries covering everything but ::ffff:0:0/96, whose addresses reach us as IPv4', () => {
    const entries = everyIpv6But('::ffff:0:0/96');
    expect(entries).to.have.length(96);
    expect(allowListCovers(entries, ipaddr.parse('2001:db8::1'))).to.equal(true);
    expect(refusal(entries).message).to.match(/its entries together allow every IPv6 address$/);
  });

  it('accepts IPv6 entries that leave out any other /96', () => {
    const entries = everyIpv6But('2001:db8::/96');
    expect(normalizeAllowList(entries)).to.have.length(96);
  });

  it('refuses the IPv4 halves written as IPv4-mapped IPv6', () => {
    expect(refusal(['::ffff:0.0.0.0/97', '::ffff:128.0.0.0/97']).message).to.match(/together allow every IPv4 address$/);
  });
});
