// /api/v1/databases/{id}: PostgreSQL checks PgHero also has, each served from the latest snapshot of
// its section (src/server/store/snapshots.ts) with the time it was collected (null before any):
//   /constraints/invalid   NOT VALID constraints, each with the command that validates it
//   /bloat                 estimated bloat of tables and btree indexes (kind, min_bytes, limit)
//   /connections           client connections by database, user, application, client address, state,
//                          and against max_connections (the slots left to ordinary roles, the headroom)
//   /progress              VACUUM, ANALYZE, CREATE INDEX and CLUSTER running now, with their phase
// Agents that predate a section never send it: the answer is then empty with collected_at null.
import { Elysia, t } from 'elysia'
import type { BloatEstimate, ConnectionGroup, InvalidConstraint, ProgressEntry } from '../../shared/wire.ts'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { pgIdent, pgQualified } from '../../shared/sql-text.ts'
import type { SnapshotKind } from '../store/snapshots.ts'
import { rfc3339 } from '../views.ts'
import { Bloat, Connections, InvalidConstraints, Progress } from '../../shared/api/pg-checks.ts'
import { oneOf, query } from './schema.ts'
import { clampLimit, databaseFor, limitQuery } from './telemetry-params.ts'

/** What the bloat answer says of its numbers, so that no reader takes them for a measurement. */
export const BLOAT_METHOD =
  'Estimated from planner statistics (pg_class row and page counts, pg_stats average widths, row and page overheads, fillfactor) as of the last ANALYZE or VACUUM; measure with pgstattuple before acting.'

/** `ALTER TABLE ... VALIDATE CONSTRAINT ...` for a NOT VALID constraint, its names quoted. */
export const validateCommand = (c: Pick<InvalidConstraint, 'schema_name' | 'table_name' | 'constraint_name'>) =>
  `ALTER TABLE ${pgQualified(c.schema_name, c.table_name)} VALIDATE CONSTRAINT ${pgIdent(c.constraint_name)};`

/** The share of a relation the estimate finds bloated, 0..1 to three decimals. */
/**
 * bloat_bytes / size_bytes, 0-1 (0 for an empty relation). Capped at 1: the agent's bloat never exceeds the
 * size, and a wire-valid but inconsistent estimate (2^53 bytes of bloat in 5e-324 bytes) would otherwise
 * divide into Infinity, which the answer's schema refuses (a 500).
 */
export const bloatRatio = (b: Pick<BloatEstimate, 'bloat_bytes' | 'size_bytes'>) =>
  b.size_bytes > 0 ? Math.min(1, Number((b.bloat_bytes / b.size_bytes).toFixed(3))) : 0

/** Counts of the groups by one dimension, the largest first (ties by value; null last). */
function countsBy(groups: ConnectionGroup[], key: keyof Omit<ConnectionGroup, 'count'>) {
  const counts = new Map<string | null, number>()
  for (const g of groups) counts.set(g[key], (counts.get(g[key]) ?? 0) + g.count)
  return [...counts]
    .map(([value, count]) => ({ value, count }))
    .sort(
      (a, b) =>
        b.count - a.count ||
        (a.value === null ? 1 : b.value === null ? -1 : a.value < b.value ? -1 : a.value > b.value ? 1 : 0),
    )
}

const BLOAT_KINDS = ['table', 'index'] as const

/** A setting the agent sent as a whole number (SHOW's text of an integer setting without a unit); null otherwise. */
const wholeSetting = (settings: Record<string, string> | null, name: string): number | null => {
  const v = settings?.[name]
  return v !== undefined && /^\d{1,9}$/.test(v.trim()) ? Number(v) : null
}

/**
 * The client connections against max_connections: the slots ordinary roles may use (max_connections less
 * superuser_reserved_connections and, from PostgreSQL 16, reserved_connections), the share in use, each
 * state's share and the headroom left. Null before the agent sent the settings.
 */
export function connectionSlots(
  settings: Record<string, string> | null,
  total: number,
  byState: { value: string | null; count: number }[],
) {
  const max = wholeSetting(settings, 'max_connections')
  if (max === null || max <= 0) return null
  const superuserReserved = wholeSetting(settings, 'superuser_reserved_connections') ?? 0
  const reserved = wholeSetting(settings, 'reserved_connections') ?? 0
  const usable = Math.max(1, max - superuserReserved - reserved)
  const share = (n: number) => Number((n / usable).toFixed(4))
  return {
    max_connections: max,
    superuser_reserved_connections: superuserReserved,
    reserved_connections: reserved,
    usable,
    used_ratio: share(total),
    headroom: usable - total,
    by_state: byState.map((s) => ({ ...s, ratio: share(s.count) })),
  }
}

