// GET /metrics: Prometheus text format, outside /api/v1 like /healthz, in two views.
// - `Authorization: Bearer <DBM_METRICS_TOKEN>`: the server's own figures as a whole (src/server/metrics.ts:
//   process, ingest, store, health monitor, mail, rate limits...), for the operator. Off when the token is
//   not set. The token is compared in constant time, and it is never an organization's credential.
// - An organization's API key (X-API-Key or Bearer) or a user's session: that organization's figures only
//   (organization-metrics.ts). Server-wide counters would let any tenant watch the others' activity, and
//   the mail counters would tell which addresses have accounts (a reset mail goes only to a known one).
// Anything else is a 401, as on every route.
import { createHash, timingSafeEqual } from 'node:crypto'
import { Elysia, t } from 'elysia'
import { looksLikeApiKey } from '../auth/api-keys.ts'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { HttpError, unauthorized } from '../http-error.ts'
import { serverMetrics, serverRegistry } from '../metrics.ts'
import { organizationExposition } from '../organization-metrics.ts'
import { customExposition } from '../custom-metrics-exposition.ts'
import { EXPOSITION_CONTENT_TYPE } from '../../shared/prometheus.ts'

const digest = (text: string) => createHash('sha256').update(text).digest()

/** The request's `Authorization: Bearer` value when it is not an API key and no X-API-Key came: the token, or a session's JWT. */
function bearerNotKey(request: Request): string | undefined {
  const credential = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get('authorization') ?? '')?.[1]
  return credential !== undefined && !looksLikeApiKey(credential) && request.headers.get('x-api-key') === null
    ? credential
    : undefined
}

/** True when `request` carries `Authorization: Bearer <token>`, compared in constant time (of the digests). */
function presentsToken(request: Request, token: Buffer | undefined): boolean {
  const credential = token && bearerNotKey(request)
  return credential ? timingSafeEqual(digest(credential), token) : false
}

const WRONG_TOKEN =
  "invalid credentials: neither this server's DBM_METRICS_TOKEN (its own figures) nor a valid access token; an organization's figures take its API key"
const NO_TOKEN =
  "invalid credentials: not a valid access token, and this server has no DBM_METRICS_TOKEN (its own figures are off); an organization's figures take its API key"

export function metricsRoute(deps: Deps) {
  const token = deps.metricsToken ? digest(deps.metricsToken) : undefined
  return new Elysia().get(
    '/metrics',
    async ({ request, set }) => {
      set.headers['content-type'] = EXPOSITION_CONTENT_TYPE
      if (presentsToken(request, token)) {
        serverMetrics.websocketClients.set(deps.streams?.size ?? 0)
        return serverRegistry.expose()
      }
      let principal
      try {
        principal = await authenticate(deps, request)
      } catch (e) {
        // A Bearer value that is neither the token nor a session: most likely a Prometheus with the wrong token
        // file, so say where the server's figures come from rather than only "access token".
        if (e instanceof HttpError && e.status === 401 && bearerNotKey(request) !== undefined)
          throw unauthorized(token ? WRONG_TOKEN : NO_TOKEN)
        throw e
      }
      const [figures, states] = await Promise.all([
        deps.store.monitor.organizationFigures(principal.orgId),
        deps.store.databaseAvailability.states(principal.orgId),
      ])
      const custom = await Promise.all(
        figures.map(async (db) => ({
          database: { id: db.id, name: db.name },
          metrics: await deps.store.customMetrics.listCustomMetrics(db.id),
          series: await deps.store.customMetrics.latestCustomSeries([db.id]),
        })),
      )
      return organizationExposition(figures, states, deps.clock()) + customExposition(custom)
    },
    {
      response: {
        200: t.String({
          description: 'the Prometheus text exposition format',
          contentMediaType: EXPOSITION_CONTENT_TYPE,
        }),
      },
      detail: {
        summary:
          "Prometheus metrics: the caller's organization's (its API key or a session), or the server's own (Bearer DBM_METRICS_TOKEN)",
        tags: ['metrics'],
        security: [{ apiKey: [] }, { bearer: [] }],
      },
    },
  )
}
