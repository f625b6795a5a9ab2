// Where `dbm local` listens and under which name. Each run takes a random name under `.localhost`
// (dbm-<26 base32 characters>.localhost), which Chromium, Firefox and curl resolve to 127.0.0.1 and ::1
// without asking DNS; the printed links use it, so the session cookies (host-only) are the name's alone:
// a browser does not send them to another server on 127.0.0.1 or localhost, whatever its port, nor to a
// later run. The port is bound on both addresses the name resolves to, so that no other user can hold
// one of them and receive the browser's request; a machine without IPv6 loopback has 127.0.0.1 alone
// (nobody can bind ::1 there either). Requests must name the run's host (or the loopback address and
// port, which the in-process agent uses): anything else, another site's name rebound to 127.0.0.1, gets
// 421 with an error body.
import type { Server } from 'bun'
import { securityHeaders } from '../server/web/security-headers.ts'

export class ListenError extends Error {}

/** A new random host name under .localhost: 130 random bits in lower-case base32. */
export function randomHostName(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567'
  const bytes = crypto.getRandomValues(new Uint8Array(26))
  return `dbm-${Array.from(bytes, (b) => alphabet[b & 31]).join('')}.localhost`
}

/** Errors that say the machine has no IPv6 loopback. */
const NO_IPV6 = new Set(['EADDRNOTAVAIL', 'EAFNOSUPPORT'])
const codeOf = (e: unknown) => (e as { code?: string }).code

/** How many ports the OS may hand out before one is found free on both addresses. */
export const PORT_ATTEMPTS = 20

/**
 * Binds `port` on 127.0.0.1 and ::1 with `open`. Port 0: the OS picks one on 127.0.0.1, then ::1 is bound
 * on the same; if another process holds that one, both are given up and another port is tried (at most
 * PORT_ATTEMPTS). A given port held on either address is a ListenError: nothing is printed for an
 * address this process does not hold.
 */
export function listenLoopback(
  open: (hostname: string, port: number) => Server<unknown>,
  port: number,
): Server<unknown>[] {
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    let v4: Server<unknown>
    try {
      v4 = open('127.0.0.1', port)
    } catch (e) {
      throw new ListenError(
        `cannot listen on 127.0.0.1:${port}: ${inUse(e) ? 'another process holds it; stop it, or pick another port (--listen)' : (e as Error).message}`,
      )
    }
    try {
      return [v4, open('::1', v4.port!)]
    } catch (e) {
      if (NO_IPV6.has(codeOf(e) ?? '')) return [v4]
      void v4.stop(true)
      if (port !== 0 || !inUse(e)) {
        throw new ListenError(
          `cannot listen on [::1]:${v4.port}: ${inUse(e) ? 'another process holds it (the printed name resolves to ::1 as well as 127.0.0.1); stop it, or pick another port (--listen)' : (e as Error).message}`,
        )
      }
    }
  }
  throw new ListenError(`cannot listen: no port free on both 127.0.0.1 and ::1 in ${PORT_ATTEMPTS} attempts`)
}

function inUse(e: unknown): boolean {
  return codeOf(e) === 'EADDRINUSE'
}

const WRONG_ADDRESS = 'this dbm local answers only at the address it printed; open the Dashboard line of its output'
const WRONG_ADDRESS_PAGE =
  '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>dbm local: open the printed address</title></head><body>' +
  '<h1>Open the address dbm local printed</h1><p>This dbm local answers only at the address it printed in its terminal ' +
  '(the Dashboard line, a name ending in .localhost), which keeps your session from other servers on this machine.</p></body></html>\n'

/**
 * The Host check: undefined for a request to `name:port`, 127.0.0.1:port or [::1]:port, else the 421
 * answer. (A browser sends the host as the URL names it, lower-cased.)
 */
export function hostScreen(name: string, port: () => number): (request: Request) => Response | undefined {
  return (request) => {
    const host = request.headers.get('host')?.toLowerCase()
    const p = port()
    if (host === `${name}:${p}` || host === `127.0.0.1:${p}` || host === `[::1]:${p}`) return undefined
    // Never the name: it is the run's secret (cookies do not tell ports apart, so whoever knows it can send the
    // owner's browser to their own port and receive the session), and a stranger asking without it learns nothing.
    const headers = { ...securityHeaders, 'cache-control': 'no-store' }
    // A browser (http://localhost:PORT/ typed by hand) gets a page saying the same, an API client the error body.
    if (request.headers.get('accept')?.includes('text/html')) {
      return new Response(WRONG_ADDRESS_PAGE, {
        status: 421,
        headers: { ...headers, 'content-type': 'text/html; charset=utf-8' },
      })
    }
    return Response.json({ error: WRONG_ADDRESS }, { status: 421, headers })
  }
}

/** True when the request came by the run's name (not a bare loopback address): sign-in sets cookies only there. */
export function byName(request: Request, name: string): boolean {
  return request.headers.get('host')?.toLowerCase().startsWith(`${name}:`) ?? false
}
