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
import { SIZES_MAX_AGE_MS, TABLES_READ, type TablesRead } from './tables.ts'
import { PREPARED } from '../../own-statements.ts'

const MAX_INDEXES = 10_000
/** Every this many cycles all definitions are deparsed again (a renamed column shows up then). */
const DEFINITION_REFRESH_CYCLES = 30

const COUNTERS = INDEX_COUNTERS
type IndexCounters = Counters<(typeof COUNTERS)[number]>

// Sizing an index waits for an ACCESS EXCLUSIVE lock on it (REINDEX, DROP INDEX), and pg_get_indexdef
// for one on its table (ALTER TABLE, VACUUM FULL, TRUNCATE, LOCK TABLE). An index whose table or itself
// is so locked, held or awaited, is reported without a size this cycle and with the definition seen in
// an earlier cycle (empty if none), rather than the collector waiting out its deadline.
// Sizes are read only for the indexes whose fingerprint moved (SIZES_SQL): the index's file and what
// grows it, its table's rows inserted and updated, (auto)vacuums and (auto)analyzes (a GIN index's
// pending list is merged then), and every index at least every SIZES_MAX_AGE_MS. Reading the 1,000
// sizes every cycle was most of this collector's 30 ms of database time (1,000 indexes, PostgreSQL 17).
// The counters and gauges are the index family's (src/shared/families.ts), as this server version has
// them; size_bytes is null here and filled from the sizes.
const BUSY = `
    SELECT l.relation FROM pg_locks l
    WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// The table's part of the fingerprint comes from the tables collector's read of this cycle when it ran
// before (TABLES_READ: six function calls per index fewer, 2-3 ms a cycle with 1,000 indexes), else
// from the functions here (withTable).
const statsSqlFor = (major: number, withTable: boolean) => `
  WITH busy AS (${BUSY})
  SELECT s.indexrelid, s.relid::int8::text AS relid, s.schemaname, s.relname, s.indexrelname, ${pgSelectList(INDEX_FIELDS, major, 's.')},
         (s.indexrelid IN (SELECT relation FROM busy) OR s.relid IN (SELECT relation FROM busy)) AS busy,
         i.indisunique, i.indisprimary, i.indisvalid, pg_relation_filenode(s.indexrelid)::text AS filenode,
         ${
           withTable
             ? `concat_ws(',', pg_stat_get_tuples_inserted(s.relid), pg_stat_get_tuples_updated(s.relid),
                  pg_stat_get_vacuum_count(s.relid), pg_stat_get_autovacuum_count(s.relid),
                  pg_stat_get_analyze_count(s.relid), pg_stat_get_autoanalyze_count(s.relid))`
             : 'NULL::text'
         } AS table_fingerprint
  FROM (SELECT s.*, NULL::int8 AS size_bytes FROM pg_stat_user_indexes s) s
  JOIN pg_index i ON i.indexrelid = s.indexrelid`

/** Sizes of the indexes named by $1 (an array literal of OIDs, joined: `= ANY` compares every row with every element) but busy ones (none returned for those, nor for dropped ones). */
const SIZES_SQL = `
  WITH busy AS (${BUSY})
  SELECT i.indexrelid, pg_relation_size(i.indexrelid) AS size_bytes
  FROM unnest($1::text::oid[]) AS u(oid)
  JOIN pg_index i ON i.indexrelid = u.oid
  WHERE i.indexrelid NOT IN (SELECT relation FROM busy) AND i.indrelid NOT IN (SELECT relation FROM busy)`

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

/** The sizes of the last reading (a cache: not staged with the counters, and never saved). */
interface Sizes {
  /** When every index was last sized (epoch ms). */
  at: number
  /** By indexrelid: the fingerprint the size was read at, and the size. */
  indexes: Map<number, { fingerprint: string; bytes: string }>
}
const SIZES = 'cache:indexes:sizes'

type Row = Record<(typeof COUNTERS)[number] | (typeof INDEX_GAUGES)[number], string | null> & {
  indexrelid: number
  schemaname: string
  relname: string
  indexrelname: string
  busy: boolean
  indisunique: boolean
  indisprimary: boolean
  indisvalid: boolean
  relid: string
  filenode: string | null
  table_fingerprint: string | null
  /** What moves the index's size (null when unknown: the size is read, and not kept for the next cycle). */
  fingerprint: string | null
}

/** Byte order of the UTF-8 text, as PostgreSQL orders `name` (C collation). */
const byBytes = (a: string, b: string) => (a === b ? 0 : Buffer.compare(Buffer.from(a), Buffer.from(b)))

export const indexes = registerCollector<PostgresContext>({
  name: 'indexes',
  engine: 'postgres',
  defaultEnabled: true,
  cadence: 'object_stats',
  async collect(ctx) {
    const state = (ctx.state.get('indexes') as State | undefined) ?? { cycle: 0, indexes: new Map<number, Known>() }
    const refresh = state.cycle % DEFINITION_REFRESH_CYCLES === 0
    const kept = ctx.state.get(SIZES) as Sizes | undefined
    const known =
      kept && ctx.now - kept.at < SIZES_MAX_AGE_MS ? kept : { at: ctx.now, indexes: new Map() as Sizes['indexes'] }
    const shared = ctx.state.get(TABLES_READ) as TablesRead | undefined
    const fromTables = shared && shared.at === ctx.now ? shared.writes : undefined
    const read = await ctx.sql.unsafe<Row[]>(statsSqlFor(ctx.major, fromTables === undefined), [], PREPARED)
    for (const r of read) {
      const table = fromTables ? fromTables.get(r.relid) : r.table_fingerprint
      r.fingerprint =
        table === undefined || table === null ? null : `${fromTables ? 't' : 'f'},${r.filenode ?? ''},${table}`
    }
    const sizedBefore = (r: Row) => known.indexes.get(r.indexrelid)
    const unsized = read.filter(
      (r) => !r.busy && (r.fingerprint === null || sizedBefore(r)?.fingerprint !== r.fingerprint),
    )
    const fresh = new Map<number, string>()
    if (unsized.length > 0) {
      for (const z of await ctx.sql.unsafe<{ indexrelid: number; size_bytes: string | null }[]>(SIZES_SQL, [
        `{${unsized.map((r) => r.indexrelid).join(',')}}`,
      ])) {
        if (z.size_bytes !== null) fresh.set(z.indexrelid, String(z.size_bytes))
      }
    }
    const unsizedIds = new Set(unsized.map((r) => r.indexrelid))
    for (const r of read)
      r.size_bytes = r.busy
        ? null
        : unsizedIds.has(r.indexrelid)
          ? (fresh.get(r.indexrelid) ?? null)
          : sizedBefore(r)!.bytes
    // The largest first (one without a size last), then by schema and index name as PostgreSQL orders names.
    const rows = read
      .sort((a, b) =>
        a.size_bytes !== b.size_bytes
          ? a.size_bytes === null
            ? 1
            : b.size_bytes === null
              ? -1
              : Number(b.size_bytes) - Number(a.size_bytes)
          : byBytes(a.schemaname, b.schemaname) || byBytes(a.indexrelname, b.indexrelname),
      )
      .slice(0, MAX_INDEXES)
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
    const sized: Sizes['indexes'] = new Map()
    const stats: IndexStat[] = rows.map((r) => {
      const counters = Object.fromEntries(COUNTERS.map((k) => [k, num(r[k])])) as IndexCounters
      const before = state.indexes.get(r.indexrelid)
      const deparsed = definitions.get(r.indexrelid)
      const indexDef = deparsed ?? before?.indexDef ?? ''
      if (r.size_bytes !== null && r.fingerprint !== null)
        sized.set(r.indexrelid, { fingerprint: r.fingerprint, bytes: r.size_bytes })
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
    ctx.state.set(SIZES, { at: known.at, indexes: sized } satisfies Sizes)
    return { indexes: stats }
  },
})
