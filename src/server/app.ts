// The Elysia application: body parsing with size caps, a cap on the request's headers, auth rate limits
// by path, the one error handler that answers {"error": ...} (503 while the store cannot be reached),
// the security headers on every response, /healthz (which asks the store), the dashboard's files, and
// the route modules. `dbm serve` and the tests both build the app through createApp, so tests exercise
// exactly what runs in production.
import http from 'node:http'
import type { ValueError } from '@sinclair/typebox/errors'
import { Elysia, type ValidationError } from 'elysia'
import { type Deps, clientAddress } from './context.ts'
import { HttpError, tooManyRequests } from './http-error.ts'
import { parseJsonBody } from './json-body.ts'
import { type RateLimitedEndpoint, authRateLimits, bodyLimits, headerLimits } from './limits.ts'
import { alertRoutes } from './routes/alerts.ts'
import { apiKeyRoutes } from './routes/api-keys.ts'
import { authRoutes } from './routes/auth.ts'
import { databaseRoutes } from './routes/databases.ts'
import { ingestRoutes } from './routes/ingest.ts'
import { clickhouseRoutes } from './routes/clickhouse.ts'
import { healthRoutes } from './routes/health.ts'
import { internalsRoutes } from './routes/internals.ts'
import { objectRoutes } from './routes/objects.ts'
import { queryRoutes } from './routes/queries.ts'
import { logStoreOutages, storeAnswers, storeUnavailable } from './store-health.ts'
import { isStoreUnreachable } from './store/availability.ts'
import { dashboardRoutes } from './web/dashboard.ts'
import { resetPasswordPage } from './web/reset-password.ts'
import { withSecurityHeaders } from './web/security-headers.ts'
import dashboard from '../web/index.html'
import { VERSION } from '../version.ts'

/** Auth endpoints counted per client address (every request, answered or not). */
const rateLimitedPaths: Record<string, RateLimitedEndpoint> = {
  '/api/v1/auth/signup': 'signup',
  '/api/v1/auth/login': 'login',
  '/api/v1/auth/refresh': 'refresh',
  '/api/v1/auth/forgot-password': 'forgot_password',
  '/api/v1/auth/reset-password': 'reset_password',
  '/api/v1/auth/resend-verification': 'resend_verification',
}

/** The path as the router matches it: repeated and trailing slashes do not make another endpoint. */
export function canonicalPath(pathname: string): string {
  return pathname.replace(/\/{2,}/g, '/').replace(/(.)\/+$/, '$1')
}

function bodyLimitFor(path: string): number {
  return path === '/api/v1/ingest' ? bodyLimits.ingest : bodyLimits.default
}

/** The request line and headers as sent, in bytes (near enough: repeated headers arrive joined). */
function headSize(request: Request): number {
  const url = request.url
  const path = url.indexOf('/', url.indexOf('://') + 3)
  let size = request.method.length + (path < 0 ? 1 : url.length - path) + ' HTTP/1.1\r\n'.length
  request.headers.forEach((value, name) => {
    size += name.length + value.length + 4
  })
  return size
}

/**
 * The error that names the field: a union's own error names the union (`tables.0.delta`), the error of
 * its member that failed deeper (`tables.0.delta.seq_scan`) names the field within it.
 */
function innermost(issue: ValueError): ValueError {
  for (const member of issue.errors ?? []) {
    const first = member.First()
    if (first && first.path.length > issue.path.length) return innermost(first)
  }
  return issue
}

