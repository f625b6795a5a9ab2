// The Elysia application: body parsing with size caps, auth rate limits by path, the one error
// handler that answers {"error": ...}, and the route modules. `dbm serve` and the tests both build
// the app through createApp, so tests exercise exactly what runs in production.
import { Elysia, type ValidationError } from 'elysia'
import { type Deps, clientAddress } from './context.ts'
import { HttpError, tooManyRequests } from './http-error.ts'
import { type RateLimitedEndpoint, authRateLimits, bodyLimits } from './limits.ts'
import { apiKeyRoutes } from './routes/api-keys.ts'
import { authRoutes } from './routes/auth.ts'
import { databaseRoutes } from './routes/databases.ts'
import { ingestRoutes } from './routes/ingest.ts'
import { queryRoutes } from './routes/queries.ts'
import { resetPasswordPage } from './web/reset-password.ts'
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

function bodyLimitFor(path: string): number {
  return path === '/api/v1/ingest' ? bodyLimits.ingest : bodyLimits.default
}

function tooLarge(limit: number) {
  return new HttpError(413, `request body is larger than the ${Math.round(limit / 1024)} KiB limit`)
}

/** A validation failure as one sentence naming the field. */
function validationMessage(error: ValidationError): string {
  if (typeof error.customError === 'string') return error.customError
  const issue = error.valueError
  const field = (issue?.path ?? '').replace(/^\//, '').replaceAll('/', '.')
  if (issue?.message === 'Unexpected property') return `unknown field: ${field}`
  if (!field) return error.type === 'body' ? 'request body must be a JSON object' : `invalid ${error.type}`
  return `invalid ${field}: ${issue?.message ?? 'unexpected value'}`
}

export function createApp(deps: Deps) {
  const { log } = deps
  return new Elysia({ normalize: false, serve: { maxRequestBodySize: bodyLimits.ingest + 1024 } })
    .onRequest(async ({ request, server }) => {
      if (request.method !== 'POST') return
      const endpoint = rateLimitedPaths[new URL(request.url).pathname]
      if (!endpoint) return
      const { limit, windowMs } = authRateLimits[endpoint]
      const address = clientAddress(deps, request, server)
      const result = await deps.store.hitRateLimit(`rate:${endpoint}:${address}`, limit, windowMs, deps.clock())
      if (!result.allowed) throw tooManyRequests(result.retryAfterMs)
    })
    .onParse(async ({ request }) => {
      const limit = bodyLimitFor(new URL(request.url).pathname)
      const declared = Number(request.headers.get('content-length') ?? 0)
      if (declared > limit) throw tooLarge(limit)
      const bytes = await request.arrayBuffer()
      if (bytes.byteLength > limit) throw tooLarge(limit)
      if (bytes.byteLength === 0) return {}
      try {
        return JSON.parse(new TextDecoder().decode(bytes))
      } catch {
        throw new HttpError(400, 'request body must be valid JSON')
      }
    })
    .onError(({ code, error, set, request }) => {
      let failure: HttpError
      if (error instanceof HttpError) failure = error
      else if (code === 'PARSE' && (error as Error).cause instanceof HttpError) failure = (error as Error).cause as HttpError
      else if (code === 'PARSE') failure = new HttpError(400, 'request body must be valid JSON')
      else if (code === 'VALIDATION') failure = new HttpError(400, validationMessage(error as ValidationError))
      else if (code === 'NOT_FOUND') failure = new HttpError(404, 'not found')
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
      log.debug('request', { method: request.method, path: new URL(request.url).pathname, status: Number(set.status ?? 200) })
    })
    .get('/healthz', () => ({ status: 'ok', version: VERSION }))
    .use(authRoutes(deps))
    .use(apiKeyRoutes(deps))
    .use(databaseRoutes(deps))
    .use(queryRoutes(deps))
    .use(ingestRoutes(deps))
    .use(resetPasswordPage())
}

export type App = ReturnType<typeof createApp>
