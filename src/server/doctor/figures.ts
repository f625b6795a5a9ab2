// The key figures of a database, shared by the overview and the doctor's metrics_summary. Both: the
// database server's start and its uptime when the latest batch arrived. PostgreSQL:
// sessions, blocking, cache hit ratio over the last hour, dead tuples, the last autovacuum. ClickHouse:
// merges, mutations, and query_p99_ms: the p99 of the queries query_log recorded in the agent's latest
// cycle, as the agent sent it (QUERY_P99_DESCRIPTION in shared/api/clickhouse.ts); null when that cycle
// logged none. It used to fall back to the highest statement p99 of the hour when the latest cycle
// logged no query, a different figure under the same name (the overview showed 199 where the store
// held 197).
import type { DoctorContext } from './context.ts'

const HOUR = 3_600_000

const round = (n: number | null, digits = 4) => (n === null ? null : Number(n.toFixed(digits)))

export interface CommonFigures {
  active_queries: number
  longest_query_ms: number | null
  /** When the database server started (epoch ms), as the latest batch that said gave it. */
  server_started_at: number | null
  /** Seconds from that start to the latest batch's arrival (not to now: a server that stopped sending is not known to be up). */
  uptime_s: number | null
}

export async function commonFigures(ctx: DoctorContext): Promise<CommonFigures> {
  const [{ entries }, started] = await Promise.all([
    ctx.activity(),
    ctx.once('server_started_at', () => ctx.store.serverChanges.serverStartedAt(ctx.db.id)),
  ])
  const running = ctx.db.engine === 'postgres' ? entries.filter((a) => a.state === 'active') : entries
  let longest: number | null = null
  for (const a of running)
    if (a.duration_ms !== null && (longest === null || a.duration_ms > longest)) longest = a.duration_ms
  const lastBatch = ctx.db.last_seen_at === null ? null : Math.min(ctx.db.last_seen_at, ctx.now)
  const uptime = started === null || lastBatch === null ? null : Math.max(0, Math.round((lastBatch - started) / 1000))
  return {
    active_queries: running.length,
    longest_query_ms: round(longest, 3),
    server_started_at: started,
    uptime_s: uptime,
  }
}

/** PostgreSQL's figures (described in src/shared/api/doctor.ts); last_autovacuum in epoch ms. */
export interface PostgresFigures {
  blocked_queries: number
  cache_hit_ratio: number | null
  dead_tuple_ratio: number | null
  last_autovacuum: number | null
}

export async function postgresFigures(ctx: DoctorContext): Promise<PostgresFigures> {
  const [{ entries }, sums, tables] = await Promise.all([ctx.activity(), ctx.sums('database', HOUR), ctx.tables()])
  const { blks_hit: hit = 0, blks_read: read = 0 } = sums
  let live = 0
  let dead = 0
  let lastAutovacuum: number | null = null
  for (const t of tables) {
    live += t.n_live_tup ?? 0
    dead += t.n_dead_tup ?? 0
    if (t.last_autovacuum !== null && (lastAutovacuum === null || t.last_autovacuum > lastAutovacuum))
      lastAutovacuum = t.last_autovacuum
  }
  return {
    blocked_queries: entries.filter((a) => a.blocking_pids.length > 0).length,
    cache_hit_ratio: hit + read > 0 ? round(hit / (hit + read)) : null,
    dead_tuple_ratio: live + dead > 0 ? round(dead / (live + dead)) : null,
    last_autovacuum: lastAutovacuum,
  }
}

/** ClickHouse's figures (described in src/shared/api/doctor.ts). */
export interface ClickHouseFigures {
  active_merges: number
  merge_progress_pct: number | null
  active_mutations: number
  stuck_mutations: number
  query_p99_ms: number | null
}

export async function clickhouseFigures(ctx: DoctorContext): Promise<ClickHouseFigures> {
  const [merges, mutations, metrics] = await Promise.all([ctx.merges(), ctx.mutations(), ctx.serverMetrics()])
  const running = merges?.payload ?? []
  const pending = (mutations?.payload ?? []).filter((m) => !m.is_done)
  const p99 = metrics?.payload.query_p99_ms
  return {
    active_merges: running.length,
    merge_progress_pct:
      running.length > 0 ? round((100 * running.reduce((s, m) => s + m.progress, 0)) / running.length, 1) : null,
    active_mutations: pending.length,
    stuck_mutations: pending.filter((m) => m.stuck).length,
    query_p99_ms: typeof p99 === 'number' && Number.isFinite(p99) ? p99 : null,
  }
}