/** A validation failure as one sentence naming the field. */
function validationMessage(error: ValidationError): string {
  if (typeof error.customError === 'string') return error.customError
  const issue = error.valueError && innermost(error.valueError)
  const field = (issue?.path ?? '').replace(/^\//, '').replaceAll('/', '.')
  if (issue?.message === 'Unexpected property') return `unknown field: ${field}`
  if (!field) return error.type === 'body' ? 'request body must be a JSON object' : `invalid ${error.type}`
  return `invalid ${field}: ${issue?.message ?? 'unexpected value'}`
}

export function createApp(deps: Deps) {
  const { log } = deps
  logStoreOutages(deps.store, log)
  // Whether signups are refused: DBM_SIGNUP=closed once an organization exists (which, once true, stays).
  let organizationSeen = false
  const signupClosed = async () => {
    if (deps.signup !== 'closed') return false
    organizationSeen ||= await deps.store.hasOrganization()
    return organizationSeen
  }
  // Bun answers requests past its own limits before the app sees them, with an empty body and no hook
  // to give it one: a body over maxRequestBodySize (413), and a request line and headers over Node's
  // http.maxHeaderSize, which Bun.serve reads (431). So every body reaches the app, which refuses one
  // over its route's cap in readBody (an unread body is not buffered: Bun stops reading the socket), and
  // Bun's header limit is raised above the app's, which headSize checks. The setting is process-wide.
  ;(http as { maxHeaderSize: number }).maxHeaderSize = headerLimits.parser
  // `development: false` keeps Bun's dev server (hot reload, error overlays) out of every build.
  return new Elysia({
    normalize: false,
    serve: { maxRequestBodySize: Number.MAX_SAFE_INTEGER, development: false },
  })
    .onRequest(async ({ request, server, set }) => {
      withSecurityHeaders(set.headers)
      if (headSize(request) > headerLimits.bytes) {
        throw new HttpError(431, `the request line and headers are larger than the ${headerLimits.bytes / 1024} KiB limit`)
      }
      if (request.url.includes('%00')) throw new HttpError(400, 'the URL must not contain NUL characters')
      if (request.method !== 'POST') return
      const endpoint = rateLimitedPaths[canonicalPath(new URL(request.url).pathname)]
      if (!endpoint) return
      // A closed signup is refused before the rate limit and the body's validation: the answer is the same
      // for everyone, and a visitor is not sent to wait an hour for it. (The signup's own transaction checks
      // again, for the first account's race.)
      if (endpoint === 'signup' && (await signupClosed())) throw new HttpError(403, 'signup is closed on this server')
      const { limit, windowMs } = authRateLimits[endpoint]
      const address = clientAddress(deps, request, server)
      const result = await deps.store.hitRateLimit(`rate:${endpoint}:${address}`, limit, windowMs, deps.clock())
      if (!result.allowed) throw tooManyRequests(result.retryAfterMs)
    })
    .onParse(async ({ request }) => {
      return parseJsonBody(request, bodyLimitFor(canonicalPath(new URL(request.url).pathname)))
    })
    .onError(({ code, error, set, request }) => {
      let failure: HttpError
      if (error instanceof HttpError) failure = error
      else if (code === 'PARSE' && (error as Error).cause instanceof HttpError) failure = (error as Error).cause as HttpError
      else if (code === 'PARSE') failure = new HttpError(400, 'request body must be valid JSON')
      else if (code === 'VALIDATION') failure = new HttpError(400, validationMessage(error as ValidationError))
      else if (code === 'NOT_FOUND') failure = new HttpError(404, 'not found')
      // Logged once per outage by logStoreOutages, not here for every request.
      else if (isStoreUnreachable(error)) failure = storeUnavailable()
      else {
        const e = error as Error
        log.error('unhandled error', {
          method: request.method,
          path: new URL(request.url).pathname,
          error: e?.name,
          cause: e?.message,
          sql: (e as { sql?: string })?.sql,
        })
        failure = new HttpError(500, 'internal server error')
      }
      set.status = failure.status
      Object.assign(set.headers, failure.headers)
      set.headers['content-type'] = 'application/json; charset=utf-8'
      return JSON.stringify({ error: failure.message })
    })
    .onAfterResponse(({ request, set }) => {
      if (log.enabled('debug')) {
        log.debug('request', { method: request.method, path: new URL(request.url).pathname, status: Number(set.status ?? 200) })
      }
    })
    .get('/healthz', async ({ set }) => {
      // `signup` tells the dashboard whether to offer a signup form (DBM_SIGNUP).
      // `event_loop`: how late the server's event loop ran over the last minute (loop-lag.ts).
      const loop = deps.loopLag ? { event_loop: deps.loopLag.figures() } : {}
      if (await storeAnswers(deps.store)) return { status: 'ok', version: VERSION, store: 'ok', signup: (await signupClosed()) ? 'closed' : 'open', ...loop }
      set.status = 503
      return { status: 'unavailable', version: VERSION, store: 'unavailable', ...loop }
    })
    .use(authRoutes(deps))
    .use(apiKeyRoutes(deps))
    .use(databaseRoutes(deps))
    .use(queryRoutes(deps))
    .use(objectRoutes(deps))
    .use(internalsRoutes(deps))
    .use(clickhouseRoutes(deps))
    .use(healthRoutes(deps))
    .use(alertRoutes(deps))
    .use(ingestRoutes(deps))
    .use(resetPasswordPage())
    .use(dashboardRoutes(dashboard))
}

export type App = ReturnType<typeof createApp>
