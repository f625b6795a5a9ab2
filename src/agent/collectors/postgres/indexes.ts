// indexes: per-index statistics of the connected database (pg_stat_user_indexes with pg_index flags,
// definition and size) for the 10,000 largest indexes; counters also as deltas since the previous
// sample (null on an index's first sample). Definitions are remembered between cycles: deparsing them
// is most of this collector's cost, and they change only through renames.
import { INDEX_COUNTERS, INDEX_FIELDS, INDEX_GAUGES, pgSelectList } from '../../../shared/families.ts'
import type { IndexStat } from '../../../shared/wire.ts'
import { deltaOf, num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import type { Counters } from './common.ts'

const MAX_INDEXES = 10_000
/** Every this many cycles all definitions are deparsed again (a renamed column shows up then). */
const DEFINITION_REFRESH_CYCLES = 30

const COUNTERS = INDEX_COUNTERS
type IndexCounters = Counters<(typeof COUNTERS)[number]>

// Sizing an index waits for an ACCESS EXCLUSIVE lock on it (REINDEX, DROP INDEX), and pg_get_indexdef
// for one on its table (ALTER TABLE, VACUUM FULL, TRUNCATE, LOCK TABLE). An index whose table or itself
// is so locked, held or awaited, is reported without a size this cycle and with the definition seen in
// an earlier cycle (empty if none), rather than the collector waiting out its deadline.
// The counters and gauges are the index family's (src/shared/families.ts), as this server version has them.
const statsSqlFor = (major: number) => `
  WITH busy AS (
    SELECT l.relation FROM pg_locks l
    WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  ), checked AS (
    SELECT s.*, (s.indexrelid IN (SELECT relation FROM busy) OR s.relid IN (SELECT relation FROM busy)) AS busy
    FROM pg_stat_user_indexes s
  ), sized AS (
    SELECT c.*, CASE WHEN NOT c.busy THEN pg_relation_size(c.indexrelid) END AS size_bytes
    FROM checked c
  )
  SELECT s.indexrelid, s.schemaname, s.relname, s.indexrelname, ${pgSelectList(INDEX_FIELDS, major, 's.')},
         s.busy, i.indisunique, i.indisprimary, i.indisvalid
  FROM sized s
  JOIN pg_index i ON i.indexrelid = s.indexrelid
  ORDER BY s.size_bytes DESC NULLS LAST, s.schemaname, s.indexrelname
  LIMIT $1`

/** Definitions of the indexes named by $1, an array literal of OIDs. */
const DEFINITIONS_SQL = `
  SELECT u.oid AS indexrelid, pg_get_indexdef(u.oid) AS index_def
  FROM unnest($1::text::oid[]) AS u(oid)`

interface Known {
  counters: IndexCounters
  /** "oid/schema/table/index" when the definition was deparsed. */
  defKey: string
  indexDef: string
}

interface State {
  cycle: number
  indexes: Map<number, Known>
}

type Row = Record<(typeof COUNTERS)[number] | (typeof INDEX_GAUGES)[number], string | null> & {
  indexrelid: number
  schemaname: string
  relname: string
  indexrelname: string
  busy: boolean
  indisunique: boolean
  indisprimary: boolean
  indisvalid: boolean
}

export const indexes = registerCollector<PostgresContext>({
  name: 'indexes',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const state = (ctx.state.get('indexes') as State | undefined) ?? { cycle: 0, indexes: new Map<number, Known>() }
    const refresh = state.cycle % DEFINITION_REFRESH_CYCLES === 0
    const rows = await ctx.sql.unsafe<Row[]>(statsSqlFor(ctx.major), [MAX_INDEXES])
    const keyOf = (r: Row) => `${r.indexrelid}/${r.schemaname}/${r.relname}/${r.indexrelname}`
    // Deparsed again: indexes not seen before, renamed ones (index, table or schema), all of them now and then.
    const stale = rows.filter((r) => !r.busy && (refresh || state.indexes.get(r.indexrelid)?.defKey !== keyOf(r)))
    const definitions = new Map<number, string | null>()
    if (stale.length > 0) {
      const found = await ctx.sql.unsafe<{ indexrelid: number; index_def: string | null }[]>(DEFINITIONS_SQL, [
        `{${stale.map((r) => r.indexrelid).join(',')}}`,
      ])
      for (const d of found) definitions.set(d.indexrelid, d.index_def)
    }
    const current = new Map<number, Known>()
    const stats: IndexStat[] = rows.map((r) => {
      const counters = Object.fromEntries(COUNTERS.map((k) => [k, num(r[k])])) as IndexCounters
      const before = state.indexes.get(r.indexrelid)
      const deparsed = definitions.get(r.indexrelid)
      const indexDef = deparsed ?? before?.indexDef ?? ''
      current.set(r.indexrelid, { counters, defKey: deparsed ? keyOf(r) : (before?.defKey ?? ''), indexDef })
      return {
        schema_name: r.schemaname,
        table_name: r.relname,
        index_name: r.indexrelname,
        ...counters,
        ...(Object.fromEntries(INDEX_GAUGES.map((k) => [k, num(r[k])])) as Counters<(typeof INDEX_GAUGES)[number]>),
        index_def: indexDef,
        is_unique: r.indisunique,
        is_primary: r.indisprimary,
        is_valid: r.indisvalid,
        delta: deltaOf(before?.counters, counters),
      }
    })
    ctx.state.set('indexes', { cycle: state.cycle + 1, indexes: current } satisfies State)
    return { indexes: stats }
  },
})
