// Many small INSERTs into one table: every INSERT writes at least one new part per partition it touches,
// and background merges must fold them together again, so a writer sending a few rows at a time, many
// times a second, fills partitions with parts (ch_parts_per_partition) long before the data is large.
// ClickHouse's documentation asks for batches of at least 1,000 rows (better 10,000 to 100,000), or
// at most about one INSERT a second per table, or async_insert, which lets the server batch them. So:
// the INSERT statements of the last hour (query_log, as the agent sends them), by target table, those
// averaging under 1,000 rows each; a warning from one INSERT a second into the table, critical from ten.
// At least 60 of them, so that a few isolated inserts never count. INSERTs already sent with
// async_insert are batched by the server and would be a false alarm: query_log does not tell, so the
// finding says how to check.
// When query_log recorded no INSERT at all in the hour (it is off, as on many servers, or empty), the
// server-wide counters judge instead, as Altinity's ClickHouseLowInsertedRowsPerQuery does: system.events
// InsertQuery and InsertedRows (sent by server_metrics) over the time they cover, with the same
// thresholds: under max_rows_per_insert rows per INSERT at warning_per_second or more, at least
// min_inserts of them. One finding for the whole server (the counters do not name tables): object
// `server`. InsertedRows also counts rows that materialized views and Buffer flushes write, so the
// figure errs toward bigger inserts, never toward a false alarm.
import type { DoctorContext } from '../../context.ts'
import { minuteFloor } from '../../../store/window.ts'
import { chNumber, chString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, severityAbove } from '../../types.ts'
import { count, short, tableSql } from './common.ts'
import { HOUR_MS, type InsertStatement, describeInsert, figure, insertStatements, perSecond } from './inserts.ts'

const defaults = {
  warning_per_second: 1,
  critical_per_second: 10,
  /** A statement averaging this many rows per INSERT or more is batched well enough. */
  max_rows_per_insert: 1000,
  /** Fewer small INSERTs into a table in the window are not counted. */
  min_inserts: 60,
  /** Tables named one finding each, the busiest first. */
  max_findings: 10,
}

interface TableInserts {
  database?: string
  table: string
  statements: InsertStatement[]
  inserts: number
  rows: number
  covered_ms: number
}

export const smallInserts: Rule<typeof defaults> = {
  id: 'ch_small_inserts',
  summary: 'Many small INSERTs into one table, filling its partitions with parts long before the data is large.',
  collectors: ['query_stats', 'server_metrics'],
  engine: 'clickhouse',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(smallInserts)
    const statements = await insertStatements(ctx)
    if (statements.length === 0) return fromEvents(ctx, t)
    const byTable = new Map<string, TableInserts>()
    for (const s of statements) {
      if (s.rows / s.inserts >= t.max_rows_per_insert) continue
      const key = JSON.stringify([s.target.database ?? null, s.target.table])
      const into = byTable.get(key) ?? {
        database: s.target.database,
        table: s.target.table,
        statements: [],
        inserts: 0,
        rows: 0,
        covered_ms: 0,
      }
      into.statements.push(s)
      into.inserts += s.inserts
      into.rows += s.rows
      into.covered_ms = Math.max(into.covered_ms, s.covered_ms)
      byTable.set(key, into)
    }
    const busy = [...byTable.values()]
      .filter(
        (x) => x.inserts >= t.min_inserts && severityAbove(perSecond(x), t.warning_per_second, t.critical_per_second),
      )
      .sort((a, b) => perSecond(b) - perSecond(a))

    return busy.slice(0, t.max_findings).map((x): FindingDraft => {
      const name = x.database === undefined ? x.table : `${x.database}.${x.table}`
      const rate = perSecond(x)
      const rowsEach = x.rows / x.inserts
      const top = x.statements[0]!
      const target =
        x.database === undefined
          ? `table ${x.table} (the statements do not name its database)`
          : tableSql(x.database, x.table)
      const minutes = Math.round(x.covered_ms / 60_000)
      return {
        severity: severityAbove(rate, t.warning_per_second, t.critical_per_second)!,
        object: name,
        objects: [name],
        title: `Small INSERTs into ${name}: ${figure(rate)} a second, ${figure(rowsEach)} row${rowsEach === 1 ? '' : 's'} each`,
        detail:
          `In the ${minutes >= 60 ? 'last hour' : `last ${minutes} minute${minutes === 1 ? '' : 's'}`} ${target} received ${count(x.inserts)} INSERTs of ${figure(rowsEach)} row${rowsEach === 1 ? '' : 's'} on average ` +
          `(${figure(rate)} a second). Each one writes a new part per partition it touches, which merges must fold together again: at this rate partitions fill with parts ` +
          `(parts_to_delay_insert slows INSERTs down, parts_to_throw_insert refuses them with "Too many parts") and merges use CPU and disk for little data. ` +
          `${x.statements.length === 1 ? 'The statement' : `${x.statements.length} statements; the most frequent`}: ${describeInsert(top, short)}. ` +
          'If the writer already sends them with async_insert = 1, the server batches them into few parts and this can be ignored (the first query below shows it).',
        recommendation:
          'Send fewer, bigger INSERTs: at least 1,000 rows each (10,000 to 100,000 is better), about one a second per table, buffering in the application or in a queue consumer; ' +
          'or let the server batch them with async_insert = 1 and wait_for_async_insert = 1 (the client still learns whether its rows were written).',
        how_to_investigate: [
          `SELECT user, client_hostname, http_user_agent, count() AS inserts, avg(written_rows) AS rows_per_insert, countIf(Settings['async_insert'] = '1') AS async FROM system.query_log WHERE normalized_query_hash = ${chNumber(top.query_hash)} AND type = 'QueryFinish' AND event_time > now() - INTERVAL 1 HOUR GROUP BY user, client_hostname, http_user_agent ORDER BY inserts DESC LIMIT 10;`,
          ...(x.database === undefined
            ? []
            : [
                `SELECT partition_id, count() AS parts, sum(rows) AS rows FROM system.parts WHERE active AND database = ${chString(x.database)} AND table = ${chString(x.table)} GROUP BY partition_id ORDER BY parts DESC LIMIT 10;`,
              ]),
        ],
        how_to_fix: [
          `ALTER USER <the inserting user> SETTINGS async_insert = 1, wait_for_async_insert = 1;   -- the server batches that user's small INSERTs (or SETTINGS async_insert = 1, wait_for_async_insert = 1 on each INSERT)`,
        ],
        metrics: {
          inserts: x.inserts,
          inserts_per_second: Number(rate.toFixed(3)),
          rows_per_insert: Number(rowsEach.toFixed(2)),
          statements: x.statements.length,
          top_insert_hash: top.query_hash,
        },
      }
    })
  },
}

