// GET /metrics: `dbm serve`'s own metrics in the Prometheus text format (src/server/metrics.ts), outside
// /api/v1 like /healthz. Only to a valid API key of any organization, sent as X-API-Key or as
// `Authorization: Bearer <key>` (what Prometheus's `authorization` setting sends); anything else is a 401.
// The figures are the server's as a whole, never an organization's or a database's (metrics.ts).
import { Elysia, t } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { unauthorized } from '../http-error.ts'
import { serverMetrics, serverRegistry } from '../metrics.ts'
import { EXPOSITION_CONTENT_TYPE } from '../../shared/prometheus.ts'

export function metricsRoute(deps: Deps) {
  return new Elysia().get('/metrics', async ({ request, set }) => {
    const principal = await authenticate(deps, request)
    if (principal.kind !== 'api_key') throw unauthorized('GET /metrics takes an API key: send "X-API-Key: <key>" or "Authorization: Bearer <key>"')
    serverMetrics.websocketClients.set(deps.streams?.size ?? 0)
    set.headers['content-type'] = EXPOSITION_CONTENT_TYPE
    return serverRegistry.expose()
  }, {
    response: { 200: t.String({ description: 'the Prometheus text exposition format', contentMediaType: EXPOSITION_CONTENT_TYPE }) },
    detail: { summary: "The server's own metrics for Prometheus (any organization's API key)", tags: ['metrics'], security: [{ apiKey: [] }, { bearer: [] }] },
  })
}
