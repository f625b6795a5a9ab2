// Statements that are slow on average and cost the database a meaningful share of its statement time,
// over the last hour (pg_stat_statements deltas). PgHero calls a statement slow from a 20 ms mean over
// 100 calls; dbm names only those that also weigh (5 % of the time of the costliest statements), warns
// from a 100 ms mean and is critical from 1 s, the usual log_min_duration_statement. The detail names
// the time the statement's data covers (shorter than the window on a newly watched database).
import { type FindingDraft, type Rule, duration, pct } from '../../types.ts'
import { commentText, pgIdent, pgNumber, urlSegment } from '../../sql-text.ts'
import { planIndexAdvice, planSortIndexAdvice } from '../../plan-advice.ts'
import { memoryAdvice, memoryCommand, memoryReason } from '../../work-mem.ts'
import { settings } from './log-evidence.ts'

const defaults = {
  warning_mean_ms: 100,
  critical_mean_ms: 1000,
  /** A statement run a few times (a one-off report, a migration) is not a pattern. */
  min_calls: 20,
  /** Its share of the time of the statements of the window (the 100 costliest, nearly all of it). */
  min_share: 0.05,
  /** Statements named one finding each; the rest are counted in one more finding. */
  max_statements: 10,
  window_s: 3600,
}

const excerpt = (text: string, n: number) => {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > n ? `${flat.slice(0, n)}…` : flat
}

