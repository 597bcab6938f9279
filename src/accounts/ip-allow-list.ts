import type ipaddr from 'ipaddr.js';
import { cidrContains, formatCidr, parseCidr, type Cidr } from '../util/cidr.ts';

export const MAX_ALLOW_LIST_ENTRIES = 100;

export class AllowListError extends Error {}

/**
 * Canonicalises an API key's allow list: CIDR or bare address (stored /32 or /128), host bits
 * masked, IPv4-mapped folded to IPv4, duplicates removed (first occurrence order kept).
 * Allow-all prefixes and more than 100 entries after de-duplication are refused.
 */
export function normalizeAllowList(entries: string[]): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const entry of entries) {
    let cidr: Cidr;
    try {
      cidr = parseCidr(entry);
    } catch (err) {
      throw new AllowListError(`ip_allow_list: ${(err as Error).message}`);
    }
    if (cidr[1] === 0) throw new AllowListError(`ip_allow_list: "${entry}" would allow every address`);
    const text = formatCidr(cidr);
    if (seen.has(text)) continue;
    seen.add(text);
    out.push(text);
  }
  if (out.length > MAX_ALLOW_LIST_ENTRIES) {
    throw new AllowListError(`ip_allow_list: at most ${MAX_ALLOW_LIST_ENTRIES} entries are allowed, got ${out.length}`);
  }
  for (const family of ['ipv4', 'ipv6'] as const) {
    if (
      coversFamily(
        out.map(parseCidr).filter(([addr]) => addr.kind() === family),
        family,
      )
    ) {
      throw new AllowListError(`ip_allow_list: its entries together allow every ${family === 'ipv4' ? 'IPv4' : 'IPv6'} address`);
    }
  }
  return out;
}

/**
 * IPv4-mapped IPv6 (::ffff:0:0/96): no IPv6 client ever has such an address, as a mapped peer is
 * matched as IPv4. An IPv6 list that leaves out only this block still allows every IPv6 client.
 */
const IPV4_MAPPED = { start: 0xffffn << 32n, end: (0xffffn << 32n) + (1n << 32n) - 1n };

/** Whether the blocks (all of `family`) together cover every address a client can have, as a /0 would. */
function coversFamily(blocks: Cidr[], family: 'ipv4' | 'ipv6'): boolean {
  const width = family === 'ipv4' ? 32n : 128n;
  const ranges = blocks
    .map(([addr, bits]) => {
      const start = addr.toByteArray().reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
      return { start, end: start + (1n << (width - BigInt(bits))) - 1n };
    })
    .concat(family === 'ipv6' ? [IPV4_MAPPED] : [])
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  // Walk the sorted blocks: a gap before one of them, or an end short of the top, leaves addresses out.
  let next = 0n;
  for (const { start, end } of ranges) {
    if (start > next) return false;
    if (end + 1n > next) next = end + 1n;
  }
  return next === 1n << width;
}

/** An empty list allows everyone; otherwise the client must fall in one of the blocks. */
export function allowListCovers(list: string[], client: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  if (list.length === 0) return true;
  return list.some((entry) => cidrContains(parseCidr(entry), client));
}
