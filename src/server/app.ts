// The Elysia application: body parsing with size caps, a cap on the request's headers, the cap on
// ingests in flight (ingest-admission.ts: an ingest is authenticated, then shed with 503 before its body
// is read, and its body must arrive in time), auth rate limits by
// path, the one error handler that answers {"error": ...} (503 while the store cannot be reached),
// the security headers on every response, /healthz (which asks the store), GET /metrics (Prometheus: the
// server's figures for DBM_METRICS_TOKEN, an organization's own for its key), the dashboard's files, and
// the route modules. `dbm serve` and the tests both build the app through createApp, so tests exercise
// exactly what runs in production.
import { type AnyElysia, Elysia, type ValidationError } from 'elysia'
import { authenticate, checkOrigin } from './auth/principal.ts'
import { type Deps, clientAddress } from './context.ts'
import { healthz, signupGate } from './healthz.ts'
import { HttpError, tooManyRequests } from './http-error.ts'
import { IngestAdmission, countUnauthenticated } from './ingest-admission.ts'
import { parseJsonBody, readBodyBytes, tooLarge } from './json-body.ts'
import { rateLimitSubject } from './rate-limit-address.ts'
import { type RateLimitedEndpoint, authRateLimits, bodyLimits, headerLimits } from './limits.ts'
import { alertRoutes } from './routes/alerts.ts'
import { alertDestinationRoutes } from './routes/alert-destinations.ts'
import { alertRouteRoutes } from './routes/alert-routes.ts'
import { silenceRoutes } from './routes/silences.ts'
import { apiKeyRoutes } from './routes/api-keys.ts'
import { authRoutes } from './routes/auth.ts'
import { databaseRoutes } from './routes/databases.ts'
import { eventRoutes } from './routes/events.ts'
import { logEventRoutes } from './routes/log-events.ts'
import { ingestRoutes } from './routes/ingest.ts'
import { actionRoutes } from './routes/actions.ts'
import { INGEST_PATH } from '../shared/ingest-path.ts'
import { WIRE_VERSION, WIRE_VERSION_HEADER } from '../shared/wire-contract.ts'
import { clickhouseRoutes } from './routes/clickhouse.ts'
import { diagnosisRoutes } from './routes/diagnosis.ts'
import { thresholdRoutes } from './routes/thresholds.ts'
import { internalsRoutes } from './routes/internals.ts'
import { hostRoutes } from './routes/host.ts'
import { customMetricRoutes } from './routes/custom-metrics.ts'
import { configurationRoutes } from './routes/configuration.ts'
import { objectRoutes } from './routes/objects.ts'
import { organizationRoutes } from './routes/organization.ts'
import { pgCheckRoutes } from './routes/pg-checks.ts'
import { sessionHistoryRoutes } from './routes/session-history.ts'
import { queryRoutes } from './routes/queries.ts'
import { serverOptions } from './server-options.ts'
import { logStoreOutages, logStoreWriteFaults, storeFaultAnswer } from './store-outages.ts'
import { observeIngest, serverMetrics } from './metrics.ts'
import { metricsRoute } from './routes/metrics.ts'
import { dashboardRoutes } from './web/dashboard.ts'
import { acceptInvitePage, resetPasswordPage } from './web/reset-password.ts'
import { withSecurityHeaders } from './web/security-headers.ts'
import { validationMessage } from './validation-message.ts'
import { apiDocsRoutes } from './web/api-docs.ts'
import { Healthz, HealthzUnavailable } from '../shared/api/health.ts'
import dashboard from '../web/index.html'

/** Auth endpoints counted per client address (every request, answered or not). */
export const rateLimitedPaths: Record<string, RateLimitedEndpoint> = {
  '/api/v1/auth/signup': 'signup',
  '/api/v1/auth/login': 'login',
  '/api/v1/auth/refresh': 'refresh',
  '/api/v1/auth/forgot-password': 'forgot_password',
  '/api/v1/auth/reset-password': 'reset_password',
  '/api/v1/auth/resend-verification': 'resend_verification',
  '/api/v1/auth/accept-invite': 'accept_invite',
}

