// /api/v1/databases/{id}: session and lock history (store/sessions/). The times of the kept
// activity and lock snapshots of a window (the dashboard's time slider reads /active and /locks at each
// with `at`), and the lock chains seen in a window, each with its root blocker, members, first and last
// seen and duration, readable after the chain ended. Windows are since/until as elsewhere (RFC 3339,
// default the 24 hours before now); chains come latest started first, or longest first (order=longest).
import { Elysia, t } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import type { StoredChain } from '../store/sessions/types.ts'
import { rfc3339 } from '../views.ts'
import { LockChain, SnapshotTimes } from '../../shared/api/session-history.ts'
import { oneOf, query } from './schema.ts'
import { clampLimit, databaseFor, limitQuery, parseWindow, windowQuery } from './telemetry-params.ts'

const PREFIX = '/api/v1/databases/:id'

/** How /locks/chains orders its list: by start (latest first), or by duration (longest first). */
const CHAIN_ORDERS = ['started', 'longest'] as const

/** A chain as the API shows it; `ongoing` when the latest kept snapshot still shows it. */
function chainView(c: StoredChain, latest: number | null) {
  return {
    root: {
      pid: c.root_pid,
      user: c.root_user,
      application: c.root_application,
      state: c.root_state,
      statement: c.root_statement,
      xact_start: rfc3339(c.root_xact_start),
    },
    members: c.members.map((m) => ({
      pid: m.pid,
      blocked_by: m.blocked_by,
      user: m.user,
      application: m.application,
      statement: m.statement,
      waiting_since: rfc3339(m.wait_started),
      first_seen: rfc3339(m.first_seen),
      last_seen: rfc3339(m.last_seen),
    })),
    started_at: rfc3339(c.started_at),
    first_seen: rfc3339(c.first_seen),
    last_seen: rfc3339(c.last_seen),
    duration_ms: Math.max(0, c.last_seen - c.started_at),
    samples: c.samples,
    max_blocked: c.max_blocked,
    ongoing: latest !== null && c.last_seen >= latest,
  }
}

export function sessionHistoryRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: PREFIX })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/active/history',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const window = parseWindow(query, clock())
        const { times, more } = await store.sessions.times(
          db.id,
          window.since,
          window.until,
          clampLimit('snapshots', query.limit),
        )
        return {
          since: rfc3339(window.since),
          until: rfc3339(window.until),
          snapshots: times.map((s) => ({
            ts: rfc3339(s.ts),
            at: s.ts,
            blocked: s.blocked,
            longest_wait_ms: s.longest_wait_ms === null ? null : Math.round(s.longest_wait_ms),
            longest_ms: s.longest_ms === null ? null : Math.round(s.longest_ms),
          })),
          earlier_left_out: more,
        }
      },
      {
        query: query({ ...windowQuery, limit: limitQuery('snapshots') }),
        response: { 200: SnapshotTimes },
        detail: { summary: 'The times of the kept session snapshots in a window, for /active and /locks with `at`' },
      },
    )
    .get(
      '/locks/chains',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const window = parseWindow(query, clock())
        const [chains, latest] = await Promise.all([
          store.sessions.chains(
            db.id,
            window.since,
            window.until,
            clampLimit('lock_chains', query.limit),
            query.order ?? 'started',
          ),
          store.sessions.latestTime(db.id),
        ])
        return chains.map((c) => chainView(c, latest))
      },
      {
        query: query({
          ...windowQuery,
          limit: limitQuery('lock_chains'),
          order: t.Optional(oneOf('order', CHAIN_ORDERS)),
        }),
        response: { 200: t.Array(LockChain) },
        detail: {
          summary:
            'Lock chains seen in a window: latest started first, or longest first with order=longest (PostgreSQL)',
        },
      },
    )
}
