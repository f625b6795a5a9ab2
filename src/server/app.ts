// The Elysia application: body parsing with size caps, auth rate limits by path, the one error
// handler that answers {"error": ...} (503 while the store cannot be reached), /healthz (which asks the
// store), and the route modules. `dbm serve` and the tests both build the app through createApp, so
// tests exercise exactly what runs in production.
import type { ValueError } from '@sinclair/typebox/errors'
import { Elysia, type ValidationError } from 'elysia'
import { type Deps, clientAddress } from './context.ts'
import { HttpError, tooManyRequests } from './http-error.ts'
import { type RateLimitedEndpoint, authRateLimits, bodyLimits } from './limits.ts'
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
import { resetPasswordPage } from './web/reset-password.ts'
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

/** Deepest JSON nesting accepted; deeper documents are refused before validation (they would stall it). */
const MAX_JSON_DEPTH = 200

/**
 * True when a parsed JSON value nests deeper than `max` levels (an object or array is one level). The
 * walk stops at that depth, so a hostile document costs no more than a legitimate one of its size; the
 * parse before it is linear in the text however deep (a scan of the text for brackets cost the ingest
 * more than parsing it).
 */
function deeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return false
  if (max === 0) return true
  if (Array.isArray(value)) {
    for (const v of value) if (v !== null && typeof v === 'object' && deeperThan(v, max - 1)) return true
    return false
  }
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key]
    if (v !== null && typeof v === 'object' && deeperThan(v, max - 1)) return true
  }
  return false
}

/** True when any string (key or value) in the parsed document holds a NUL character. */
function holdsNul(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return value.includes('\0')
  if (depth > MAX_JSON_DEPTH || value === null || typeof value !== 'object') return false
  for (const [k, v] of Object.entries(value)) if (k.includes('\0') || holdsNul(v, depth + 1)) return true
  return false
}

function bodyLimitFor(path: string): number {
  return path === '/api/v1/ingest' ? bodyLimits.ingest : bodyLimits.default
}

function tooLarge(limit: number) {
  return new HttpError(413, `request body is larger than the ${Math.round(limit / 1024)} KiB limit`)
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
  // Bun itself refuses bodies over maxRequestBodySize with an empty 413; ours answer in JSON below that.
  // The dashboard is Bun's HTML bundle: built into the executable by `bun build --compile` (from source,
  // bundled at the first request), served from memory at `/`; `development: false` keeps Bun's dev
  // server (hot reload, error overlays) out of every build.
  return new Elysia({
    normalize: false,
    serve: { maxRequestBodySize: 4 * bodyLimits.ingest, development: false, routes: { '/': dashboard } },
  })
    .onRequest(async ({ request, server }) => {
      if (request.url.includes('%00')) throw new HttpError(400, 'the URL must not contain NUL characters')
      if (request.method !== 'POST') return
      const endpoint = rateLimitedPaths[canonicalPath(new URL(request.url).pathname)]
      if (!endpoint) return
      const { limit, windowMs } = authRateLimits[endpoint]
      const address = clientAddress(deps, request, server)
      const result = await deps.store.hitRateLimit(`rate:${endpoint}:${address}`, limit, windowMs, deps.clock())
      if (!result.allowed) throw tooManyRequests(result.retryAfterMs)
    })
    .onParse(async ({ request }) => {
      const limit = bodyLimitFor(canonicalPath(new URL(request.url).pathname))
      const declared = Number(request.headers.get('content-length') ?? 0)
      if (declared > limit) throw tooLarge(limit)
      const bytes = await request.arrayBuffer()
      if (bytes.byteLength > limit) throw tooLarge(limit)
      if (bytes.byteLength === 0) return {}
      const text = new TextDecoder().decode(bytes)
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        throw new HttpError(400, 'request body must be valid JSON')
      }
      // Refused before validation, which deep documents would stall.
      if (deeperThan(parsed, MAX_JSON_DEPTH)) throw new HttpError(400, `request body is nested deeper than ${MAX_JSON_DEPTH} levels`)
      // Every endpoint takes a JSON object; anything else is refused here with one clear message.
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new HttpError(400, 'request body must be a JSON object')
      // JSON carries a NUL only as the escape \u0000, so only such bodies need the walk.
      if (text.includes('\\u0000') && holdsNul(parsed)) throw new HttpError(400, 'request body strings must not contain NUL characters')
      return parsed
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
      if (await storeAnswers(deps.store)) return { status: 'ok', version: VERSION, store: 'ok' }
      set.status = 503
      return { status: 'unavailable', version: VERSION, store: 'unavailable' }
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
}

export type App = ReturnType<typeof createApp>
