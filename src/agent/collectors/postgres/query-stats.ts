// query_stats: statement statistics from pg_stat_statements for the connected database (each
// configured database reports its own statements), sent as deltas since the previous cycle
// (reset-aware), summed per queryid over users. The first cycle only takes a baseline.
// Counters are read without query texts; texts are fetched only for statements not seen before.
// A missing extension is one clear warning, not an error every cycle.
// The agent's own statements are left out when it connects with a role of its own (neither superuser
// nor the database's owner): an agent running as the application's role hides nothing.
import { POSTGRES_QUERY_COUNTER_KEYS } from '../../../shared/metrics.ts'
import type { QueryStatDelta } from '../../../shared/wire.ts'
import { counterDelta, num } from '../delta.ts'
import type { PostgresCollector, PostgresContext } from '../types.ts'
import { forVersion } from './common.ts'

const MAX_TEXT = 10_000

/** Column names per minimum major: PG 13 renamed total_time, PG 17 renamed the block times. */
const COLUMNS: Record<number, string> = {
  13: `total_exec_time AS total_time_ms, blk_read_time AS blk_read_time_ms, blk_write_time AS blk_write_time_ms`,
  17: `total_exec_time AS total_time_ms, shared_blk_read_time AS blk_read_time_ms, shared_blk_write_time AS blk_write_time_ms`,
}

const COUNTERS = POSTGRES_QUERY_COUNTER_KEYS
type Counter = (typeof COUNTERS)[number]
type Reading = Record<Counter, number>

interface State {
  /** Counters per (userid, dbid, queryid, toplevel) at the previous cycle. */
  previous?: Map<string, Reading>
  texts: Map<string, string>
  /** The reason the extension cannot be read, once warned about. */
  unavailable?: string
}

async function availability(ctx: PostgresContext): Promise<string | undefined> {
  const [row] = await ctx.sql`SELECT
      EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements') AS installed,
      current_setting('shared_preload_libraries') AS preload`
  if (!row?.installed) {
    return `pg_stat_statements is not installed in database "${ctx.database}": run CREATE EXTENSION pg_stat_statements; (with pg_stat_statements in shared_preload_libraries)`
  }
  if (!String(row.preload).split(',').some((l) => l.trim() === 'pg_stat_statements')) {
    return 'pg_stat_statements is not in shared_preload_libraries: add it to postgresql.conf and restart PostgreSQL'
  }
  return undefined
}

/**
 * The oid of the agent's role when its statements are to be left out: a dedicated role, neither
 * superuser nor the owner of the database (the application's role often is). Null otherwise.
 */
export async function ownStatementsRole(ctx: PostgresContext): Promise<string | null> {
  const [row] = await ctx.sql`
    SELECT r.oid::text AS oid, r.rolsuper OR d.datdba = r.oid AS shared
    FROM pg_roles r, pg_database d
    WHERE r.rolname = current_user AND d.datname = current_database()`
  return row && !row.shared ? (row.oid as string) : null
}

export const queryStats: PostgresCollector = {
  name: 'query_stats',
  engine: 'postgres',
  defaultEnabled: true,

  async collect(ctx) {
    const state: State = (ctx.state.get('query_stats') as State | undefined) ?? { texts: new Map() }
    ctx.state.set('query_stats', state)

    const problem = await availability(ctx)
    if (problem) {
      if (state.unavailable !== problem) ctx.log.warn(problem, { database: ctx.name, collector: 'query_stats' })
      state.unavailable = problem
      return {}
    }
    if (state.unavailable) ctx.log.info('pg_stat_statements is available now', { database: ctx.name })
    state.unavailable = undefined

    const ownRole = await ownStatementsRole(ctx)
    const rows = await ctx.sql.unsafe(
      `SELECT userid::text || '/' || dbid::text || '/' || queryid::text || '/' || ${ctx.major >= 14 ? 'toplevel::text' : "'t'"} AS key,
              queryid::text AS query_hash, calls, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied,
              shared_blks_written, temp_blks_read, temp_blks_written, ${forVersion(COLUMNS, ctx.major)}
       FROM pg_stat_statements(false)
       WHERE queryid IS NOT NULL AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND userid::text IS DISTINCT FROM $1::text`,
      [ownRole],
    )
    const current = new Map<string, Reading>()
    const hashOf = new Map<string, string>()
    for (const r of rows) {
      current.set(r.key, Object.fromEntries(COUNTERS.map((c) => [c, num(r[c]) ?? 0])) as Reading)
      hashOf.set(r.key, r.query_hash)
    }
    const previous = state.previous
    state.previous = current
    if (!previous) return {}

    // Deltas per row, summed per statement.
    const sums = new Map<string, Reading>()
    for (const [key, reading] of current) {
      const before = previous.get(key)
      const delta = Object.fromEntries(COUNTERS.map((c) => [c, counterDelta(before?.[c], reading[c]) ?? 0])) as Reading
      if (delta.calls === 0) continue
      const hash = hashOf.get(key)!
      const sum = sums.get(hash)
      if (sum) for (const c of COUNTERS) sum[c] += delta[c]
      else sums.set(hash, delta)
    }
    if (sums.size === 0) return { query_stats: [] }

    const missing = [...sums.keys()].filter((h) => !state.texts.has(h))
    if (missing.length > 0) {
      const texts = await ctx.sql.unsafe(
        `SELECT DISTINCT ON (queryid) queryid::text AS query_hash, left(query, ${MAX_TEXT}) AS query
         FROM pg_stat_statements(true)
         WHERE queryid::text = ANY($1::text[]) AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [missing],
      )
      for (const t of texts) state.texts.set(t.query_hash, t.query ?? '')
    }
    // Forget texts of statements that left pg_stat_statements.
    if (state.texts.size > 2 * current.size + 1000) {
      const live = new Set(hashOf.values())
      for (const h of state.texts.keys()) if (!live.has(h)) state.texts.delete(h)
    }

    const out: QueryStatDelta[] = []
    for (const [hash, d] of sums) {
      out.push({ query_hash: hash, query_text: state.texts.get(hash) ?? '', ...d })
    }
    return { query_stats: out }
  },
}
