// A databases row as the stores give it (SQLite integers, PostgreSQL BIGINT strings, JSON text) made
// into its record: read by the list and by ingest.
import { num, numOrNull, type DbRow } from '../rows.ts'
import type { RegisteredDatabase } from './types.ts'

export function toDatabase(r: DbRow): RegisteredDatabase {
  return {
    id: r.id,
    org_id: r.org_id,
    name: r.name,
    engine: r.engine,
    engine_version: r.engine_version ?? null,
    host: r.host,
    port: num(r.port),
    tags: JSON.parse(r.tags),
    poll_interval_seconds: num(r.poll_interval_seconds),
    collect_explain_plans: Boolean(r.collect_explain_plans),
    collect_replication: Boolean(r.collect_replication),
    disabled_collectors: JSON.parse(r.disabled_collectors),
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
    last_seen_at: numOrNull(r.last_seen_at),
  }
}
