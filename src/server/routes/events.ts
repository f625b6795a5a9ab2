// /api/v1/databases/{id}/events: what changed, newest first, over since/until (default the last 24 h):
// restarts and version changes, tables and indexes appearing, disappearing or becoming valid, setting
// changes, statistics resets, the agent connecting and going away (events/events.ts derives them at
// ingest), alerts opened and resolved (stored by the monitor with the alert's text at that
// moment; read from the alerts table only for alerts opened before that) and plan changes (read from
// their own table). Each event is
// {ts, kind, severity?, title, detail?, object?, link?}; the optional fields are left out when empty.
import { Elysia, t } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import type { DbEvent } from '../store/events/events.ts'
import { rfc3339 } from '../views.ts'
import { DbEvent as DbEventSchema } from '../../shared/api/events.ts'
import { query } from './schema.ts'
import { clampLimit, databaseFor, limitQuery, parseWindow, windowQuery } from './telemetry-params.ts'

export function eventView(e: DbEvent) {
  return {
    ts: rfc3339(e.ts),
    kind: e.kind,
    ...(e.severity ? { severity: e.severity } : {}),
    title: e.title,
    ...(e.detail !== null ? { detail: e.detail } : {}),
    ...(e.object !== null ? { object: e.object } : {}),
    ...(e.link !== null ? { link: e.link } : {}),
  }
}

export function eventRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/events',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const now = clock()
        const events = await store.listEvents(db, parseWindow(query, now), clampLimit('events', query.limit), now)
        return events.map(eventView)
      },
      {
        query: query({ ...windowQuery, limit: limitQuery('events') }),
        response: { 200: t.Array(DbEventSchema) },
        detail: { summary: 'What changed on the database in a window, newest first' },
      },
    )
}
