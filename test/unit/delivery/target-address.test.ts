import { expect } from 'chai';
import { refusedAddress } from '../../../src/delivery/target-address.ts';
import { parseCidr } from '../../../src/util/cidr.ts';

describe('HTTP target addresses', () => {
  const refused: Array<[string, string]> = [
    ['127.0.0.1', 'a loopback address'],
    ['127.9.9.9', 'a loopback address'],
    ['::1', 'a loopback address'],
    ['::ffff:127.0.0.1', 'a loopback address'],
    ['::ffff:10.0.0.1', 'a private address'],
    ['10.0.0.1', 'a private address'],
    ['172.31.255.255', 'a private address'],
    ['192.168.1.1', 'a private address'],
    ['fd12:3456::1', 'a private (unique local) address'],
    ['169.254.169.254', 'a link-local address'],
    ['fe80::1%eth0', 'a link-local address'],
    ['100.64.0.1', 'a carrier-grade NAT (CGNAT) address'],
    ['224.0.0.251', 'a multicast address'],
    ['ff02::1', 'a multicast address'],
    ['0.0.0.0', 'an unspecified address'],
    ['::', 'an unspecified address'],
    ['255.255.255.255', 'a broadcast address'],
    ['64:ff9b::7f00:1', 'a special-purpose address (rfc6052)'],
    ['::7f00:1', 'a deprecated IPv4-compatible IPv6 address'],
    ['2002:7f00:1::', 'a special-purpose address (6to4)'],
  ];

  for (const [address, why] of refused) {
    it(`refuses ${address} as ${why}`, () => {
      expect(refusedAddress(address, [])).to.equal(why);
    });
  }

  it('allows public unicast addresses', () => {
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(refusedAddress(address, []), address).to.equal(null);
    }
  });

  it('allows what an allowed network contains, IPv4-mapped forms included, and nothing more', () => {
    const allow = ['127.0.0.0/8', '10.20.0.0/16', 'fd00::/8'].map(parseCidr);
    for (const address of ['127.0.0.1', '::ffff:127.0.0.1', '10.20.1.2', 'fd00::5']) expect(refusedAddress(address, allow), address).to.equal(null);
    for (const address of ['10.21.0.1', '::1', '169.254.169.254']) expect(refusedAddress(address, allow), address).to.not.equal(null);
  });

  it('refuses what is not an address', () => {
    expect(refusedAddress('example.com', [])).to.equal('not an IP address');
  });
});