/** The last hour's InsertQuery / InsertedRows deltas (server_metrics) and the milliseconds they cover. */
async function insertEvents(
  ctx: DoctorContext,
): Promise<{ inserts: number; rows: number; covered_ms: number } | undefined> {
  const points = await ctx.once('clickhouse:insert-events', () =>
    ctx.store.clickhouse.metricSeries(ctx.db.id, 'server', {
      since: ctx.now - HOUR_MS,
      until: ctx.now,
      minuteFloor: minuteFloor(ctx.now),
      bucketSeconds: 60,
    }),
  )
  let inserts = 0
  let rows = 0
  let first: number | undefined
  for (const p of points) {
    if (p.values.insert_queries === undefined) continue
    first ??= p.ts
    inserts += p.values.insert_queries
    rows += p.values.inserted_rows ?? 0
  }
  return first === undefined
    ? undefined
    : { inserts, rows, covered_ms: Math.max(60_000, Math.min(HOUR_MS, ctx.now - first)) }
}

/** Small inserts judged from system.events, for a server whose query_log recorded no INSERT in the hour. */
async function fromEvents(ctx: DoctorContext, t: typeof defaults): Promise<FindingDraft[]> {
  const x = await insertEvents(ctx)
  if (!x || x.inserts < t.min_inserts) return []
  const rowsEach = x.rows / x.inserts
  const rate = perSecond(x)
  const severity =
    rowsEach < t.max_rows_per_insert ? severityAbove(rate, t.warning_per_second, t.critical_per_second) : undefined
  if (!severity) return []
  const minutes = Math.round(x.covered_ms / 60_000)
  const window = minutes >= 60 ? 'the last hour' : `the last ${minutes} minute${minutes === 1 ? '' : 's'}`
  return [
    {
      severity,
      object: 'server',
      title: `Small INSERTs: ${figure(rate)} a second, ${figure(rowsEach)} row${figure(rowsEach) === '1' ? '' : 's'} each`,
      detail:
        `In ${window} the server ran ${count(x.inserts)} INSERTs that wrote ${count(x.rows)} rows, ${figure(rowsEach)} each on average, ${figure(rate)} a second ` +
        `(system.events InsertQuery and InsertedRows: query_log recorded no INSERT, so the tables are not known; a warning from ${figure(t.warning_per_second)} a second under ${count(t.max_rows_per_insert)} rows each, critical from ${figure(t.critical_per_second)}). ` +
        'Each INSERT writes a new part per partition it touches, which merges must fold together again: partitions fill with parts and merges use CPU and disk for little data. ' +
        'INSERTs sent with async_insert are batched by the server and count here too (AsyncInsertQuery, first query below).',
      recommendation:
        'Send fewer, bigger INSERTs: at least 1,000 rows each (10,000 to 100,000 is better), about one a second per table; or let the server batch them with async_insert = 1 and wait_for_async_insert = 1. Enable query_log to see which tables and clients send them.',
      how_to_investigate: [
        "SELECT event, value FROM system.events WHERE event IN ('InsertQuery', 'AsyncInsertQuery', 'InsertedRows');",
        'SELECT database, table, count() AS parts, max(modification_time) AS newest FROM system.parts WHERE active AND modification_time > now() - INTERVAL 10 MINUTE GROUP BY database, table ORDER BY parts DESC LIMIT 10;   -- the tables that receive new parts',
        "SELECT database, table, count() AS new_parts, avg(rows) AS rows_each FROM system.part_log WHERE event_type = 'NewPart' AND event_time > now() - INTERVAL 1 HOUR GROUP BY database, table ORDER BY new_parts DESC LIMIT 10;   -- where part_log is on",
      ],
      how_to_fix: [
        "ALTER USER <the inserting user> SETTINGS async_insert = 1, wait_for_async_insert = 1;   -- the server batches that user's small INSERTs",
      ],
      metrics: {
        inserts: x.inserts,
        inserted_rows: x.rows,
        inserts_per_second: Number(rate.toFixed(3)),
        rows_per_insert: Number(rowsEach.toFixed(2)),
        source: 'events',
      },
    },
  ]
}
