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
import { chNumber, chString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, severityAbove } from '../../types.ts'
import { count, short, tableSql } from './common.ts'
import { type InsertStatement, describeInsert, figure, insertStatements, perSecond } from './inserts.ts'

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
  engine: 'clickhouse',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(smallInserts)
    const byTable = new Map<string, TableInserts>()
    for (const s of await insertStatements(ctx)) {
      if (s.rows / s.inserts >= t.max_rows_per_insert) continue
      const key = JSON.stringify([s.target.database ?? null, s.target.table])
      const into = byTable.get(key) ?? { database: s.target.database, table: s.target.table, statements: [], inserts: 0, rows: 0, covered_ms: 0 }
      into.statements.push(s)
      into.inserts += s.inserts
      into.rows += s.rows
      into.covered_ms = Math.max(into.covered_ms, s.covered_ms)
      byTable.set(key, into)
    }
    const busy = [...byTable.values()]
      .filter((x) => x.inserts >= t.min_inserts && severityAbove(perSecond(x), t.warning_per_second, t.critical_per_second))
      .sort((a, b) => perSecond(b) - perSecond(a))

    return busy.slice(0, t.max_findings).map((x): FindingDraft => {
      const name = x.database === undefined ? x.table : `${x.database}.${x.table}`
      const rate = perSecond(x)
      const rowsEach = x.rows / x.inserts
      const top = x.statements[0]!
      const target = x.database === undefined ? `table ${x.table} (the statements do not name its database)` : tableSql(x.database, x.table)
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
