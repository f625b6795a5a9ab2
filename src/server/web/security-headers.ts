// The security headers of every response the server sends: the dashboard's page, scripts, styles and
// images, the API's JSON and its errors. The dashboard runs under a strict Content-Security-Policy: its
// script and stylesheet are files served from the same origin (no inline script or <style>; the inline
// styles it sets go through the CSSOM, which the policy does not govern), its icon is a data: URL, and it
// talks to the API and the active-sessions WebSocket on the same origin only ('self' covers ws: and wss:
// to the page's own host under CSP Level 3). The page cannot be framed, nor can it open a window that
// keeps a handle on it.

/** The Content-Security-Policy, one directive per entry. */
export const contentSecurityPolicy = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

export const securityHeaders: Readonly<Record<string, string>> = {
  'content-security-policy': contentSecurityPolicy,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
}

/** Adds the security headers to `headers` (Elysia's `set.headers`, or a plain object) and returns it. */
export function withSecurityHeaders<T extends Record<string, unknown>>(headers: T): T {
  return Object.assign(headers, securityHeaders)
}
