// One POST of JSON to a receiver outside the server, as every alert delivery makes it (the signed
// webhook and the destinations: Slack, Teams, PagerDuty, Opsgenie, Alertmanager). The URL's name is
// resolved once and every address checked against the server's policy (webhook-target.ts: no internal
// addresses unless DBM_WEBHOOK_ALLOW_PRIVATE); the POST then connects to a checked address, in the
// resolver's order, the next one only when the previous refused the connection. Redirects are not
// followed; the whole delivery has one deadline. A failure's cause never carries the URL's path or
// query (they may hold a token): only its origin.
import { type WebhookPolicy, deliveryTargets, strictPolicy } from '../webhook-target.ts'
import { VERSION } from '../../version.ts'

/** The outcome of one POST: `error` is null on a 2xx answer. */
export interface PostAttempt {
  status: number | null
  error: string | null
  duration_ms: number
}

export interface PostOptions {
  /** For the whole delivery: name resolution and the POST. */
  timeoutMs: number
  /** Which addresses are allowed, and how names resolve (deps.webhooks). */
  policy?: WebhookPolicy
}

/** Where a delivery goes, for logs: the origin only (paths and query strings may carry tokens). */
export function targetOrigin(url: string): string {
  try {
    return new URL(url).origin
  } catch {
    return '(invalid url)'
  }
}

/** A failed delivery's cause without the URL (whose path or query may carry a token). */
function failureCause(e: unknown, urls: string[], timeoutMs: number): string {
  const error = e as Error
  if (error?.name === 'TimeoutError' || error?.name === 'AbortError') return `no answer within ${timeoutMs / 1000} s`
  let text = String(error?.message ?? e)
  for (const url of urls) text = text.replaceAll(url, targetOrigin(url))
  return text.replace(/https?:\/\/[^\s"'<>]+/g, (found) => targetOrigin(found)).slice(0, 300)
}

/** Errors that mean no connection was made (nothing was sent): the next checked address may be tried. */
const NOT_CONNECTED = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'ConnectionRefused',
  'FailedToOpenSocket',
])

/** POSTs `body` (JSON text) to `url` with `headers` added to dbm's own (content type, user agent). */
export async function postJson(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: PostOptions,
): Promise<PostAttempt> {
  const { timeoutMs } = options
  const policy = options.policy ?? strictPolicy
  const started = performance.now()
  const done = (status: number | null, error: string | null): PostAttempt => ({
    status,
    error,
    duration_ms: Math.round(performance.now() - started),
  })
  const checked = await deliveryTargets(url, policy, timeoutMs)
  if (!checked.ok) return done(null, checked.error)
  const signal = AbortSignal.timeout(Math.max(1, timeoutMs - (performance.now() - started)))
  for (const [i, target] of checked.targets.entries()) {
    try {
      const res = await fetch(target.url, {
        method: 'POST',
        body,
        redirect: 'manual',
        signal,
        ...(target.serverName !== undefined || policy.ca !== undefined
          ? { tls: { serverName: target.serverName, ca: policy.ca } }
          : {}),
        headers: { host: target.host, 'content-type': 'application/json', 'user-agent': `dbm/${VERSION}`, ...headers },
      })
      await res.body?.cancel().catch(() => {})
      if (res.status >= 200 && res.status < 300) return done(res.status, null)
      return done(
        res.status,
        res.status >= 300 && res.status < 400
          ? `HTTP ${res.status} (redirects are not followed)`
          : `HTTP ${res.status}`,
      )
    } catch (e) {
      const code = (e as { code?: string })?.code
      if (code !== undefined && NOT_CONNECTED.has(code) && i + 1 < checked.targets.length) continue
      return done(null, failureCause(e, [url, target.url], timeoutMs))
    }
  }
  return done(null, 'no address to connect to')
}