const timeOrNull = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : rfc3339(ms))
/** ms from `from` to `at`, never below 0; null when either is unknown. */
const ageAt = (at: number | null, from: number | null | undefined) =>
  at === null || from === null || from === undefined ? null : Math.max(0, at - from)

/** A running command as /progress answers it: times in RFC 3339, what it waits on (null from agents before it). */
function progressView(p: ProgressEntry, collectedAt: number | null) {
  const b = p.blocker ?? null
  return {
    ...p,
    started_at: timeOrNull(p.started_at),
    wait_event_type: p.wait_event_type ?? null,
    wait_event: p.wait_event ?? null,
    lockers_done: p.lockers_done ?? null,
    lockers_total: p.lockers_total ?? null,
    current_locker_pid: p.current_locker_pid ?? null,
    blocker:
      b === null
        ? null
        : {
            ...b,
            xact_start: timeOrNull(b.xact_start),
            state_change: timeOrNull(b.state_change),
            transaction_age_ms: ageAt(collectedAt, b.xact_start),
            state_age_ms: ageAt(collectedAt, b.state_change),
          },
  }
}

export function pgCheckRoutes(deps: Deps) {
  const { store } = deps
  const latest = async <T>(
    databaseId: string,
    kind: SnapshotKind,
  ): Promise<{ collected_at: string | null; entries: T[] }> => {
    const found = await store.latestSnapshot(databaseId, kind)
    return {
      collected_at: found ? rfc3339(found.ts) : null,
      entries: Array.isArray(found?.payload) ? (found.payload as T[]) : [],
    }
  }

  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/constraints/invalid',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const { collected_at, entries } = await latest<InvalidConstraint>(db.id, 'invalid_constraints')
        return {
          collected_at,
          constraints: entries
            .slice(0, clampLimit('invalid_constraints', query.limit))
            .map((c) => ({ ...c, validate_sql: validateCommand(c) })),
        }
      },
      {
        query: query({ limit: limitQuery('invalid_constraints') }),
        response: { 200: InvalidConstraints },
        detail: { summary: 'Constraints added NOT VALID and never validated, each with the command that validates it' },
      },
    )
    .get(
      '/bloat',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const { collected_at, entries } = await latest<BloatEstimate>(db.id, 'bloat')
        const minBytes = query.min_bytes === undefined ? 0 : Number(query.min_bytes)
        const kept = entries
          .filter((b) => (query.kind === undefined || b.kind === query.kind) && b.bloat_bytes >= minBytes)
          .sort((a, b) => b.bloat_bytes - a.bloat_bytes || b.size_bytes - a.size_bytes)
          .slice(0, clampLimit('bloat', query.limit))
        return {
          estimated_at: collected_at,
          estimate: true,
          method: BLOAT_METHOD,
          entries: kept.map((b) => ({ ...b, bloat_ratio: bloatRatio(b) })),
        }
      },
      {
        query: query({
          kind: t.Optional(oneOf('kind', BLOAT_KINDS)),
          min_bytes: t.Optional(
            t.String({ pattern: '^[0-9]{1,15}$', error: 'min_bytes must be a whole number of bytes' }),
          ),
          limit: limitQuery('bloat'),
        }),
        response: { 200: Bloat },
        detail: { summary: 'Estimated bloat of tables and btree indexes, from planner statistics' },
      },
    )
    .get(
      '/connections',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const [{ collected_at, entries }, settings] = await Promise.all([
          latest<ConnectionGroup>(db.id, 'connections'),
          store.latestSettings(db.id),
        ])
        const total = entries.reduce((sum, g) => sum + g.count, 0)
        return {
          collected_at,
          total,
          slots: connectionSlots(settings, total, countsBy(entries, 'state')),
          by_state: countsBy(entries, 'state'),
          by_user: countsBy(entries, 'user'),
          by_application: countsBy(entries, 'application_name'),
          by_client: countsBy(entries, 'client_addr'),
          by_database: countsBy(entries, 'database'),
          groups: entries.slice(0, clampLimit('connections', query.limit)),
        }
      },
      {
        query: query({ limit: limitQuery('connections') }),
        response: { 200: Connections },
        detail: { summary: 'Client connections by state, user, application, client address and database' },
      },
    )
    .get(
      '/progress',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id, 'postgres')
        const { collected_at, entries } = await latest<ProgressEntry>(db.id, 'progress')
        const found = collected_at === null ? null : Date.parse(collected_at)
        return {
          collected_at,
          operations: entries.slice(0, clampLimit('progress', query.limit)).map((p) => progressView(p, found)),
        }
      },
      {
        query: query({ limit: limitQuery('progress') }),
        response: { 200: Progress },
        detail: {
          summary: 'VACUUM, ANALYZE, CREATE INDEX, REINDEX and CLUSTER running now, with their phase and progress',
        },
      },
    )
}
