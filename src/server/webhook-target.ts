// Where an organization's webhook may point, and where its deliveries connect. Unless the server sets
// DBM_WEBHOOK_ALLOW_PRIVATE=true, webhooks never reach the server's own network: loopback, private,
// link-local, unique-local, multicast and other non-public addresses are refused when the URL is set
// (PUT /organization/webhook) and again when a delivery is sent, after resolving the name. A delivery
// connects to the address it checked (the URL's host replaced by it, the Host header and TLS server name
// kept from the URL), so a name whose DNS answer changes between the check and the connection (DNS
// rebinding) cannot redirect it. Encoded hosts (2130706433, 0x7f.1, 127.1, [::ffff:127.0.0.1]) are
// normalised by the WHATWG URL parser before they are judged.
import { lookup } from 'node:dns/promises'
import { isIPv4, isIPv6 } from 'node:net'

/** The addresses a host name resolves to (IPv4 and IPv6, as text). */
export type Resolver = (hostname: string) => Promise<string[]>

export interface WebhookPolicy {
  /** DBM_WEBHOOK_ALLOW_PRIVATE: internal addresses are allowed too. */
  allowPrivate: boolean
  /** Name resolution; the system's (getaddrinfo, /etc/hosts included) unless a test injects one. */
  resolve?: Resolver
  /** Certificates trusted instead of the system's for https receivers: tests only (not a setting). */
  ca?: string
}

export const strictPolicy: WebhookPolicy = { allowPrivate: false }

/** The hint every refusal ends with. */
export const ALLOW_PRIVATE_HINT = 'set DBM_WEBHOOK_ALLOW_PRIVATE=true on the server to allow internal receivers'

export const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address)

/** A URL refused as a webhook; the message is the API's 400 answer. */
export class WebhookUrlError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'WebhookUrlError'
  }
}

// ---- addresses ----

/** IPv4 ranges that are not public, most specific first where they overlap. */
const ipv4Ranges: [base: string, bits: number, what: string][] = [
  ['255.255.255.255', 32, 'broadcast'],
  ['0.0.0.0', 8, 'unspecified ("this network")'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared address space (carrier-grade NAT)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved (IETF protocol assignments)'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved (benchmarking)'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
]

function ipv4Number(address: string): number {
  return address.split('.').reduce((n, part) => n * 256 + Number(part), 0)
}

const ipv4Table = ipv4Ranges.map(([base, bits, what]) => ({ base: ipv4Number(base), size: 2 ** (32 - bits), what }))

function ipv4Kind(n: number): string | null {
  for (const range of ipv4Table) if (n >= range.base && n < range.base + range.size) return range.what
  return null
}

const dotted = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.')

/** The eight 16-bit groups of an IPv6 address (a trailing dotted IPv4 part allowed), or null. */
export function ipv6Groups(address: string): number[] | null {
  if (!isIPv6(address)) return null
  let text = address.toLowerCase()
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (v4) {
    const n = ipv4Number(v4[1]!)
    text = `${text.slice(0, v4.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`
  }
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)))
  const halves = text.split('::')
  const head = parse(halves[0]!)
  const rest = halves.length === 2 ? parse(halves[1]!) : null
  const groups =
    rest === null ? head : [...head, ...new Array(Math.max(0, 8 - head.length - rest.length)).fill(0), ...rest]
  return groups.length === 8 ? groups : null
}

/** The IPv4 address an IPv6 address carries in the forms that reach it, or null. */
function embeddedIPv4(g: number[]): number | null {
  const low32 = (g[6]! * 0x10000 + g[7]!) >>> 0
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  if (zeros(0, 5) && g[5] === 0xffff) return low32 // ::ffff:a.b.c.d, IPv4-mapped
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return low32 // ::ffff:0:a.b.c.d, IPv4-translated
  if (zeros(0, 6)) return low32 // ::a.b.c.d, IPv4-compatible (:: and ::1 are judged before)
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return low32 // 64:ff9b::a.b.c.d, NAT64
  if (g[0] === 0x2002) return (g[1]! * 0x10000 + g[2]!) >>> 0 // 2002:AABB:CCDD::, 6to4
  return null
}

function ipv6Kind(g: number[]): string | null {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  if (zeros(0, 8)) return 'unspecified'
  if (zeros(0, 7) && g[7] === 1) return 'loopback'
  const v4 = embeddedIPv4(g)
  if (v4 !== null) {
    const kind = ipv4Kind(v4)
    return kind === null ? null : `${kind} (IPv4 ${dotted(v4)})`
  }
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'reserved (local-use NAT64)'
  if ((g[0]! & 0xfe00) === 0xfc00) return 'unique-local'
  if ((g[0]! & 0xffc0) === 0xfe80) return 'link-local'
  if ((g[0]! & 0xffc0) === 0xfec0) return 'site-local'
  if ((g[0]! & 0xff00) === 0xff00) return 'multicast'
  if ((g[0]! & 0xe000) !== 0x2000) return 'reserved' // outside global unicast 2000::/3
  return null
}

/**
 * What makes an IP address internal ("loopback", "private", "link-local", ...), or null for a public
 * one. IPv6 forms that carry an IPv4 address (::ffff:a.b.c.d, ::a.b.c.d, 64:ff9b::a.b.c.d, 6to4) are
 * judged by it. Text that is not an IP address is "not an IP address".
 */
