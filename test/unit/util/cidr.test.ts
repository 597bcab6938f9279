import { expect } from 'chai';
import ipaddr from 'ipaddr.js';
import { cidrContains, formatCidr, isLoopback, parseCidr, parseClientIp } from '../../../src/util/cidr.ts';

describe('parseCidr', () => {
  it('gives a bare address the full prefix length of its family', () => {
    expect(formatCidr(parseCidr('198.51.100.1'))).to.equal('198.51.100.1/32');
    expect(formatCidr(parseCidr('::1'))).to.equal('::1/128');
  });

  it('masks host bits', () => {
    expect(formatCidr(parseCidr('198.51.100.77/24'))).to.equal('198.51.100.0/24');
    expect(formatCidr(parseCidr('2001:db8::77/64'))).to.equal('2001:db8::/64');
  });

  it('folds IPv4-mapped IPv6 of prefix 96 or longer to IPv4', () => {
    const [addr, bits] = parseCidr('::ffff:198.51.100.0/120');
    expect(addr.kind()).to.equal('ipv4');
    expect(bits).to.equal(24);
  });

  it('keeps an IPv4-mapped prefix shorter than 96 as IPv6', () => {
    expect(formatCidr(parseCidr('::ffff:1.2.3.4/64'))).to.equal('::/64');
  });

  it('throws an error naming the input for text that is not an address', () => {
    expect(() => parseCidr('nope')).to.throw('"nope" is not an IP address or CIDR block');
    expect(() => parseCidr('10.0.0.0/40')).to.throw('is not an IP address or CIDR block');
  });
});

describe('parseClientIp', () => {
  it('turns an IPv4-mapped socket address into IPv4', () => {
    expect(parseClientIp('::ffff:203.0.113.5')?.toString()).to.equal('203.0.113.5');
  });

  it('keeps a plain IPv6 address IPv6', () => {
    expect(parseClientIp('2001:db8::5')?.kind()).to.equal('ipv6');
  });

  it('returns null for text that is not an address', () => {
    expect(parseClientIp('localhost')).to.equal(null);
  });
});

describe('cidrContains', () => {
  it('matches addresses inside the block and not outside', () => {
    const block = parseCidr('192.0.2.0/25');
    expect(cidrContains(block, ipaddr.parse('192.0.2.127'))).to.equal(true);
    expect(cidrContains(block, ipaddr.parse('192.0.2.128'))).to.equal(false);
  });

  it('never matches across address families', () => {
    expect(cidrContains(parseCidr('::/1'), ipaddr.parse('1.2.3.4'))).to.equal(false);
    expect(cidrContains(parseCidr('0.0.0.0/1'), ipaddr.parse('::1'))).to.equal(false);
  });
});

describe('isLoopback', () => {
  it('recognises IPv4 and IPv6 loopback and nothing else', () => {
    expect(isLoopback(ipaddr.parse('127.0.0.1'))).to.equal(true);
    expect(isLoopback(ipaddr.parse('127.8.9.10'))).to.equal(true);
    expect(isLoopback(ipaddr.parse('::1'))).to.equal(true);
    expect(isLoopback(ipaddr.parse('10.0.0.1'))).to.equal(false);
  });
});
