import ipaddr from 'ipaddr.js';

export type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/**
 * Parses a CIDR block or a bare address into canonical form: host bits masked, bare
 * addresses as /32 or /128, IPv4-mapped IPv6 (::ffff:a.b.c.d/96+) folded to IPv4.
 */
export function parseCidr(input: string): Cidr {
  const text = input.trim();
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  let bits: number;
  try {
    if (text.includes('/')) {
      [addr, bits] = ipaddr.parseCIDR(text);
    } else {
      addr = ipaddr.parse(text);
      bits = addr.kind() === 'ipv4' ? 32 : 128;
    }
  } catch {
    throw new Error(`"${input}" is not an IP address or CIDR block`);
  }
  // ipaddr.js also reads short and octal forms ("10" as 0.0.0.10): only dotted quads are meant.
  if (addr.kind() === 'ipv4' && !ipaddr.IPv4.isValidFourPartDecimal(text.split('/')[0]!)) {
    throw new Error(`"${input}" is not an IP address or CIDR block`);
  }
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    addr = (addr as ipaddr.IPv6).toIPv4Address();
    bits -= 96;
  }
  const network =
    addr.kind() === 'ipv4'
      ? ipaddr.IPv4.networkAddressFromCIDR(`${addr.toString()}/${bits}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${addr.toString()}/${bits}`);
  return [network, bits];
}

export function formatCidr([addr, bits]: Cidr): string {
  return `${addr.toString()}/${bits}`;
}

/** Parses a client address as seen on a socket; IPv4-mapped IPv6 becomes IPv4. */
export function parseClientIp(text: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  if (!text.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(text)) return null;
  try {
    return ipaddr.process(text);
  } catch {
    return null;
  }
}

export function cidrContains([net, bits]: Cidr, ip: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  if (ip.kind() !== net.kind()) return false;
  return ip.match(net, bits);
}

export function isLoopback(ip: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  return ip.range() === 'loopback';
}
