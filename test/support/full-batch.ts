// An ingest batch with every field of every section set, derived from the wire schema (src/shared/wire.ts)
// rather than written out: a field added to the wire is in it without editing this file, so a store that
// lacks a column the ingest writes for it fails the tests that ingest this batch. Optional fields are
// present, nullable ones hold a value, arrays hold two entries; numbers differ from field to field (so a
// value landing in the wrong column shows) and stay within each field's bounds; epoch times lie just
// before the batch's time; the free-form counter maps hold every metric name dbm knows for them.
import { Kind, type TSchema } from '@sinclair/typebox'
import {
  BGWRITER_KEYS,
  DATABASE_COUNTER_KEYS,
  DATABASE_GAUGE_KEYS,
  IO_KEYS,
  SERVER_COUNTER_KEYS,
  SERVER_GAUGE_KEYS,
  WAL_KEYS,
  diskMetricKey,
} from '../../src/shared/metrics.ts'
import { IngestBatch } from '../../src/shared/wire.ts'

/** The keys of each free-form map of the batch, by its path (`[]` stands for any entry of an array). */
const RECORD_KEYS: Record<string, readonly string[]> = {
  'database.tags': ['env', 'team'],
  bgwriter: BGWRITER_KEYS,
  wal_stats: WAL_KEYS,
  'io_stats[].counters': IO_KEYS,
  database_stats: [...DATABASE_COUNTER_KEYS, ...DATABASE_GAUGE_KEYS],
  'server_state.settings': ['work_mem', 'search_path'],
  'server_state.settings_detail': ['work_mem', 'search_path'],
  'server_state.stats_resets': ['pg_stat_database', 'pg_stat_statements'],
  'log_events.entries[].fields': ['table', 'wait_ms'],
  'custom_metrics.samples[].labels': ['queue', 'state'],
  server_metrics: [
    ...SERVER_GAUGE_KEYS,
    ...SERVER_COUNTER_KEYS,
    diskMetricKey('default', 'free_bytes'),
    diskMetricKey('default', 'total_bytes'),
  ],
}

/** Values of string fields whose pattern the default `<key>-<index>` would not match. */
const PATTERNED: Record<string, string> = {
  kind: 'error',
  severity: 'error',
  sqlstate: '42P01',
  query_id: '-4242',
  type: 'full',
  redo_lsn: '0/A000278',
}

/** The wire's epoch-millisecond fields: integers up to the last millisecond of the year 9999. */
const EPOCH_MS_MAXIMUM = 253_402_300_799_999

/** Entries in each array. */
const ENTRIES = 2

/**
 * A batch of database `name` (`engine` as given) collected at `collectedAt`, with every field of the
 * wire schema set. Sections of the other engine are set too: the store applies what it is sent.
 */
export function fullBatch(
  name: string,
  collectedAt: number,
  engine: 'postgres' | 'clickhouse' = 'postgres',
): IngestBatch {
  let counter = 0
  const sampleValue = (schema: TSchema, path: string, key: string, index: number): unknown => {
    switch (schema[Kind]) {
      case 'Object':
        return Object.fromEntries(
          Object.entries(schema.properties as Record<string, TSchema>).map(([k, s]) => [
            k,
            sampleValue(s, path ? `${path}.${k}` : k, k, index),
          ]),
        )
      case 'Array':
        return Array.from({ length: ENTRIES }, (_, i) => sampleValue(schema.items, `${path}[]`, key, i))
      case 'Record': {
        const keys = RECORD_KEYS[path]
        if (!keys) throw new Error(`fullBatch: no keys known for the map at ${path}: add them to RECORD_KEYS`)
        const [valueSchema] = Object.values(schema.patternProperties as Record<string, TSchema>)
        return Object.fromEntries(keys.map((k) => [k, sampleValue(valueSchema!, `${path}.${k}`, k, index)]))
      }
      case 'Union': {
        const variant = (schema.anyOf as TSchema[]).find((s) => s[Kind] !== 'Null')
        if (!variant) throw new Error(`fullBatch: only null allowed at ${path}`)
        return sampleValue(variant, path, key, index)
      }
      case 'Literal':
        return schema.const
      case 'String': {
        let text = PATTERNED[key] ?? `${key}-${index}`
        // Identifier patterns (custom metrics' names and columns) take `<key>_<index>`.
        if (
          schema.pattern &&
          !new RegExp(schema.pattern).test(text) &&
          new RegExp(schema.pattern).test(`${key}_${index}`)
        )
          text = `${key}_${index}`
        if (schema.pattern && !new RegExp(schema.pattern).test(text))
          throw new Error(`fullBatch: '${text}' does not match the pattern at ${path}: add a value to PATTERNED`)
        return text.slice(0, schema.maxLength ?? text.length)
      }
      case 'Boolean':
        return true
      case 'Integer':
      case 'Number': {
        counter++
        if (schema.maximum === EPOCH_MS_MAXIMUM) return collectedAt - counter * 1000
        const value = 100 + counter
        if (schema.maximum === undefined || value <= schema.maximum) return value
        return schema[Kind] === 'Integer' ? Math.floor(schema.maximum / 2) : schema.maximum / 2
      }
      case 'Unknown':
        return { Plan: { 'Node Type': 'Seq Scan', 'Relation Name': `table_name-${index}`, 'Total Cost': 12.5 } }
      default:
        throw new Error(`fullBatch: no value for a ${String(schema[Kind])} at ${path}`)
    }
  }
  const batch = sampleValue(IngestBatch, '', '', 0) as IngestBatch
  batch.batch_id = crypto.randomUUID()
  batch.collected_at = collectedAt
  batch.interval_seconds = 10
  // The cycle's deltas cover its poll interval (no gap): they land in the batch's own minute.
  batch.covered_seconds = 10
  batch.database.name = name
  batch.database.engine = engine
  return batch
}
