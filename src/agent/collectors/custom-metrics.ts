// Checks of one's own (issue 28): each database's custom_metrics from the agent config, one SQL query
// each, run at its own interval in a read-only transaction under its own statement timeout, at most
// 1,000 rows and 20 columns. Label columns become strings (cut to 200 characters), value columns must
// be numbers (numeric and bigint arrive as text and are parsed). A query that fails, runs too long or
// returns something unusable is reported for that metric alone (an entry of the section's errors and
// the collector's note); the other metrics and collectors go on. One collector object per engine
// (postgres/index.ts, clickhouse/index.ts), both built here around the engine's way of running a query.
import type { ClickHouseClient } from '@clickhouse/client'
import type postgres from 'postgres'
import type { CustomMetricConfig, DatabaseConfig } from '../config.ts'
import { customMetricLimits } from '../config.ts'
import type { CustomMetricsSection, CustomMetricSample } from '../../shared/wire.ts'
import { customMetricWireLimits } from '../../shared/wire.ts'
import type { ClickHouseContext, CollectorState, PostgresContext } from './types.ts'
import { registerCollector } from './registry.ts'

/** A query's first rows (at most rows + 1, so that one too many is seen), as column → value. */
export type CustomRows = Record<string, unknown>[]

/** Runs one metric's SQL; rejects with the database's error. */
export type CustomQuery = (metric: CustomMetricConfig) => Promise<CustomRows>

const NUMBER_TEXT = /^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$/

/** A value column's value as a number: null when SQL NULL, undefined when not a number. */
export function customNumber(value: unknown): number | null | undefined {
  if (value === null || value === undefined) return null
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined
  if (typeof value === 'bigint') return Number(value)
  if (typeof value === 'string' && NUMBER_TEXT.test(value)) {
    const n = Number(value)
    return Number.isFinite(n) ? n : undefined
  }
  return undefined
}

/** A label column's value as text: NUL replaced, cut to 200 characters (not inside a surrogate pair). */
export function customLabel(value: unknown): string {
  let text: string
  if (value === null || value === undefined) text = ''
  else if (value instanceof Date) text = Number.isNaN(value.getTime()) ? '' : value.toISOString()
  else if (typeof value === 'object') text = JSON.stringify(value) ?? ''
  else text = String(value)
  text = text.replaceAll('\0', '\uFFFD')
  if (text.length <= customMetricLimits.labelLength) return text
  let cut = text.slice(0, customMetricLimits.labelLength)
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1)
  return cut
}

export interface CustomResult {
  samples: CustomMetricSample[]
  /** Why the metric gave no (or only part of its) samples; undefined when all is well. */
  error?: string
}

/** Turns a query's rows into samples, or says what is wrong with them. */
export function customSamples(metric: CustomMetricConfig, rows: CustomRows): CustomResult {
  if (rows.length === 0) return { samples: [] }
  const columns = Object.keys(rows[0]!)
  if (columns.length > customMetricLimits.columns) {
    return { samples: [], error: `returned ${columns.length} columns; at most ${customMetricLimits.columns}` }
  }
  const missing = [...metric.labels, ...metric.values].filter((c) => !columns.includes(c))
  if (missing.length > 0) {
    return {
      samples: [],
      error: `the result has no column ${missing.map((c) => JSON.stringify(c)).join(', ')} (it has: ${columns.map((c) => JSON.stringify(customLabel(c).slice(0, 60))).join(', ')})`,
    }
  }
  const samples: CustomMetricSample[] = []
  const seen = new Set<string>()
  const kept = rows.slice(0, customMetricLimits.rows)
  for (const [i, row] of kept.entries()) {
    const labels: Record<string, string> = {}
    for (const column of metric.labels) labels[column] = customLabel(row[column])
    const key = JSON.stringify(metric.labels.map((c) => labels[c]))
    if (seen.has(key))
      return {
        samples: [],
        error: `rows ${i + 1} and an earlier one have the same labels ${labelText(labels)}; each row needs its own label set`,
      }
    seen.add(key)
    for (const column of metric.values) {
      const value = customNumber(row[column])
      if (value === undefined) {
        return {
          samples: [],
          error: `value column ${JSON.stringify(column)} is not a number in row ${i + 1}: ${JSON.stringify(customLabel(row[column]).slice(0, 60))}`,
        }
      }
      if (value === null) continue
      samples.push({ name: metric.name, column, labels, value })
    }
  }
  if (rows.length > customMetricLimits.rows)
    return {
      samples,
      error: `returned more than ${customMetricLimits.rows} rows; the first ${customMetricLimits.rows} are kept`,
    }
  return { samples }
}

