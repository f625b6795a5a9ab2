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
import type { Counters } from './common.ts'

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

// autovacuum_enabled is false when the table's storage parameters turn autovacuum off for it or for its
// TOAST table (ALTER TABLE ... SET (toast.autovacuum_enabled = false) is stored on the TOAST table);
// the values are read as PostgreSQL reads them (off, no, 0, f ...) by the boolean cast.
// Sizing a relation takes an ACCESS SHARE lock on it and its indexes, so a table that someone holds or
// awaits an ACCESS EXCLUSIVE lock on (ALTER TABLE, VACUUM FULL, TRUNCATE, REINDEX of an index) is not
// sized this cycle: its sizes are null rather than the collector waiting out its deadline.
// Sizes are file sizes (stat calls, no reads): the heap's main fork (pg_relation_size), the TOAST
// table with its index (pg_total_relation_size of reltoastrelid, 0 for a table without one), and
// pg_table_size and pg_indexes_size, whose sum is pg_total_relation_size. With 1,000 tables that is a
// few thousand stat calls, which were most of the agent's database time per cycle: a table's sizes are
// read again only when its fingerprint moved (its and its TOAST table's and indexes' files, rows
// inserted, updated or deleted, vacuums: what changes a file's size) and at least every SIZES_MAX_AGE_MS
// (what no counter shows yet: an open transaction's writes); otherwise the sizes of the last reading
// are sent (passed in, so that the largest tables are still picked by the query).
// The counters and gauges are the table family's (src/shared/families.ts), as this server version has them.
const sqlFor = (major: number) => `
  WITH busy AS (
    SELECT coalesce(i.indrelid, t.oid, l.relation) AS relid
    FROM pg_locks l
    LEFT JOIN pg_index i ON i.indexrelid = l.relation
    LEFT JOIN pg_class t ON t.reltoastrelid = l.relation
    WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  ), printed AS (
    SELECT s.*, c.reltoastrelid,
           concat_ws(',', c.relfilenode, t.relfilenode, s.n_tup_ins, s.n_tup_upd, s.n_tup_del, s.vacuum_count, s.autovacuum_count,
             (SELECT string_agg(ic.relfilenode::text, ',' ORDER BY ic.oid) FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
              WHERE i.indrelid = s.relid)) AS fingerprint
    FROM pg_stat_user_tables s
    JOIN pg_class c ON c.oid = s.relid
    LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
  ), sized AS (
    SELECT s.*,
           CASE WHEN b.busy THEN NULL WHEN k.relid IS NOT NULL THEN k.table_size ELSE pg_table_size(s.relid) END AS table_size_bytes,
           CASE WHEN b.busy THEN NULL WHEN k.relid IS NOT NULL THEN k.index_size ELSE pg_indexes_size(s.relid) END AS index_size_bytes,
           CASE WHEN b.busy THEN NULL WHEN k.relid IS NOT NULL THEN k.heap ELSE pg_relation_size(s.relid) END AS heap_bytes,
           CASE WHEN b.busy THEN NULL WHEN k.relid IS NOT NULL THEN k.toast
                WHEN s.reltoastrelid <> 0 THEN pg_total_relation_size(s.reltoastrelid) ELSE 0 END AS toast_bytes
    FROM printed s
    CROSS JOIN LATERAL (SELECT s.relid IN (SELECT relid FROM busy) AS busy) b
    LEFT JOIN json_to_recordset($2::text::json) AS k(relid oid, fingerprint text, table_size int8, index_size int8, heap int8, toast int8)
      ON k.relid = s.relid AND k.fingerprint = s.fingerprint
  )
  SELECT relid, schemaname, relname, fingerprint,
         ${pgSelectList(TABLE_FIELDS, major)},
         last_vacuum, last_autovacuum, last_analyze, last_autoanalyze,
         EXISTS (SELECT 1 FROM pg_index p WHERE p.indrelid = sized.relid AND p.indisprimary) AS has_primary_key,
         NOT EXISTS (
           SELECT 1 FROM pg_class c
           LEFT JOIN pg_class toast ON toast.oid = c.reltoastrelid
           CROSS JOIN LATERAL (
             SELECT option_value FROM pg_options_to_table(c.reloptions) WHERE option_name = 'autovacuum_enabled'
             UNION ALL
             SELECT option_value FROM pg_options_to_table(toast.reloptions) WHERE option_name = 'autovacuum_enabled'
           ) o
           WHERE c.oid = sized.relid AND NOT o.option_value::boolean
         ) AS autovacuum_enabled
  FROM sized
  ORDER BY table_size_bytes + index_size_bytes DESC NULLS LAST, schemaname, relname
  LIMIT $1`

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
  LIMIT $1`

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
        ? { schema_name: r.table_schema, table_name: r.table_name, column_name: r.column_name, column_type: r.column_type }
        : null,
  }
}

type Row = Record<(typeof COUNTERS)[number] | (typeof TABLE_GAUGES)[number], string | null> & {
  relid: number
  fingerprint: string
  schemaname: string
  relname: string
  last_vacuum: Date | null
  last_autovacuum: Date | null
  last_analyze: Date | null
  last_autoanalyze: Date | null
  has_primary_key: boolean
  autovacuum_enabled: boolean
}

// Sequences the agent's role may not read (no SELECT or USAGE: pg_monitor alone) have no last value,
// so the sequence checks cannot see them: logged once per count, and counted in the health status.
const UNREADABLE_SEQUENCES_SQL = `
  SELECT count(*)::int AS n FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE NOT pg_is_other_temp_schema(n.oid)
    AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege(c.oid, 'SELECT,USAGE') ELSE false END`

async function reportUnreadableSequences(ctx: PostgresContext): Promise<void> {
  const [row] = await ctx.sql.unsafe<{ n: number }[]>(UNREADABLE_SEQUENCES_SQL)
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
      fix: ctx.major >= 14 ? 'GRANT pg_read_all_data TO <agent role>' : 'GRANT SELECT ON ALL SEQUENCES IN SCHEMA <schema> TO <agent role>',
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
  LIMIT $1`

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
  async collect(ctx) {
    const kept = ctx.state.get(SIZES) as Sizes | undefined
    const known = kept && ctx.now - kept.at < SIZES_MAX_AGE_MS ? kept : { at: ctx.now, tables: new Map<string, SizedTable>() }
    const reused = [...known.tables].map(([relid, t]) => ({
      relid,
      fingerprint: t.fingerprint,
      table_size: t.sizes[0],
      index_size: t.sizes[1],
      heap: t.sizes[2],
      toast: t.sizes[3],
    }))
    const rows = await ctx.sql.unsafe<Row[]>(sqlFor(ctx.major), [MAX_TABLES, JSON.stringify(reused)])
    const sized = new Map<string, SizedTable>()
    for (const r of rows) {
      const sizes = [r.table_size_bytes, r.index_size_bytes, r.heap_bytes, r.toast_bytes].map((v) => (v === null ? null : String(v))) as SizedTable['sizes']
      if (sizes.every((v) => v !== null)) sized.set(String(r.relid), { fingerprint: r.fingerprint, sizes })
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
        has_primary_key: r.has_primary_key,
        autovacuum_enabled: r.autovacuum_enabled,
        delta: deltaOf(previous?.get(r.relid), counters),
      }
    })
    ctx.state.set('tables', current)
    const sequences = await ctx.sql.unsafe<SequenceRow[]>(SEQUENCES_SQL, [MAX_SEQUENCES])
    await reportUnreadableSequences(ctx)
    const foreignKeys = await ctx.sql.unsafe<ForeignKeyRow[]>(UNINDEXED_FOREIGN_KEYS_SQL, [MAX_SEQUENCES])
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