export const slowStatements: Rule<typeof defaults> = {
  id: 'pg_slow_statements',
  summary:
    'Statements slow on average that cost a meaningful share of the statement time over the last hour, with the index or work_mem that would help.',
  collectors: ['query_stats', 'explain_plans'],
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(slowStatements)
    const statements = await ctx.queries(t.window_s * 1000, 'total_time', 100)
    const allMs = statements.reduce((sum, q) => sum + q.total_time_ms, 0)
    if (allMs <= 0) return []
    const slow: FindingDraft[] = []
    for (const q of statements) {
      const share = q.total_time_ms / allMs
      if (q.total_calls < t.min_calls || share < t.min_share || q.mean_time_ms < t.warning_mean_ms) continue
      const text = excerpt(q.query_text, 300)
      // The data are minute buckets: a statement seen in one bucket covers (at least) that minute.
      const covered =
        q.first_bucket === null
          ? t.window_s * 1000
          : Math.min(t.window_s * 1000, Math.max(60_000, ctx.now - q.first_bucket))
      // The index its newest sampled plan asks for: for an ORDER BY ... LIMIT that sorts a table read
      // whole, one in the sort's order; else the one its filter asks for, as pg_sequential_scans reads one (plan-advice.ts).
      const sorted = await planSortIndexAdvice(ctx, q.query_hash, t.window_s * 1000)
      const advice = sorted ? undefined : await planIndexAdvice(ctx, q.query_hash, t.window_s * 1000)
      const found = sorted ?? advice
      const index = found
        ? found.existing?.complete
          ? [
              `ANALYZE ${found.table};   -- index ${pgIdent(found.existing.index_name)} already leads with (${found.columns.map((c) => pgIdent(c)).join(', ')}), yet its plan scans ${found.table} whole: fresh statistics first, then its plan with real values`,
            ]
          : sorted
            ? [
                `${sorted.create}   -- its plan reads ${sorted.table} whole by a Seq Scan and sorts it for ORDER BY ... LIMIT (${commentText(`Sort Key: ${sorted.sortKey}`, 120)}): an index in that order returns the first rows without the sort`,
              ]
            : [
                `${advice!.create}   -- its plan reads ${advice!.table} by a Seq Scan with ${commentText(`Filter: ${advice!.filter}`, 120)}`,
              ]
        : [
            'CREATE INDEX CONCURRENTLY ON <table> (<filtered or joined columns>);   -- when its plan scans a large table for few rows (no sampled plan of it says which yet)',
          ]
      // Memory only for a statement that spilled in the window, sized for one execution of it (work-mem.ts).
      // Its plans say whether it runs in parallel (temp bytes are every process's); the settings, what is in effect.
      const memory =
        q.temp_blks_written > 0
          ? memoryAdvice({
              text: q.query_text,
              plans: (await ctx.plans(q.query_hash, t.window_s * 1000)).map((p) => p.plan_json),
              tempBytes: q.temp_blks_written * 8192,
              calls: q.total_calls,
              settings: await settings(ctx),
            })
          : undefined
      slow.push({
        severity: q.mean_time_ms >= t.critical_mean_ms ? 'critical' : 'warning',
        object: q.query_hash,
        title: `Slow statement: ${excerpt(q.query_text, 60)}`,
        detail: `Statement ${q.query_hash} ran ${q.total_calls.toLocaleString('en-US')} times in the last ${duration(covered)}${covered < t.window_s * 1000 ? ` (its statistics cover no more of the ${duration(t.window_s * 1000)} window)` : ''} with a mean of ${q.mean_time_ms.toFixed(1)} ms, ${duration(q.total_time_ms)} in all: ${pct(share)} of the statement time. ${q.total_rows.toLocaleString('en-US')} rows returned, ${q.shared_blks_read.toLocaleString('en-US')} blocks read from disk. Text: ${text}`,
        recommendation:
          'Look at its plan with real parameter values: a sequential scan of a large table for a few rows wants an index, a bad row estimate wants fresh statistics (ANALYZE), sorts and hashes spilling to disk want work_mem, and a statement that is slow because it does much work may want rewriting or caching.',
        how_to_investigate: [
          `SELECT query FROM pg_stat_statements WHERE queryid = ${pgNumber(q.query_hash)};   -- its text, to run under EXPLAIN (ANALYZE, BUFFERS) with typical values for the $n parameters`,
          `GET /api/v1/databases/${ctx.db.id}/queries/${urlSegment(q.query_hash)}   -- its calls and time over time`,
          `GET /api/v1/databases/${ctx.db.id}/queries/${urlSegment(q.query_hash)}/explain   -- its sampled plans`,
          `SELECT calls, mean_exec_time, stddev_exec_time, max_exec_time, rows, shared_blks_read, temp_blks_written FROM pg_stat_statements WHERE queryid = ${pgNumber(q.query_hash)};`,
        ],
        how_to_fix: [
          ...index,
          ...(memory
            ? [`${memoryCommand(memory)}   -- it spilled to temporary files: ${commentText(memoryReason(memory), 300)}`]
            : []),
          `SELECT pg_stat_statements_reset(0, 0, ${pgNumber(q.query_hash)});   -- after the fix, to measure it afresh`,
        ],
        metrics: {
          query_hash: q.query_hash,
          calls: q.total_calls,
          mean_time_ms: Number(q.mean_time_ms.toFixed(2)),
          total_time_ms: Number(q.total_time_ms.toFixed(1)),
          share: Number(share.toFixed(4)),
        },
        objects: [q.query_hash],
      })
    }
    const named = slow.slice(0, t.max_statements)
    const rest = slow.slice(t.max_statements)
    if (rest.length > 0) {
      named.push({
        severity: rest.some((f) => f.severity === 'critical') ? 'critical' : 'warning',
        title: 'More slow statements',
        detail: `${rest.length} more statements are slow and weigh at least ${pct(t.min_share, 0)} of the statement time each: ${rest.map((f) => f.object).join(', ')}.`,
        recommendation:
          'Fix the costliest first (the findings above); the list of statements by total time shows them all.',
        how_to_investigate: [`GET /api/v1/databases/${ctx.db.id}/queries?sort_by=total_time&since=<one hour ago>`],
        how_to_fix: [],
        objects: rest.map((f) => f.object!),
        metrics: { statements: rest.length },
      })
    }
    return named
  },
}