function labelText(labels: Record<string, string>): string {
  return `{${Object.entries(labels)
    .map(([k, v]) => `${k}=${JSON.stringify(v.slice(0, 40))}`)
    .join(', ')}}`
}

/** The definition of a metric as the batch carries it (the server keeps the latest). */
export function customDefinition(metric: CustomMetricConfig): CustomMetricsSection['definitions'][number] {
  return {
    name: metric.name,
    kind: metric.kind,
    labels: metric.labels,
    values: metric.values,
    interval_seconds: metric.intervalMs / 1000,
    ...(metric.description !== undefined ? { description: metric.description } : {}),
    ...(metric.alert
      ? {
          alert: {
            op: metric.alert.op,
            threshold: metric.alert.threshold,
            for_seconds: metric.alert.forMs / 1000,
            severity: metric.alert.severity,
          },
        }
      : {}),
  }
}

/** Most characters of the samples' JSON in one batch (a part is at most 15 MiB). */
const SECTION_BUDGET_CHARS = 6_000_000

/** The state key of a metric's last run (epoch ms). */
const lastRunKey = (name: string) => `custom_metrics:last:${name}`

/** A metric is due when its interval has passed since its last run, less half a second of timer jitter. */
function due(state: CollectorState, metric: CustomMetricConfig, now: number): boolean {
  const last = state.get(lastRunKey(metric.name))
  return typeof last !== 'number' || now - last >= metric.intervalMs - 500 || now < last
}

/**
 * Runs every due metric of the database, one after the other, each under its own timeout; returns the
 * section (undefined when no metric was due) and sets the collector's note to the metrics that failed.
 */
export async function collectCustom(
  metrics: readonly CustomMetricConfig[],
  ctx: { now: number; state: CollectorState; notes: Map<string, string> },
  run: CustomQuery,
): Promise<CustomMetricsSection | undefined> {
  const section: CustomMetricsSection = { definitions: metrics.map(customDefinition), samples: [], errors: [] }
  let ran = 0
  let bytes = 0
  for (const metric of metrics) {
    if (!due(ctx.state, metric, ctx.now)) continue
    ctx.state.set(lastRunKey(metric.name), ctx.now)
    ran++
    let result: CustomResult
    try {
      result = customSamples(metric, await run(metric))
    } catch (e) {
      result = { samples: [], error: queryError(e, metric) }
    }
    const room = customMetricWireLimits.samples - section.samples.length
    if (result.samples.length > room) {
      result = {
        samples: result.samples.slice(0, room),
        error: `more than ${customMetricWireLimits.samples} samples in this cycle; the rest are left out`,
      }
    }
    // The section travels whole in one part of the batch (split.ts): its JSON stays well under a part.
    const size = JSON.stringify(result.samples).length
    if (bytes + size > SECTION_BUDGET_CHARS) {
      result = {
        samples: [],
        error: `its samples would make the batch too large (${size} bytes of JSON); return fewer rows or shorter labels`,
      }
    } else bytes += size
    section.samples.push(...result.samples)
    if (result.error !== undefined) section.errors.push({ name: metric.name, message: result.error.slice(0, 2000) })
  }
  if (section.errors.length > 0) {
    ctx.notes.set(
      'custom_metrics',
      section.errors
        .map((e) => `${e.name}: ${e.message}`)
        .join('; ')
        .slice(0, 2000),
    )
  } else if (ran > 0) ctx.notes.delete('custom_metrics')
  return ran > 0 ? section : undefined
}

