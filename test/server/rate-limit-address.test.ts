// The rate limits' subject of a client address (src/server/rate-limit-address.ts): one IPv6 /64 is one
// subject whatever form its addresses come in, IPv4-mapped IPv6 is its IPv4 address, and the socket's
// address and a trusted proxy's X-Forwarded-For entry go through the same rule.
import { describe, expect, test } from 'bun:test'
import { clientAddress } from '../../src/server/context.ts'
import { rateLimitSubject } from '../../src/server/rate-limit-address.ts'

describe('rateLimitSubject', () => {
  test('every form of addresses in one /64 is one subject', () => {
    const forms = [
      '2001:db8:0:1::1',
      '2001:0db8:0000:0001:0000:0000:0000:0001',
      '2001:DB8:0:1::1',
      '2001:db8:0:1:ffff:ffff:ffff:ffff',
      '2001:db8::1:abcd:0:0:7',
      ' 2001:db8:0:1::9 ',
      '[2001:db8:0:1::1]',
      '[2001:db8:0:1::1]:443',
      '2001:db8:0:1::1%eth0',
      '[2001:db8:0:1::1%25eth0]:8080',
      '2001:db8:0:1::1.2.3.4',
    ]
    for (const form of forms)
      expect({ form, subject: rateLimitSubject(form) }).toEqual({ form, subject: '2001:db8:0:1::/64' })
  })

  test('other /64s are other subjects', () => {
    const subjects = ['2001:db8:0:1::1', '2001:db8:0:2::1', '2001:db8:1:1::1', '2001:db9:0:1::1', 'fe80::1', '::1'].map(
      rateLimitSubject,
    )
    expect(new Set(subjects).size).toBe(subjects.length)
    expect(rateLimitSubject('fe80::1%lo')).toBe('fe80:0:0:0::/64')
    expect(rateLimitSubject('::1')).toBe('0:0:0:0::/64')
  })

  test('IPv4 stays the address; IPv4-mapped IPv6 counts as the IPv4 address', () => {
    expect(rateLimitSubject('192.0.2.7')).toBe('192.0.2.7')
    expect(rateLimitSubject('192.0.2.7:5555')).toBe('192.0.2.7')
    expect(rateLimitSubject('::ffff:192.0.2.7')).toBe('192.0.2.7')
    expect(rateLimitSubject('::FFFF:C000:0207')).toBe('192.0.2.7')
    expect(rateLimitSubject('0:0:0:0:0:ffff:192.0.2.7')).toBe('192.0.2.7')
    expect(rateLimitSubject('[::ffff:192.0.2.7]:80')).toBe('192.0.2.7')
    // Not the mapped form: an IPv6 /64 like any other (::/64), not the IPv4 address.
    expect(rateLimitSubject('::192.0.2.7')).toBe('0:0:0:0::/64')
    expect(rateLimitSubject('192.0.2.8')).not.toBe(rateLimitSubject('192.0.2.7'))
  })

  test('text that is not an address is its own subject', () => {
    for (const text of ['unknown', 'not-an-ip', '2001:db8::1::2', '1.2.3.4.5', '', '"><script>'])
      expect(rateLimitSubject(text)).toBe(text)
  })

  test("the socket address and a trusted proxy's entry go through the same rule; clientAddress keeps the full address", () => {
    const request = (forwarded?: string) =>
      new Request('http://dbm.test/api/v1/auth/login', { headers: forwarded ? { 'x-forwarded-for': forwarded } : {} })
    const socket = (address: string) => ({ requestIP: () => ({ address }) })
    const direct = clientAddress({ trustProxy: false }, request('198.51.100.1'), socket('2001:db8:0:1::42'))
    expect(direct).toBe('2001:db8:0:1::42')
    expect(rateLimitSubject(direct)).toBe('2001:db8:0:1::/64')
    expect(rateLimitSubject(clientAddress({ trustProxy: false }, request(), socket('::ffff:203.0.113.5')))).toBe(
      '203.0.113.5',
    )
    const proxied = clientAddress({ trustProxy: true }, request('192.0.2.1, 2001:DB8:0:1:0:0:0:42'), socket('10.0.0.1'))
    expect(proxied).toBe('2001:DB8:0:1:0:0:0:42')
    expect(rateLimitSubject(proxied)).toBe('2001:db8:0:1::/64')
  })
})
