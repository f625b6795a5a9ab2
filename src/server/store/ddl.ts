// DDL written once for both stores: {bigint}, {bool}, {double} and {ctext} stand for each dialect's
// column types ({ctext}: text that sorts by code point on both, whatever PostgreSQL's locale).
import type { Dialect } from './driver.ts'

const TYPES: Record<Dialect, Record<string, string>> = {
  sqlite: { bigint: 'INTEGER', bool: 'INTEGER', double: 'REAL', ctext: 'TEXT' },
  postgres: { bigint: 'BIGINT', bool: 'BOOLEAN', double: 'DOUBLE PRECISION', ctext: 'TEXT COLLATE "C"' },
}

export function dialectDdl(ddl: string, dialect: Dialect): string {
  return ddl.replace(/\{(bigint|bool|double|ctext)\}/g, (_, type: string) => TYPES[dialect][type]!)
}

/** The DDL of a migration for both stores. */
export function both(ddl: string): { sqlite: string; postgres: string } {
  return { sqlite: dialectDdl(ddl, 'sqlite'), postgres: dialectDdl(ddl, 'postgres') }
}

/**
 * A table that keeps the latest section of each kind per database, whole, with its cycle's interval:
 * internals_latest (migration 4) and clickhouse_latest (migration 5). Both migrations are fixed once
 * released: a change to this table is a new migration, not an edit here.
 */
export function latestSectionsTable(table: string): string {
  return `CREATE TABLE ${table} (
  database_id TEXT NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  ts {bigint} NOT NULL,
  interval_seconds {double} NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (database_id, kind)
);`
}