/** The database's message, with the timeout named when the statement ran out of it. */
function queryError(e: unknown, metric: CustomMetricConfig): string {
  const error = e as { message?: string; code?: string }
  const message = String(error?.message ?? e).replaceAll('\0', '\uFFFD')
  if (error?.code === '57014' || /TIMEOUT_EXCEEDED|timeout/i.test(message))
    return `took longer than its timeout (${metric.timeoutMs / 1000} s): ${message}`
  return message
}

/** Deadline of the collector's whole run: every metric's timeout, plus a margin. */
export function customDeadlineMs(config: Partial<DatabaseConfig>): number {
  return (config.customMetrics ?? []).reduce((sum, m) => sum + m.timeoutMs + 1_000, 2_000)
}

/**
 * One metric on PostgreSQL: a READ ONLY transaction with the metric's statement_timeout, the query through
 * a cursor so that no more than rows + 1 rows are read (the extended protocol refuses several statements
 * in one, so the SQL cannot end the transaction and go on writing).
 */
export async function postgresCustomQuery(sql: postgres.Sql, metric: CustomMetricConfig): Promise<CustomRows> {
  const rows = await sql.begin(async (tx) => {
    await tx.unsafe('SET TRANSACTION READ ONLY')
    await tx.unsafe(`SET LOCAL statement_timeout = ${Math.trunc(metric.timeoutMs)}`)
    const out: CustomRows = []
    for await (const batch of tx.unsafe(metric.sql).cursor(customMetricLimits.rows + 1)) {
      out.push(...(batch as CustomRows))
      break
    }
    return out
  })
  return rows as CustomRows
}

/**
 * One metric on ClickHouse: readonly=1 (set last, after the limits it must not be able to change),
 * max_execution_time, and at most rows + 1 result rows (result_overflow_mode break stops reading there).
 */
export async function clickhouseCustomQuery(client: ClickHouseClient, metric: CustomMetricConfig): Promise<CustomRows> {
  const result = await client.query({
    query: metric.sql,
    format: 'JSONEachRow',
    abort_signal: AbortSignal.timeout(metric.timeoutMs + 2_000),
    clickhouse_settings: {
      max_execution_time: Math.max(1, Math.ceil(metric.timeoutMs / 1000)),
      max_result_rows: String(customMetricLimits.rows + 1),
      result_overflow_mode: 'break',
      readonly: '1',
    },
  })
  const rows = await result.json<Record<string, unknown>>()
  return rows.slice(0, customMetricLimits.rows + 1)
}

const unconfigured = (config: Partial<DatabaseConfig>) =>
  config.customMetrics?.length ? undefined : 'no custom_metrics in the config'

export const postgresCustomMetrics = registerCollector<PostgresContext>({
  name: 'custom_metrics',
  engine: 'postgres',
  defaultEnabled: true,
  unconfigured,
  deadlineMs: customDeadlineMs,
  async collect(ctx: PostgresContext) {
    const section = await collectCustom(ctx.customMetrics ?? [], ctx, (m) => postgresCustomQuery(ctx.sql, m))
    return section ? { custom_metrics: section } : {}
  },
})

export const clickhouseCustomMetrics = registerCollector<ClickHouseContext>({
  name: 'custom_metrics',
  engine: 'clickhouse',
  defaultEnabled: true,
  unconfigured,
  deadlineMs: customDeadlineMs,
  async collect(ctx: ClickHouseContext) {
    const section = await collectCustom(ctx.customMetrics ?? [], ctx, (m) => clickhouseCustomQuery(ctx.client, m))
    return section ? { custom_metrics: section } : {}
  },
})
