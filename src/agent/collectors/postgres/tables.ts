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
// few thousand stat calls a cycle, well inside the collector's deadline.
// The counters and gauges are the table family's (src/shared/families.ts), as this server version has them.
const sqlFor = (major: number) => `
  WITH busy AS (
    SELECT coalesce(i.indrelid, t.oid, l.relation) AS relid
    FROM pg_locks l
    LEFT JOIN pg_index i ON i.indexrelid = l.relation
    LEFT JOIN pg_class t ON t.reltoastrelid = l.relation
    WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  ), sized AS (
    SELECT s.*,
           CASE WHEN NOT b.busy THEN pg_table_size(s.relid) END AS table_size_bytes,
           CASE WHEN NOT b.busy THEN pg_indexes_size(s.relid) END AS index_size_bytes,
           CASE WHEN NOT b.busy THEN pg_relation_size(s.relid) END AS heap_bytes,
           CASE WHEN NOT b.busy THEN CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END END AS toast_bytes
    FROM pg_stat_user_tables s
    JOIN pg_class c ON c.oid = s.relid
    CROSS JOIN LATERAL (SELECT s.relid IN (SELECT relid FROM busy) AS busy) b
  )
  SELECT relid, schemaname, relname,
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
    const rows = await ctx.sql.unsafe<Row[]>(sqlFor(ctx.major), [MAX_TABLES])
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
