/**
 * IP addresses as the gateway meets them: CIDRs from the config (`trusted_proxies`) and peer addresses as
 * uWebSockets.js gives them (IPv6 text in full, an IPv4 peer as an IPv4-mapped IPv6 address:
 * `0000:0000:0000:0000:0000:ffff:7f00:0001` for 127.0.0.1). node:net does the parsing and the matching.
 */
import { BlockList, isIP } from 'node:net';

export interface Cidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** "10.0.0.0/8", "fd00::/8", or a bare address (a /32 or /128); null when it is neither. */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const v = isIP(address);
  if (v === 0) return null;
  const max = v === 4 ? 32 : 128;
  const prefixText = slash < 0 ? String(max) : text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = Number(prefixText);
  if (prefix > max) return null;
  return { address, prefix, family: v === 4 ? 'ipv4' : 'ipv6' };
}

/** Whether an address (as normalizePeer gives it) lies in one of the CIDRs; an empty list matches nothing. */
export function addressMatcher(cidrs: readonly string[]): (address: string) => boolean {
  if (cidrs.length === 0) return () => false;
  const list = new BlockList();
  for (const text of cidrs) {
    const c = parseCidr(text);
    if (!c) throw new Error(`not an IP address or CIDR: ${text}`);
    list.addSubnet(c.address, c.prefix, c.family);
  }
  return (address) => {
    const v = isIP(address);
    if (v === 0) return false;
    return list.check(address, v === 4 ? 'ipv4' : 'ipv6');
  };
}

const MAPPED_V4 = /^(?:0{1,4}:){5}ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i;

/**
 * A peer address in its usual text form: an IPv4-mapped IPv6 address as plain IPv4, any other IPv6
 * address compressed (RFC 5952: lower case, no leading zeros, the longest run of zero groups as "::").
 */
export function normalizePeer(text: string): string {
  const m = MAPPED_V4.exec(text);
  if (m) {
    const hi = parseInt(m[1], 16);
    const lo = parseInt(m[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  if (!text.includes(':')) return text;
  const groups = text.toLowerCase().split(':');
  if (groups.length !== 8) return text.toLowerCase(); // already compressed, or not an address we know
  const short = groups.map((g) => g.replace(/^0+(?=.)/, ''));
  let bestAt = -1;
  let bestLen = 1; // a single zero group is not compressed
  for (let i = 0; i < 8; ) {
    if (short[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && short[j] === '0') j++;
    if (j - i > bestLen) {
      bestAt = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (bestAt < 0) return short.join(':');
  return `${short.slice(0, bestAt).join(':')}::${short.slice(bestAt + bestLen).join(':')}`;
}
