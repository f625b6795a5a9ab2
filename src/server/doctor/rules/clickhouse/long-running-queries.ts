// Queries running now for a long time (system.processes, through the activity section). Each holds
// memory, threads and the parts it reads until it ends. Altinity's clickhouse-operator alerts from
// 600 s (ClickHouseLongestRunningQuery): a warning here; an hour is critical.
import type { ActiveQuery } from '../../../../shared/wire.ts'
import { chIdent, chString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, bytes, duration, severityAbove } from '../../types.ts'
import { counted, short } from './common.ts'

const defaults = {
  warning_s: 600,
  critical_s: 3600,
  /** Queries named one finding each, the longest first; the rest are counted in one more. */
  max_findings: 10,
}

const who = (a: ActiveQuery) =>
  [
    a.user && `user ${a.user}`,
    a.client_addr && `from ${a.client_addr}`,
    a.application_name && `client "${a.application_name}"`,
  ]
    .filter(Boolean)
    .join(', ')

export const longRunningQueries: Rule<typeof defaults> = {
  id: 'ch_long_running_queries',
  summary: 'Queries running for a long time, holding memory, threads and the parts they read.',
  collectors: ['activity'],
  engine: 'clickhouse',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(longRunningQueries)
    const long = (await ctx.activity()).entries
      .filter((a) => (a.duration_ms ?? 0) >= t.warning_s * 1000)
      .sort((a, b) => b.duration_ms! - a.duration_ms!)
    const severityOf = (a: ActiveQuery) => severityAbove(a.duration_ms! / 1000, t.warning_s, t.critical_s)!

    const findings: FindingDraft[] = long.slice(0, t.max_findings).map((a) => {
      const id = String(a.pid)
      return {
        severity: severityOf(a),
        object: `query ${id}`,
        title: `Query running for ${duration(a.duration_ms!)}`,
        detail:
          `Query ${id} (${who(a) || 'unknown client'}) has been running for ${duration(a.duration_ms!)}, using ${bytes(a.memory_usage ?? 0)} of memory after reading ` +
          `${counted(a.read_rows ?? 0, 'row')} (${bytes(a.read_bytes ?? 0)}): ${short(a.query_text)}`,
        recommendation:
          'Find out whether it is expected to run this long (a backfill, an INSERT ... SELECT, a big report). If not, kill it; a max_execution_time for the user or profile that runs it stops the next runaway query by itself.',
        how_to_investigate: [
          `SELECT query_id, user, address, elapsed, formatReadableSize(memory_usage) AS memory, read_rows, formatReadableSize(read_bytes) AS read, total_rows_approx, query FROM system.processes WHERE query_id = ${chString(id)};`,
          `EXPLAIN indexes = 1 <the query above>;   -- whether the primary key narrows what it reads`,
        ],
        how_to_fix: [
          `KILL QUERY WHERE query_id = ${chString(id)} ASYNC;`,
          `ALTER USER ${a.user ? chIdent(a.user) : '<user>'} SETTINGS max_execution_time = ${t.warning_s};   -- applies to the user's new queries`,
        ],
        metrics: {
          elapsed_s: Math.round(a.duration_ms! / 1000),
          memory_bytes: a.memory_usage ?? null,
          read_rows: a.read_rows ?? null,
        },
      }
    })

    const rest = long.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((a) => severityOf(a) === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more long-running queries`,
        detail: `Besides the queries named above, ${rest.length} more have run for over ${duration(t.warning_s * 1000)}: ${rest
          .slice(0, 20)
          .map((a) => `${a.pid} (${duration(a.duration_ms!)})`)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation:
          'So many long queries at once usually share a cause: a dashboard or job issuing the same heavy query, or a saturated server.',
        how_to_investigate: [
          `SELECT query_id, user, elapsed, formatReadableSize(memory_usage) AS memory, left(query, 200) AS query FROM system.processes WHERE elapsed > ${t.warning_s} ORDER BY elapsed DESC;`,
        ],
        how_to_fix: [
          `KILL QUERY WHERE elapsed > ${t.warning_s} ASYNC;   -- after reviewing them: it kills every one of them`,
        ],
        objects: rest.slice(0, 100).map((a) => `query ${a.pid}`),
        metrics: { queries: rest.length },
      })
    }
    return findings
  },
}