/** The path as the router matches it: repeated and trailing slashes do not make another endpoint. */
export function canonicalPath(pathname: string): string {
  return pathname.replace(/\/{2,}/g, '/').replace(/(.)\/+$/, '$1')
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
 * Raises Bun's own limit on a request's line and headers above the app's. The release binary starts
 * with `--max-http-header-size` (scripts/build.ts), which sets the same process-wide limit without
 * loading node:http (about 20 ms of start-up); run from source (tests, `bun src/cli.ts`), it is set here.
 */
function raiseHeaderParserLimit(): void {
  const flag = process.execArgv.find((a) => a.startsWith('--max-http-header-size='))
  if (flag && Number(flag.slice(flag.indexOf('=') + 1)) >= headerLimits.parser) return
  ;(require('node:http') as { maxHeaderSize: number }).maxHeaderSize = headerLimits.parser
}

/** `routes`: more routes, of `dbm local` (its one-time sign-in link); `dbm serve` and the tests pass none. */
export function createApp(deps: Deps, routes?: AnyElysia) {
  const { log } = deps
  // The open WebSocket streams, counted by GET /metrics (`dbm serve` passes its own set, which it closes at stop).
  deps.streams ??= new Set()
  /** When each ingest request arrived (performance.now()), for its status and time in the metrics. */
  const ingestStarts = new WeakMap<Request, number>()
  // Ingests in flight are capped; past the cap (or its organization's share) a batch is refused from its
  // headers and its caller, before its body is read (ingest-admission.ts).
  const admission = (deps.ingestAdmission ??= new IngestAdmission(log))
  logStoreOutages(deps.store, log)
  logStoreWriteFaults(deps.store, log)
  const signupClosed = signupGate(deps)
  // Bun answers requests past its own limits before the app sees them, with an empty body and no hook
  // to give it one: a body over maxRequestBodySize (413), and a request line and headers over Node's
  // http.maxHeaderSize, which Bun.serve reads (431). So every body reaches the app, which refuses one
  // over its route's cap in readBody (an unread body is not buffered: Bun stops reading the socket), and
  // Bun's header limit is raised above the app's, which headSize checks.
  raiseHeaderParserLimit()
  // `standardHostname: false`: the path is found after `http://`, not 11 characters in, which assumed a
  // host of at least 4 characters (`Host: x` routed `/api/v1/x` as `/v1/x`). Elysia's own listen routes
  // with Bun's router, which parses the path itself; `dbm serve` hands requests to the app's fetch (serve.ts).
  // The app as built, for the OpenAPI document of its routes (read on the first request).
  const built: { app?: { routes: readonly unknown[] } } = {}
  const app = new Elysia({ normalize: false, serve: { ...serverOptions }, handler: { standardHostname: false } })
    .onRequest(async ({ request, server, set }) => {
      withSecurityHeaders(set.headers)
      if (headSize(request) > headerLimits.bytes) {
        throw new HttpError(
          431,
          `the request line and headers are larger than the ${headerLimits.bytes / 1024} KiB limit`,
        )
      }
      if (request.url.includes('%00')) throw new HttpError(400, 'the URL must not contain NUL characters')
      if (request.method !== 'POST') return
      const path = canonicalPath(new URL(request.url).pathname)
      if (path === INGEST_PATH) {
        ingestStarts.set(request, performance.now())
        // Every answer of the ingest route carries the wire version, refusals here included.
        set.headers[WIRE_VERSION_HEADER] = String(WIRE_VERSION)
        // Only a valid ingest key takes a place: authenticated first, once (the route reuses the answer;
        // a key is found in the store's cache, a refused one costs what the route's check always cost).
        const principal = await authenticate(deps, request).catch((e: unknown) => {
          if (e instanceof HttpError && (e.status === 401 || e.status === 403)) countUnauthenticated(e.status)
          throw e
        })
        // A body declared over the cap is refused here, before it takes a place (it would be refused unread).
        if (Number(request.headers.get('content-length') ?? 0) > bodyLimits.ingest) throw tooLarge(bodyLimits.ingest)
        admission.admit(request, principal.orgId, performance.now())
        return
      }
      if (path.startsWith('/api/v1/auth/')) checkOrigin(deps, request)
      const endpoint = rateLimitedPaths[path]
      if (!endpoint) return
      // A closed signup is refused before the rate limit and the body's validation: the answer is the same
      // for everyone, and a visitor is not sent to wait an hour for it. (The signup's own transaction checks
      // again, for the first account's race.)
      if (endpoint === 'signup' && (await signupClosed())) throw new HttpError(403, 'signup is closed on this server')
      const { limit, windowMs } = authRateLimits[endpoint]
      // Per IPv4 address, or per /64 of an IPv6 one (rate-limit-address.ts).
      const subject = rateLimitSubject(clientAddress(deps, request, server))
      const result = await deps.store.hitRateLimit(`rate:${endpoint}:${subject}`, limit, windowMs, deps.clock())
      if (!result.allowed) throw tooManyRequests(result.retryAfterMs)
    })
    .onParse(async ({ request }) => {
      if (canonicalPath(new URL(request.url).pathname) !== INGEST_PATH)
        return parseJsonBody(request, bodyLimits.default)
      // An ingest's body must arrive within the admission's time (408 after it, its place freed). Its
      // bytes go to the route unparsed: the ingest writer parses them off the event loop (routes/ingest.ts).
      return admission.readBody(
        request,
        readBodyBytes(request, bodyLimits.ingest).then((bytes) => bytes ?? new ArrayBuffer(0)),
      )
    })
    .onError(({ code, error, set, request }) => {
      let failure: HttpError
      const storeFault = storeFaultAnswer(error)
      if (error instanceof HttpError) failure = error
      else if (code === 'PARSE' && (error as Error).cause instanceof HttpError)
        failure = (error as Error).cause as HttpError
      else if (code === 'PARSE') failure = new HttpError(400, 'request body must be valid JSON')
      else if (code === 'VALIDATION' && (error as ValidationError).type === 'response') {
        // The answer does not match the route's response schema (src/shared/api): a bug of ours, never
        // the caller's. Logged with the field, not the value (it may hold a monitored database's text).
        const issue = (error as ValidationError).valueError
        log.error('response does not match its schema', {
          method: request.method,
          path: new URL(request.url).pathname,
          field: (issue?.path ?? '').replace(/^\//, '').replaceAll('/', '.'),
          cause: issue?.message,
        })
        serverMetrics.responseSchemaErrors.inc()
        failure = new HttpError(500, 'internal server error')
      } else if (code === 'VALIDATION') failure = new HttpError(400, validationMessage(error as ValidationError))
      else if (code === 'NOT_FOUND') failure = new HttpError(404, 'not found')
      // Logged once per outage (or episode of refused writes) by logStoreOutages, not here for every request.
      else if (storeFault) failure = storeFault
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
      if (failure.status === 429) serverMetrics.rateLimitRefusals.inc()
      set.status = failure.status
      Object.assign(set.headers, failure.headers)
      set.headers['content-type'] = 'application/json; charset=utf-8'
      return JSON.stringify({ error: failure.message })
    })
    .onAfterResponse(({ request, set }) => {
      const ingestStart = ingestStarts.get(request)
      if (ingestStart !== undefined) {
        admission.release(request)
        observeIngest(Number(set.status ?? 200), ingestStart)
      }
      if (log.enabled('debug')) {
        log.debug('request', {
          method: request.method,
          path: new URL(request.url).pathname,
          status: Number(set.status ?? 200),
        })
      }
    })
    .get(
      '/healthz',
      async ({ set }) => {
        const answer = await healthz(deps, signupClosed)
        set.status = answer.status
        set.headers[WIRE_VERSION_HEADER] = String(WIRE_VERSION)
        return answer.body
      },
      {
        response: { 200: Healthz, 503: HealthzUnavailable },
        detail: {
          summary: "The server's health: 200 while its store answers, else 503",
          tags: ['health'],
          security: [],
        },
      },
    )
    .use(metricsRoute(deps))
    .use(authRoutes(deps))
    .use(apiKeyRoutes(deps))
    .use(databaseRoutes(deps))
    .use(queryRoutes(deps))
    .use(objectRoutes(deps))
    .use(sessionHistoryRoutes(deps))
    .use(internalsRoutes(deps))
    .use(hostRoutes(deps))
    .use(customMetricRoutes(deps))
    .use(pgCheckRoutes(deps))
    .use(configurationRoutes(deps))
    .use(clickhouseRoutes(deps))
    .use(diagnosisRoutes(deps))
    .use(thresholdRoutes(deps))
    .use(alertRoutes(deps))
    .use(alertDestinationRoutes(deps))
    .use(alertRouteRoutes(deps))
    .use(silenceRoutes(deps))
    .use(organizationRoutes(deps))
    .use(eventRoutes(deps))
    .use(logEventRoutes(deps))
    .use(ingestRoutes(deps))
    .use(actionRoutes(deps))
    // Typed as a plain Elysia: an AnyElysia here would turn every route of App (the dashboard's typed
    // calls, src/web/api-routes.ts) into `any`.
    .use((routes ?? new Elysia()) as Elysia)
    .use(resetPasswordPage())
    .use(apiDocsRoutes(() => built.app!, { rateLimitedPaths: Object.keys(rateLimitedPaths) }))
    .use(acceptInvitePage())
    .use(dashboardRoutes(dashboard))
  built.app = app
  return app
}

export type App = ReturnType<typeof createApp>