export function internalKind(address: string): string | null {
  const bare = address.replace(/^\[(.*)\]$/, '$1')
  if (isIPv4(bare)) return ipv4Kind(ipv4Number(bare))
  const groups = ipv6Groups(bare)
  return groups ? ipv6Kind(groups) : 'not an IP address'
}

// ---- URLs ----

/** An http(s) URL without credentials, as the WHATWG parser normalises it; else a WebhookUrlError. */
export function parseWebhookUrl(value: string): URL {
  let url: URL
  try {
    url = new URL(value.trim())
  } catch {
    throw new WebhookUrlError('url must be an http:// or https:// URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new WebhookUrlError('url must be an http:// or https:// URL')
  if (url.username || url.password) throw new WebhookUrlError('url must not contain a user name or password')
  if (url.hostname === '') throw new WebhookUrlError('url must be an http:// or https:// URL')
  return url
}

/** The URL's host without IPv6 brackets, and whether it is an IP address (no lookup then). */
function hostOf(url: URL): { host: string; literal: boolean } {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  return { host, literal: isIPv4(host) || isIPv6(host) }
}

/** True when a URL's host is a name the server would resolve (not an IP address, nor a URL that does not parse). */
export function namesAHost(value: string): boolean {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return false
  }
  return !hostOf(url).literal
}

/**
 * Why an address is refused. A name's message leaves out the address it resolved to (and an embedded
 * IPv4 address): the server's resolver may know internal names that the organization should not learn.
 */
function refusal(host: string, literal: boolean, address: string, kind: string): string {
  return literal
    ? `address ${address} is ${kind}`
    : `${host} resolves to an internal address (${kind.replace(/ \(IPv4 [^)]*\)$/, '')})`
}

/** Resolves within `timeoutMs` (getaddrinfo itself has no deadline). */
async function resolveWithin(resolve: Resolver, host: string, timeoutMs: number): Promise<string[]> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('timed out'), { code: 'ETIMEOUT' })), timeoutMs)
  })
  try {
    return await Promise.race([resolve(host), deadline])
  } finally {
    clearTimeout(timer)
  }
}

/** How long a PUT waits for the name to resolve. */
const PUT_LOOKUP_TIMEOUT_MS = 5_000

/**
 * Checks a webhook URL being set: its form, and unless internal receivers are allowed, its address, or
 * every address its name resolves to. A name that does not resolve (yet) is accepted: each delivery
 * resolves it again, and one that fails is recorded as the webhook's last error. Returns the URL as
 * stored; throws a WebhookUrlError whose message is the 400 answer.
 */
export async function checkWebhookUrl(value: string, policy: WebhookPolicy): Promise<string> {
  const url = parseWebhookUrl(value)
  if (policy.allowPrivate) return url.toString()
  const { host, literal } = hostOf(url)
  let addresses: string[]
  try {
    addresses = literal ? [host] : await resolveWithin(policy.resolve ?? systemResolver, host, PUT_LOOKUP_TIMEOUT_MS)
  } catch {
    return url.toString()
  }
  for (const address of addresses) {
    const kind = internalKind(address)
    if (kind !== null) throw new WebhookUrlError(`url: ${refusal(host, literal, address, kind)}; ${ALLOW_PRIVATE_HINT}`)
  }
  return url.toString()
}

/** Where one delivery attempt connects: the URL with its host replaced by a checked address. */
export interface PinnedTarget {
  /** The address connected to. */
  address: string
  /** The URL to fetch: the webhook's, with the checked address as its host. */
  url: string
  /** The Host header: the webhook URL's host (and port, when not the default). */
  host: string
  /** The TLS server name (SNI and certificate check) for https to a name; undefined otherwise. */
  serverName?: string
}

export type DeliveryTargets = { ok: true; targets: PinnedTarget[] } | { ok: false; error: string }

/**
 * The addresses one delivery may connect to, in the resolver's order, each checked; or why the
 * delivery is not sent (the name does not resolve, or resolves to an internal address while those are
 * refused: one internal address refuses the delivery, as at PUT).
 */
export async function deliveryTargets(
  webhookUrl: string,
  policy: WebhookPolicy,
  timeoutMs: number,
): Promise<DeliveryTargets> {
  let url: URL
  try {
    url = parseWebhookUrl(webhookUrl)
  } catch (e) {
    return { ok: false, error: (e as Error).message }
  }
  const { host, literal } = hostOf(url)
  let addresses: string[]
  if (literal) addresses = [host]
  else {
    try {
      addresses = await resolveWithin(policy.resolve ?? systemResolver, host, timeoutMs)
    } catch (e) {
      const code = (e as { code?: string })?.code
      return { ok: false, error: `cannot resolve ${host}${code ? ` (${code})` : ''}` }
    }
    if (addresses.length === 0) return { ok: false, error: `cannot resolve ${host} (no addresses)` }
  }
  const targets: PinnedTarget[] = []
  for (const address of addresses) {
    const kind = internalKind(address)
    if (kind === 'not an IP address')
      return { ok: false, error: `cannot resolve ${host} (not an IP address: ${address.slice(0, 60)})` }
    if (kind !== null && !policy.allowPrivate)
      return { ok: false, error: `${refusal(host, literal, address, kind)}; ${ALLOW_PRIVATE_HINT}` }
    const pinned = new URL(url)
    pinned.hostname = isIPv6(address) ? `[${address}]` : address
    targets.push({
      address,
      url: pinned.toString(),
      host: url.host,
      serverName: url.protocol === 'https:' && !literal ? host : undefined,
    })
  }
  return { ok: true, targets }
}
