// tables: per-table statistics of the connected database (pg_stat_user_tables) with sizes, whether
// a primary key exists and whether autovacuum is on for the table, for the largest tables up to the
// batch's cap on them (src/shared/ingest-limits.ts; the runner splits a batch that is too big to send);
// counters also as deltas since the previous sample (null on a table's first sample). Also the
// sequences (pg_sequences' columns) with the share of their range used, the 1,000 most used.
import { TABLE_COUNTERS, TABLE_FIELDS, TABLE_GAUGES, pgSelectList } from '../../../shared/families.ts'
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import type { SequenceStat, TableStat } from '../../../shared/wire.ts'
import { deltaOf, epoch, num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { type Counters, catalogSignal } from './common.ts'
import { PREPARED } from '../../own-statements.ts'

const MAX_TABLES = ingestMaxItems.tables
/** How long sizes read for a fingerprint are reused at most: then every table is sized again. */
export const SIZES_MAX_AGE_MS = 5 * 60_000
/** The sizes of the last reading (a cache: not staged with the counters, and never saved). */
const SIZES = 'cache:tables:sizes'

interface SizedTable {
  fingerprint: string
  /** table_size_bytes, index_size_bytes, heap_bytes, toast_bytes as PostgreSQL's text of int8. */
  sizes: [string, string, string, string]
}

interface Sizes {
  /** When every table was last sized (epoch ms). */
  at: number
  /** By relid. */
  tables: Map<string, SizedTable>
}
const MAX_SEQUENCES = 1_000

const COUNTERS = TABLE_COUNTERS
type TableCounters = Counters<(typeof COUNTERS)[number]>

// The collector runs on the object statistics' cadence (object_stats_interval, once a minute by
// default: runner.ts, cadenceDue), its counters' deltas covering the time since its last run, and so do
// indexes, bloat and column_stats, which take this read of the cycle (TABLES_READ, SEQ_READ).
// The table statistics are read at each run from pg_stat_user_tables alone (STATS_SQL); what the
// catalogs say of each table, which changes only with DDL, is read again only when the catalogs moved
// (FACTS_SQL under catalogSignal, common.ts); sizes only for the tables whose fingerprint moved
// (SIZES_SQL). The three were one statement that read all of it every cycle: 134 ms of the agent's
// database time per cycle with 1,000 tables on PostgreSQL 17 (EXPLAIN ANALYZE: 3,000 runs of the
// per-table index subquery, pg_options_to_table over pg_class), against 10 ms for the statistics
// alone, 2.5 ms for the signal and 18 ms for the facts when they are read (bench/RESULTS.md, Agent).
// The counters and gauges are the table family's (src/shared/families.ts), as this server version has
// them; the size gauges are null here and filled from the sizes below. busy: see SIZES_SQL.
const statsSqlFor = (major: number) => `
  WITH busy AS (${BUSY_TABLES})
  SELECT relid, schemaname, relname, vacuum_count, autovacuum_count,
         ${pgSelectList(TABLE_FIELDS, major)},
         last_vacuum, last_autovacuum, last_analyze, last_autoanalyze,
         relid IN (SELECT relid FROM busy) AS busy
  FROM (SELECT s.*, NULL::int8 AS table_size_bytes, NULL::int8 AS index_size_bytes, NULL::int8 AS heap_bytes, NULL::int8 AS toast_bytes
        FROM pg_stat_user_tables s) s`

// The tables under an ACCESS EXCLUSIVE lock, held or awaited, on them, their TOAST table or an index.
const BUSY_TABLES = `
    SELECT coalesce(i.indrelid, t.oid, l.relation) AS relid
    FROM pg_locks l
    LEFT JOIN pg_index i ON i.indexrelid = l.relation
    LEFT JOIN pg_class t ON t.reltoastrelid = l.relation
    WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// What the catalogs say of each table of pg_stat_user_tables (the view's relkinds and schemas): its
// files and its indexes' (the part of the size fingerprint that DDL moves), whether it has a primary
// key, and whether autovacuum is on for it. autovacuum_enabled is false when the table's storage
// parameters turn autovacuum off for it or for its TOAST table (ALTER TABLE ... SET
// (toast.autovacuum_enabled = false) is stored on the TOAST table); the values are read as PostgreSQL
// reads them (off, no, 0, f ...) by the boolean cast.
const FACTS_SQL = `
  SELECT c.oid AS relid, concat_ws(',', c.relfilenode, t.relfilenode) AS files, ix.files AS index_files,
         coalesce(ix.primary_key, false) AS has_primary_key,
         CASE WHEN c.reloptions IS NULL AND t.reloptions IS NULL THEN true ELSE NOT EXISTS (
           SELECT 1 FROM pg_options_to_table(c.reloptions) WHERE option_name = 'autovacuum_enabled' AND NOT option_value::boolean
           UNION ALL
           SELECT 1 FROM pg_options_to_table(t.reloptions) WHERE option_name = 'autovacuum_enabled' AND NOT option_value::boolean
         ) END AS autovacuum_enabled
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
  LEFT JOIN (
    SELECT i.indrelid, string_agg(ic.relfilenode::text, ',' ORDER BY ic.oid) AS files, bool_or(i.indisprimary) AS primary_key
    FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
    GROUP BY i.indrelid
  ) ix ON ix.indrelid = c.oid
  WHERE c.relkind IN ('r', 't', 'm', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'`

// The sizes of the tables named by $1 (an array literal of OIDs; joined, not `= ANY`, which compares
// each row of pg_class with every element: 10,000 tables ran past the statement timeout). Sizing a relation takes an ACCESS
// SHARE lock on it and its indexes, so a table that someone holds or awaits an ACCESS EXCLUSIVE lock on
// (ALTER TABLE, VACUUM FULL, TRUNCATE, REINDEX of an index) is not sized this cycle: its sizes are null
// rather than the collector waiting out its deadline (and so is one dropped since: no row).
// Sizes are file sizes (stat calls, no reads): the heap's main fork (pg_relation_size), the TOAST
// table with its index (pg_total_relation_size of reltoastrelid, 0 for a table without one), and
// pg_table_size and pg_indexes_size, whose sum is pg_total_relation_size. With 1,000 tables that is a
// few thousand stat calls, which were most of the agent's database time per cycle: a table's sizes are
// read again only when its fingerprint moved (its and its TOAST table's and indexes' files, rows
// inserted, updated or deleted, vacuums: what changes a file's size) and at least every SIZES_MAX_AGE_MS
// (what no counter shows yet: an open transaction's writes); otherwise the sizes of the last reading
// are sent, and a table busy now is sent without sizes all the same.
const SIZES_SQL = `
  WITH busy AS (${BUSY_TABLES})
  SELECT c.oid AS relid, pg_table_size(c.oid) AS table_size, pg_indexes_size(c.oid) AS index_size, pg_relation_size(c.oid) AS heap,
         CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END AS toast
  FROM unnest($1::text::oid[]) AS u(oid)
  JOIN pg_class c ON c.oid = u.oid
  WHERE c.oid NOT IN (SELECT relid FROM busy)`

interface TableFacts {
  files: string
  index_files: string | null
  has_primary_key: boolean
  autovacuum_enabled: boolean
}

/** The facts of the last reading, by relid, with the catalog signal they were read under (a cache, never saved). */
interface Facts {
  signal: string
  tables: Map<string, TableFacts>
}
const FACTS = 'cache:tables:facts'

/**
 * The tables read by sequential scans in this cycle's statistics, for column_stats (which runs after
 * tables in the same cycle) to pick its tables from rather than read pg_stat_user_tables again: a
 * cache taken once, at the cycle whose `now` it carries.
 */
export const SEQ_READ = 'cache:tables:seq_read'
export interface SeqRead {
  at: number
  tables: { relid: string; schemaname: string; relname: string; seq_tup_read: string; analyzed: string }[]
}

/**
 * What this cycle's statistics read tells the collectors that run after tables in the same cycle
 * (indexes, bloat), so that they need not ask PostgreSQL again: a cache taken once, at the cycle whose
 * `now` it carries, of the catalog fingerprint read before the statistics and, for every table of
 * pg_stat_user_tables, what moves its indexes' sizes.
 */
export const TABLES_READ = 'cache:tables:read'
export interface TablesRead {
  at: number
  /** catalogSignal (common.ts) as read before the statistics. */
  signal: string
  /** A hash of every table's (auto)vacuum counts and last (auto)analyze: moves when any table is vacuumed or analyzed. */
  maintained: string
  /**
   * By relid: rows inserted and updated, (auto)vacuums and the last (auto)analyze of the table, what
   * grows its indexes (the indexes collector's size fingerprint).
   */
  writes: Map<string, string>
}

/** The later of a table's last analyze and autoanalyze as epoch ms text ('' when never), as column_stats' TOP_TABLES_SQL gives it. */
export const analyzedOf = (a: Date | null, b: Date | null): string => {
  const times = [a, b].filter((d): d is Date => d !== null).map((d) => d.getTime())
  return times.length > 0 ? String(Math.max(...times)) : ''
}

/** Byte order of the UTF-8 text, as PostgreSQL orders `name` (C collation). */
export const byBytes = (a: string, b: string) => (a === b ? 0 : Buffer.compare(Buffer.from(a), Buffer.from(b)))

// pg_sequences' columns, read as that view does but skipping, rather than waiting for, a sequence
// locked against reading its last value (ALTER SEQUENCE in an open transaction), one without
// SELECT/USAGE for the agent, and unlogged ones on a standby. The range used is measured against
// the type of the column it feeds when that is narrower (a bigint sequence feeding an integer column),
// whether the column owns it or only calls it in its DEFAULT.
const SEQUENCES_SQL = `
  WITH busy AS (
    SELECT l.relation FROM pg_locks l
    WHERE l.locktype = 'relation' AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  ), seqs AS (
    SELECT c.oid, n.nspname, c.relname, s.seqtypid::regtype::text AS data_type, s.seqmin, s.seqmax, s.seqincrement,
           CASE WHEN c.oid NOT IN (SELECT relation FROM busy) AND has_sequence_privilege(c.oid, 'SELECT,USAGE')
                     AND (c.relpersistence = 'p' OR NOT pg_is_in_recovery())
                THEN pg_sequence_last_value(c.oid) END AS last_value
    FROM pg_sequence s
    JOIN pg_class c ON c.oid = s.seqrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE NOT pg_is_other_temp_schema(n.oid)
  ), fed AS (
    -- The columns a sequence feeds: by ownership (serial, identity, OWNED BY: the sequence depends on
    -- the column) and by a column DEFAULT that calls it (nextval('s'): the default's expression depends
    -- on the sequence), with or without OWNED BY.
    SELECT d.objid AS seqid, d.refobjid AS relid, d.refobjsubid AS attnum, 0 AS by_default
    FROM pg_depend d
    WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') AND d.refobjsubid > 0
    UNION ALL
    SELECT d.refobjid, ad.adrelid, ad.adnum, 1
    FROM pg_depend d
    JOIN pg_attrdef ad ON ad.oid = d.objid
    WHERE d.classid = 'pg_attrdef'::regclass AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'n'
  ), owned AS (
    -- One column per sequence: the narrowest, which runs out first; an owning one before a default's.
    SELECT DISTINCT ON (f.seqid) f.seqid AS objid, tn.nspname AS table_schema, t.relname AS table_name, a.attname AS column_name,
           format_type(a.atttypid, a.atttypmod) AS column_type,
           CASE a.atttypid WHEN 'int2'::regtype THEN 32767 WHEN 'int4'::regtype THEN 2147483647 END AS column_max
    FROM fed f
    JOIN pg_class t ON t.oid = f.relid
    JOIN pg_namespace tn ON tn.oid = t.relnamespace
    JOIN pg_attribute a ON a.attrelid = f.relid AND a.attnum = f.attnum AND NOT a.attisdropped
    WHERE f.seqid IN (SELECT oid FROM seqs)
    ORDER BY f.seqid, column_max NULLS LAST, f.by_default, tn.nspname, t.relname, a.attname
  ), bounded AS (
    SELECT s.*, o.table_schema, o.table_name, o.column_name, o.column_type,
           least(s.seqmax, coalesce(o.column_max, s.seqmax)) AS upper,
           greatest(s.seqmin, coalesce(-o.column_max - 1, s.seqmin)) AS lower
    FROM seqs s LEFT JOIN owned o ON o.objid = s.oid
  )
  SELECT nspname, relname, data_type, last_value, seqmax AS max_value, seqincrement AS increment_by,
         table_schema, table_name, column_name, column_type,
         (CASE WHEN seqincrement > 0 THEN (last_value - seqmin)::numeric / nullif(upper - seqmin, 0)
               ELSE (seqmax - last_value)::numeric / nullif(seqmax - lower, 0) END)::float8 AS used_ratio
  FROM bounded
  ORDER BY used_ratio DESC NULLS LAST, nspname, relname
  LIMIT ${MAX_SEQUENCES}`

type SequenceRow = {
  nspname: string
  relname: string
  data_type: string
  last_value: string | null
  max_value: string
  increment_by: string
  table_schema: string | null
  table_name: string | null
  column_name: string | null
  column_type: string | null
  used_ratio: number | string | null
}

function sequenceStat(r: SequenceRow): SequenceStat {
  return {
    schema_name: r.nspname,
    sequence_name: r.relname,
    data_type: r.data_type,
    last_value: num(r.last_value),
    max_value: num(r.max_value) ?? 0,
    increment_by: num(r.increment_by) ?? 1,
    used_ratio: num(r.used_ratio),
    owned_by:
      r.table_schema !== null && r.table_name !== null && r.column_name !== null && r.column_type !== null
        ? {
            schema_name: r.table_schema,
            table_name: r.table_name,
            column_name: r.column_name,
            column_type: r.column_type,
          }
        : null,
  }
}

type Row = Record<(typeof COUNTERS)[number] | (typeof TABLE_GAUGES)[number], string | null> & {
  relid: number
  schemaname: string
  relname: string
  vacuum_count: string | null
  autovacuum_count: string | null
  last_vacuum: Date | null
  last_autovacuum: Date | null
  last_analyze: Date | null
  last_autoanalyze: Date | null
  busy: boolean
}

interface SizeRow {
  relid: number
  table_size: string | null
  index_size: string | null
  heap: string | null
  toast: string | null
}

/** The facts of every table, read again when the catalogs moved or a table is not among them. */
async function factsOf(ctx: PostgresContext, signal: string, rows: Row[]): Promise<Map<string, TableFacts>> {
  const kept = ctx.state.get(FACTS) as Facts | undefined
  if (kept && kept.signal === signal && rows.every((r) => kept.tables.has(String(r.relid)))) return kept.tables
  const read = await ctx.sql.unsafe<(TableFacts & { relid: number })[]>(FACTS_SQL)
  const tables = new Map(read.map(({ relid, ...facts }) => [String(relid), facts]))
  ctx.state.set(FACTS, { signal, tables } satisfies Facts)
  return tables
}

// Sequences the agent's role may not read (no SELECT or USAGE: pg_monitor alone) have no last value,
// so the sequence checks cannot see them: logged once per count, and counted in the health status.
const UNREADABLE_SEQUENCES_SQL = `
  SELECT count(*)::int AS n FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE NOT pg_is_other_temp_schema(n.oid)
    AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege(c.oid, 'SELECT,USAGE') ELSE false END`

async function reportUnreadableSequences(ctx: PostgresContext): Promise<void> {
  const [row] = await ctx.sql.unsafe<{ n: number }[]>(UNREADABLE_SEQUENCES_SQL, [], PREPARED)
  const unreadable = row?.n ?? 0
  const warned = ctx.state.get('tables:unreadable_sequences') as number | undefined
  if (unreadable === 0) {
    ctx.notes.delete('tables')
    ctx.state.delete('tables:unreadable_sequences')
    return
  }
  const fix = ctx.major >= 14 ? 'grant pg_read_all_data' : 'grant SELECT on the sequences'
  ctx.notes.set('tables', `${unreadable} sequences unreadable (${fix})`)
  if (warned !== unreadable) {
    ctx.log.warn('sequences unreadable by the agent role: their use is not checked', {
      database: ctx.name,
      collector: 'tables',
      unreadable,
      fix:
        ctx.major >= 14
          ? 'GRANT pg_read_all_data TO <agent role>'
          : 'GRANT SELECT ON ALL SEQUENCES IN SCHEMA <schema> TO <agent role>',
    })
  }
  ctx.state.set('tables:unreadable_sequences', unreadable)
}

/**
 * Foreign keys whose referencing columns are not the leading columns of any valid index: a DELETE or
 * key UPDATE on the referenced table then scans the referencing table once per row, and joins on the
 * key cannot use an index. The largest referencing tables first.
 */
const UNINDEXED_FOREIGN_KEYS_SQL = `
  SELECT n.nspname AS schema_name, c.relname AS table_name, con.conname AS constraint_name,
         to_json(ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(attnum, ord)
               JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum ORDER BY k.ord)) AS columns,
         con.confrelid::regclass::text AS referenced_table,
         pg_relation_size(c.oid) AS table_size_bytes,
         s.n_live_tup
  FROM pg_constraint con
  JOIN pg_class c ON c.oid = con.conrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
  WHERE con.contype = 'f'
    AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
    AND NOT EXISTS (
      SELECT 1 FROM pg_index i
      WHERE i.indrelid = con.conrelid AND i.indisvalid
        AND (i.indkey::int2[])[0:cardinality(con.conkey) - 1] @> con.conkey
        AND (i.indkey::int2[])[0:cardinality(con.conkey) - 1] <@ con.conkey)
  ORDER BY pg_relation_size(c.oid) DESC, n.nspname, c.relname, con.conname
  LIMIT ${MAX_SEQUENCES}`

interface ForeignKeyRow {
  schema_name: string
  table_name: string
  constraint_name: string
  columns: string[]
  referenced_table: string
  table_size_bytes: number | string | null
  n_live_tup: number | string | null
}

export const tables = registerCollector<PostgresContext>({
  name: 'tables',
  engine: 'postgres',
  defaultEnabled: true,
  cadence: 'object_stats',
  async collect(ctx) {
    const kept = ctx.state.get(SIZES) as Sizes | undefined
    const known =
      kept && ctx.now - kept.at < SIZES_MAX_AGE_MS ? kept : { at: ctx.now, tables: new Map<string, SizedTable>() }
    // The signal before the statistics, the facts after them: facts at least as new as the signal, and
    // every table of the statistics among them but one dropped in between (left out, as it is gone).
    const signal = await catalogSignal(ctx)
    const read = await ctx.sql.unsafe<Row[]>(statsSqlFor(ctx.major), [], PREPARED)
    const facts = await factsOf(ctx, signal, read)
    const fingerprints = new Map<string, string>()
    const all = read.filter((r) => {
      const f = facts.get(String(r.relid))
      if (!f) return false
      const counters = [r.n_tup_ins, r.n_tup_upd, r.n_tup_del, r.vacuum_count, r.autovacuum_count]
        .map((v) => v ?? '')
        .join(',')
      fingerprints.set(String(r.relid), `${f.files},${counters}${f.index_files === null ? '' : `,${f.index_files}`}`)
      return true
    })
    const writes = new Map<string, string>()
    const maintenance: string[] = []
    for (const r of read) {
      const vacuums = `${r.vacuum_count ?? ''},${r.autovacuum_count ?? ''}`
      const analyzed = analyzedOf(r.last_analyze, r.last_autoanalyze)
      writes.set(String(r.relid), `${r.n_tup_ins ?? ''},${r.n_tup_upd ?? ''},${vacuums},${analyzed}`)
      maintenance.push(`${r.relid}:${vacuums},${analyzed}`)
    }
    ctx.state.set(TABLES_READ, {
      at: ctx.now,
      signal,
      maintained: Bun.hash(maintenance.sort().join('/')).toString(36),
      writes,
    } satisfies TablesRead)
    ctx.state.set(SEQ_READ, {
      at: ctx.now,
      tables: all
        .filter((r) => r.seq_tup_read !== null && BigInt(r.seq_tup_read) > 0n)
        .map((r) => ({
          relid: String(r.relid),
          schemaname: r.schemaname,
          relname: r.relname,
          seq_tup_read: r.seq_tup_read!,
          analyzed: analyzedOf(r.last_analyze, r.last_autoanalyze),
        })),
    } satisfies SeqRead)
    const stale = all.filter(
      (r) => !r.busy && known.tables.get(String(r.relid))?.fingerprint !== fingerprints.get(String(r.relid)),
    )
    const fresh = new Map<string, SizedTable['sizes']>()
    if (stale.length > 0) {
      for (const z of await ctx.sql.unsafe<SizeRow[]>(SIZES_SQL, [`{${stale.map((r) => r.relid).join(',')}}`])) {
        const sizes = [z.table_size, z.index_size, z.heap, z.toast].map((v) => (v === null ? null : String(v)))
        if (sizes.every((v) => v !== null)) fresh.set(String(z.relid), sizes as SizedTable['sizes'])
      }
    }
    const staleIds = new Set(stale.map((r) => String(r.relid)))
    for (const r of all) {
      const relid = String(r.relid)
      const sizes = r.busy ? undefined : staleIds.has(relid) ? fresh.get(relid) : known.tables.get(relid)?.sizes
      ;[r.table_size_bytes, r.index_size_bytes, r.heap_bytes, r.toast_bytes] = sizes ?? [null, null, null, null]
    }
    // The largest tables first (a table without sizes last), then by schema and name as PostgreSQL orders names.
    const total = (r: Row) =>
      r.table_size_bytes === null || r.index_size_bytes === null
        ? null
        : Number(r.table_size_bytes) + Number(r.index_size_bytes)
    const rows = all
      .map((r) => ({ r, total: total(r) }))
      .sort((a, b) =>
        a.total !== b.total
          ? a.total === null
            ? 1
            : b.total === null
              ? -1
              : b.total - a.total
          : byBytes(a.r.schemaname, b.r.schemaname) || byBytes(a.r.relname, b.r.relname),
      )
      .slice(0, MAX_TABLES)
      .map(({ r }) => r)
    const sized = new Map<string, SizedTable>()
    for (const r of rows) {
      const sizes = [r.table_size_bytes, r.index_size_bytes, r.heap_bytes, r.toast_bytes] as (string | null)[]
      if (sizes.every((v) => v !== null))
        sized.set(String(r.relid), {
          fingerprint: fingerprints.get(String(r.relid))!,
          sizes: sizes as SizedTable['sizes'],
        })
    }
    ctx.state.set(SIZES, { at: known.at, tables: sized } satisfies Sizes)
    const previous = ctx.state.get('tables') as Map<number, TableCounters> | undefined
    const current = new Map<number, TableCounters>()
    const stats: TableStat[] = rows.map((r) => {
      const counters = Object.fromEntries(COUNTERS.map((k) => [k, num(r[k])])) as TableCounters
      current.set(r.relid, counters)
      return {
        schema_name: r.schemaname,
        table_name: r.relname,
        ...counters,
        ...(Object.fromEntries(TABLE_GAUGES.map((k) => [k, num(r[k])])) as Counters<(typeof TABLE_GAUGES)[number]>),
        last_vacuum: epoch(r.last_vacuum),
        last_autovacuum: epoch(r.last_autovacuum),
        last_analyze: epoch(r.last_analyze),
        last_autoanalyze: epoch(r.last_autoanalyze),
        has_primary_key: facts.get(String(r.relid))!.has_primary_key,
        autovacuum_enabled: facts.get(String(r.relid))!.autovacuum_enabled,
        delta: deltaOf(previous?.get(r.relid), counters),
      }
    })
    ctx.state.set('tables', current)
    const sequences = await ctx.sql.unsafe<SequenceRow[]>(SEQUENCES_SQL, [], PREPARED)
    await reportUnreadableSequences(ctx)
    const foreignKeys = await ctx.sql.unsafe<ForeignKeyRow[]>(UNINDEXED_FOREIGN_KEYS_SQL, [], PREPARED)
    return {
      tables: stats,
      sequences: sequences.map(sequenceStat),
      unindexed_foreign_keys: foreignKeys.map((f) => ({
        schema_name: f.schema_name,
        table_name: f.table_name,
        constraint_name: f.constraint_name,
        columns: f.columns,
        referenced_table: f.referenced_table,
        table_size_bytes: num(f.table_size_bytes),
        n_live_tup: num(f.n_live_tup),
      })),
    }
  },
})
