// What a store's schema is, read from the database itself: SQLite's sqlite_master (the exact DDL text
// each table and index was created with) and PostgreSQL's catalogs (columns with their types, nullability,
// defaults and collations; constraints; index definitions). Used by the migration tests to compare a
// store with a recorded fixture and to fill every table of a store generically from its columns.
import type { SqlDriver } from '../../src/server/store/driver.ts'

/** One table or index of a SQLite store as sqlite_master holds it. */
export interface SqliteObject {
  type: string
  name: string
  tbl_name: string
  sql: string | null
}

export interface PostgresTable {
  name: string
  /** `name type [COLLATE "c"] [NOT NULL] [DEFAULT expr]`, in column order. */
  columns: string[]
  /** `name: definition`, by name. */
  constraints: string[]
  /** Each index's CREATE INDEX statement, by name. */
  indexes: string[]
}

export type StoreSchema =
  | { dialect: 'sqlite'; objects: SqliteObject[] }
  | { dialect: 'postgres'; tables: PostgresTable[] }

export async function schemaOf(driver: SqlDriver): Promise<StoreSchema> {
  if (driver.dialect === 'sqlite') {
    const objects = await driver.all<SqliteObject>(
      "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
    )
    return { dialect: 'sqlite', objects }
  }
  const tables: PostgresTable[] = []
  for (const name of await tableNames(driver)) {
    const columns = await driver.all<{
      name: string
      type: string
      not_null: boolean
      default: string | null
      collation: string | null
    }>(
      `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
              pg_get_expr(d.adbin, d.adrelid) AS default, co.collname AS collation
       FROM pg_attribute a
       LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
         AND a.attcollation <> (SELECT typcollation FROM pg_type WHERE oid = a.atttypid)
       WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
       ORDER BY a.attnum`,
      [name],
    )
    const constraints = await driver.all<{ name: string; definition: string }>(
      `SELECT conname AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint
       WHERE conrelid = to_regclass($1) ORDER BY conname`,
      [name],
    )
    const indexes = await driver.all<{ name: string; definition: string }>(
      `SELECT indexname AS name, indexdef AS definition FROM pg_indexes
       WHERE schemaname = current_schema() AND tablename = $1 ORDER BY indexname`,
      [name],
    )
    tables.push({
      name,
      columns: columns.map(
        (c) =>
          `${c.name} ${c.type}${c.collation ? ` COLLATE "${c.collation}"` : ''}${c.not_null ? ' NOT NULL' : ''}${c.default === null ? '' : ` DEFAULT ${c.default}`}`,
      ),
      constraints: constraints.map((c) => `${c.name}: ${c.definition}`),
      indexes: indexes.map((i) => i.definition),
    })
  }
  return { dialect: 'postgres', tables }
}

/** The store's tables, by name. */
export async function tableNames(driver: SqlDriver): Promise<string[]> {
  const rows =
    driver.dialect === 'sqlite'
      ? await driver.all<{ name: string }>(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
      : await driver.all<{ name: string }>(
          "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name",
        )
  return rows.map((r) => r.name)
}

/** The kind of value a column holds, from its declared type. */
export type ColumnKind = 'text' | 'integer' | 'double' | 'boolean'

export interface ColumnInfo {
  name: string
  kind: ColumnKind
  notNull: boolean
  /** The table and column a foreign key on this column references. */
  references?: { table: string; column: string }
}

function kindOf(declared: string): ColumnKind {
  const type = declared.toLowerCase()
  if (type === 'boolean') return 'boolean'
  if (type === 'real' || type === 'double precision') return 'double'
  if (type === 'integer' || type === 'bigint') return 'integer'
  if (type === 'text') return 'text'
  throw new Error(`no filler for column type ${declared}`)
}

/** The columns of a table in order, with the kind of value each holds and where its foreign key points. */
export async function columnsOf(driver: SqlDriver, table: string): Promise<ColumnInfo[]> {
  if (driver.dialect === 'sqlite') {
    const columns = await driver.all<{ name: string; type: string; notnull: number; pk: number }>(
      `PRAGMA table_info(${table})`,
    )
    const keys = await driver.all<{ table: string; from: string; to: string }>(`PRAGMA foreign_key_list(${table})`)
    return columns.map((c) => {
      const fk = keys.find((k) => k.from === c.name)
      return {
        name: c.name,
        // A SQLite boolean is an INTEGER: the PostgreSQL store's type tells them apart, so a 0/1 fills both.
        kind: kindOf(c.type),
        notNull: c.notnull === 1 || c.pk > 0,
        ...(fk ? { references: { table: fk.table, column: fk.to } } : {}),
      }
    })
  }
  const columns = await driver.all<{ name: string; type: string; not_null: boolean }>(
    `SELECT attname AS name, format_type(atttypid, atttypmod) AS type, attnotnull AS not_null FROM pg_attribute
     WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
    [table],
  )
  const keys = await driver.all<{ column: string; referenced_table: string; referenced_column: string }>(
    `SELECT a.attname AS column, c.confrelid::regclass::text AS referenced_table, ra.attname AS referenced_column
     FROM pg_constraint c
     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
     JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = c.confkey[1]
     WHERE c.contype = 'f' AND c.conrelid = to_regclass($1)`,
    [table],
  )
  return columns.map((c) => {
    const fk = keys.find((k) => k.column === c.name)
    return {
      name: c.name,
      kind: kindOf(c.type),
      notNull: c.not_null,
      ...(fk ? { references: { table: fk.referenced_table, column: fk.referenced_column } } : {}),
    }
  })
}
