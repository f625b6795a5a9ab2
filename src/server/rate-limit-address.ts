// Whose budget a request spends under the per-address rate limits: the client's IPv4 address, or the /64
// of its IPv6 address. One IPv6 subscriber is routinely given a whole /64 (2^64 addresses), so counting
// per full address would give each of them that many budgets. Forms that name one address count as one:
// compressed and expanded, upper and lower case, with a zone id or brackets or a port, and IPv4-mapped
// IPv6 (::ffff:a.b.c.d, what a dual-stack socket reports for an IPv4 client) counts as the IPv4 address.
// Only the limit's key is shortened; wherever an address is shown or logged it stays the full one.
import { isIPv4 } from 'node:net'
import { ipv6Groups } from './webhook-target.ts'

/** The address without brackets, a port after them or after an IPv4 address, or a zone id. */
function bareAddress(text: string): string {
  let address = text.trim()
  const bracketed = /^\[([^\]]*)\](?::\d+)?$/.exec(address)
  if (bracketed) address = bracketed[1]!
  else {
    const v4WithPort = /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(address)
    if (v4WithPort) address = v4WithPort[1]!
  }
  const zone = address.indexOf('%')
  return zone < 0 ? address : address.slice(0, zone)
}

/**
 * The rate-limit subject of a client address: an IPv4 address as it is, an IPv6 address as its /64 in
 * one canonical form (`2001:db8:0:1::/64`), an IPv4-mapped one as its IPv4 address. Text that is not an
 * IP address (`unknown`, a proxy's odd header) is its own subject, as before.
 */
export function rateLimitSubject(address: string): string {
  const bare = bareAddress(address)
  if (isIPv4(bare)) return bare
  const groups = ipv6Groups(bare)
  if (!groups) return address
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 255, groups[7]! >> 8, groups[7]! & 255].join('.')
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`
}
