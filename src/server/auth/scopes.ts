// What an API key needs for each route: the one table of the app's routes and their access, read by
// authenticate() (principal.ts) after it has found the key, before the route's body is read. A route
// is named as the router writes it (method and path, `:id` for a parameter). A key that lacks the
// route's scope is refused with a 403 naming it; a route that is not in the table refuses every key,
// so a route added later without a line here is closed to keys (test/api/api-key-scopes.test.ts walks
// the app's routes and fails on any without one). Users are never limited by scopes: roles apply.
import type { ApiKeyScope } from '../../shared/api/api-keys.ts'
import { INGEST_PATH } from '../../shared/ingest-path.ts'
import { forbidden } from '../http-error.ts'

/**
 * `ingest`, `read`, `admin`: a key needs that scope. `key`: any valid key of the organization (it
 * describes itself: GET /auth/me, which `dbm agent --check` calls with the agent's ingest-only key).
 * `users`: signed-in users only, never a key. `public`: no credentials (a key is refused if one is
 * ever presented to such a route's authentication).
 */
export type RouteAccess = ApiKeyScope | 'key' | 'users' | 'public'

export const ROUTE_ACCESS: Readonly<Record<string, RouteAccess>> = {
  // the server, its documents and the dashboard's files
  'GET /healthz': 'public',
  'GET /api/v1/openapi.json': 'public',
  'GET /api/v1/docs': 'public',
  'GET /api/v1/docs.css': 'public',
  'GET /': 'public',
  'GET /:file': 'public',
  'GET /reset-password': 'public',
  'GET /accept-invite': 'public',
  // An organization's own figures; the server's figures answer DBM_METRICS_TOKEN before any key is read.
  'GET /metrics': 'read',

  // accounts and sessions
  'POST /api/v1/auth/signup': 'public',
  'POST /api/v1/auth/login': 'public',
  'POST /api/v1/auth/refresh': 'public',
  'POST /api/v1/auth/logout': 'public',
  'GET /api/v1/auth/verify-email': 'public',
  'POST /api/v1/auth/forgot-password': 'public',
  'POST /api/v1/auth/reset-password': 'public',
  'POST /api/v1/auth/accept-invite': 'public',
  'POST /api/v1/auth/resend-verification': 'users',
  'GET /api/v1/auth/me': 'key',

  // the agent
  [`POST ${INGEST_PATH}`]: 'ingest',
  'GET /api/v1/agent/actions': 'ingest',
  'POST /api/v1/agent/actions/:aid': 'ingest',

  // API keys, the webhook, invites and members
  'GET /api/v1/api-keys': 'admin',
  'POST /api/v1/api-keys': 'admin',
  'DELETE /api/v1/api-keys/:id': 'admin',
  'GET /api/v1/organization/webhook': 'admin',
  'PUT /api/v1/organization/webhook': 'admin',
  'POST /api/v1/organization/webhook/test': 'admin',
  'DELETE /api/v1/organization/webhook': 'admin',
  'GET /api/v1/organization/alert-destinations': 'admin',
  'POST /api/v1/organization/alert-destinations': 'admin',
  'GET /api/v1/organization/alert-destinations/:id': 'admin',
  'PATCH /api/v1/organization/alert-destinations/:id': 'admin',
  'DELETE /api/v1/organization/alert-destinations/:id': 'admin',
  'POST /api/v1/organization/alert-destinations/:id/test': 'admin',
  'GET /api/v1/organization/alert-routes': 'admin',
  'POST /api/v1/organization/alert-routes': 'admin',
  'GET /api/v1/organization/alert-routes/:id': 'admin',
  'PATCH /api/v1/organization/alert-routes/:id': 'admin',
  'DELETE /api/v1/organization/alert-routes/:id': 'admin',
  // silences: members may set and expire them (a key needs 'admin' to), and read them
  'GET /api/v1/organization/silences': 'read',
  'POST /api/v1/organization/silences': 'admin',
  'DELETE /api/v1/organization/silences/:id': 'admin',
  'GET /api/v1/organization/members': 'users',
  'PATCH /api/v1/organization/members/:id': 'users',
  'DELETE /api/v1/organization/members/:id': 'users',
  'GET /api/v1/organization/invites': 'users',
  'POST /api/v1/organization/invites': 'users',
  'DELETE /api/v1/organization/invites/:id': 'users',

  // registered databases: changing them is admin, reading them (and everything below) is read
  'GET /api/v1/databases': 'read',
  'POST /api/v1/databases': 'admin',
  'GET /api/v1/databases/health': 'read',
  'GET /api/v1/databases/:id': 'read',
  'PATCH /api/v1/databases/:id': 'admin',
  'DELETE /api/v1/databases/:id': 'admin',
  'GET /api/v1/databases/:id/health': 'read',
  'GET /api/v1/databases/:id/availability': 'read',
  // the doctor's thresholds of a database: reading them is read, changing them admin (and owners only)
  'GET /api/v1/databases/:id/thresholds': 'read',
  'PUT /api/v1/databases/:id/thresholds': 'admin',
  'DELETE /api/v1/databases/:id/thresholds': 'admin',

  // telemetry, diagnosis, alerts and events of one database
  'GET /api/v1/databases/:id/queries': 'read',
  'GET /api/v1/databases/:id/queries/:hash': 'read',
  'GET /api/v1/databases/:id/queries/:hash/explain': 'read',
  'GET /api/v1/databases/:id/active': 'read',
  'GET /api/v1/databases/:id/active/ws': 'read',
  'GET /api/v1/databases/:id/active/history': 'read',
  'GET /api/v1/databases/:id/locks': 'read',
  'GET /api/v1/databases/:id/locks/chains': 'read',
  'GET /api/v1/databases/:id/tables': 'read',
  'GET /api/v1/databases/:id/tables/:schema/:name': 'read',
  'GET /api/v1/databases/:id/indexes': 'read',
  'GET /api/v1/databases/:id/indexes/unused': 'read',
  'GET /api/v1/databases/:id/indexes/:schema/:name': 'read',
  'GET /api/v1/databases/:id/waits': 'read',
  'GET /api/v1/databases/:id/replication': 'read',
  'GET /api/v1/databases/:id/replication/history': 'read',
  'GET /api/v1/databases/:id/replication/slots/history': 'read',
  'GET /api/v1/databases/:id/bgwriter': 'read',
  'GET /api/v1/databases/:id/wal-stats': 'read',
  'GET /api/v1/databases/:id/wal-stats/timeseries': 'read',
  'GET /api/v1/databases/:id/io-stats': 'read',
  'GET /api/v1/databases/:id/io-stats/timeseries': 'read',
  'GET /api/v1/databases/:id/database-stats': 'read',
  'GET /api/v1/databases/:id/database-stats/timeseries': 'read',
  'GET /api/v1/databases/:id/constraints/invalid': 'read',
  'GET /api/v1/databases/:id/bloat': 'read',
  'GET /api/v1/databases/:id/connections': 'read',
  'GET /api/v1/databases/:id/progress': 'read',
  'GET /api/v1/databases/:id/archiver': 'read',
  'GET /api/v1/databases/:id/backups': 'read',
  'GET /api/v1/databases/:id/host': 'read',
  'GET /api/v1/databases/:id/custom-metrics': 'read',
  'GET /api/v1/databases/:id/custom-metrics/:name': 'read',
  'GET /api/v1/databases/:id/configuration': 'read',
  'GET /api/v1/databases/:id/parts': 'read',
  'GET /api/v1/databases/:id/parts/timeseries': 'read',
  'GET /api/v1/databases/:id/merges': 'read',
  'GET /api/v1/databases/:id/mutations': 'read',
  'GET /api/v1/databases/:id/server-metrics': 'read',
  'GET /api/v1/databases/:id/overview': 'read',
  'GET /api/v1/databases/:id/doctor': 'read',
  'GET /api/v1/databases/:id/recommendations': 'read',
  'GET /api/v1/databases/:id/alerts': 'read',
  'GET /api/v1/databases/:id/events': 'read',
  'GET /api/v1/databases/:id/log-events': 'read',
  'GET /api/v1/databases/:id/log-events/summary': 'read',
  // actions run by the agent: cancel and terminate further need 'admin' (routes/actions.ts), explain not
  'POST /api/v1/databases/:id/actions': 'read',
  'GET /api/v1/databases/:id/actions': 'read',
  'GET /api/v1/databases/:id/actions/:aid': 'read',
}

/** The table's key of a route as the app lists it (app.routes): WebSocket and HEAD routes are GETs, no trailing slash. */
export function routeKey(method: string, path: string): string {
  const m = method === 'WS' || method === 'HEAD' ? 'GET' : method
  return `${m} ${path.length > 1 ? path.replace(/\/+$/, '') : path}`
}

interface Template {
  key: string
  method: string
  segments: string[]
}

const templates: Template[] = Object.keys(ROUTE_ACCESS).map((key) => {
  const [method, path] = key.split(' ') as [string, string]
  return { key, method, segments: path.split('/').slice(1) }
})

/**
 * The table's route of a request, found as the router finds it: the same number of segments, each
 * equal or a parameter, a fixed segment preferred to a parameter at the first place they differ
 * (/databases/health before /databases/:id). Undefined when none matches.
 */
export function matchRoute(method: string, pathname: string): string | undefined {
  const m = method === 'HEAD' ? 'GET' : method
  const path = pathname.replace(/\/{2,}/g, '/')
  const segments = (path.length > 1 ? path.replace(/\/+$/, '') : path).split('/').slice(1)
  let best: Template | undefined
  for (const t of templates) {
    if (t.method !== m || t.segments.length !== segments.length) continue
    if (!t.segments.every((s, i) => s === segments[i] || (s.startsWith(':') && segments[i] !== ''))) continue
    if (!best || morePrecise(t, best)) best = t
  }
  return best?.key
}

function morePrecise(a: Template, b: Template): boolean {
  for (let i = 0; i < a.segments.length; i++) {
    const fixedA = !a.segments[i]!.startsWith(':')
    const fixedB = !b.segments[i]!.startsWith(':')
    if (fixedA !== fixedB) return fixedA
  }
  return false
}

/** What a key presented with `method` on `pathname` may do there: undefined when the table has no such route. */
export function accessOf(method: string, pathname: string): { route: string; access: RouteAccess } | undefined {
  const route = matchRoute(method, pathname)
  return route === undefined ? undefined : { route, access: ROUTE_ACCESS[route]! }
}

/** Refuses (403) a key of `scopes` presented on the request's route unless the table lets it in. */
export function requireKeyAccess(scopes: readonly ApiKeyScope[], method: string, pathname: string): void {
  const found = accessOf(method, pathname)
  if (found === undefined) throw forbidden('API keys cannot use this endpoint')
  const { route, access } = found
  if (access === 'key') return
  if (access === 'users' || access === 'public')
    throw forbidden(`API keys cannot use ${route}: sign in as a user of the organization`)
  if (!scopes.includes(access)) {
    throw forbidden(
      `this API key lacks the '${access}' scope, which ${route} needs: an owner can create a key with it (Settings → API keys)`,
    )
  }
}
