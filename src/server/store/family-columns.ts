// The family step: each counter family's tables get a column for every field the family gained since
// the frozen migrations (src/shared/families.ts). A migration is frozen text that later code never edits,
// so a field added to a family cannot reach existing stores through one; this step derives the missing
// columns from the family lists instead, in the migrations' transaction, before pending migrations and
// after them (migrations.ts migrate()). It only adds columns: never take a field out of a family (its
// column stays, and a frozen migration may name it).
//
// Adding a column is cheap in both stores whatever the table's size: SQLite and PostgreSQL 11+ record a
// nullable column or one with a constant default in the catalog without rewriting rows.
// A later migration that rebuilds a family table (as 0010 did) lists every family column of its day: the
// step before the migrations has added them, so its INSERT ... SELECT finds them.
import { FAMILY_TABLES, type FamilyTable, type Field, columnType } from '../../shared/families.ts'
import type { SqlDialect } from './dialect.ts'
import type { SqlDriver } from './driver.ts'

/** The DDL type of a field's column: statement sums NOT NULL DEFAULT 0, object rows nullable. */
function columnDefinition(dialect: SqlDialect, family: FamilyTable, field: Field): string {
  const type = dialect.columnTypes[columnType(field)]
  return family.notNullZero ? `${type} NOT NULL DEFAULT 0` : type
}

/** The columns each table has now, by table. */
async function existingColumns(tx: SqlDriver, tables: readonly string[]): Promise<Map<string, Set<string>>> {
  const found = new Map<string, Set<string>>(tables.map((t) => [t, new Set<string>()]))
  const { sql, params } = tx.sqlDialect.columnsOf(tables)
  for (const row of await tx.all<{ table_name: string; column_name: string }>(sql, params))
    found.get(row.table_name)?.add(row.column_name)
  return found
}

export interface AddedColumn {
  table: string
  column: string
  definition: string
}

/**
 * The fields whose column a family table lacks, by table. A table with no columns at all is one the
 * migrations did not create (yet): left out with 'skip', an error with 'fail'.
 */
function missingFields(
  existing: Map<string, Set<string>>,
  families: readonly FamilyTable[],
  missingTables: 'skip' | 'fail',
): { family: FamilyTable; field: Field }[] {
  const missing: { family: FamilyTable; field: Field }[] = []
  for (const family of families) {
    const columns = existing.get(family.table)!
    if (columns.size === 0) {
      if (missingTables === 'skip') continue
      throw new Error(`the store has no table ${family.table} for the family step`)
    }
    for (const field of family.fields) {
      if (columns.has(field.key)) continue
      columns.add(field.key)
      missing.push({ family, field })
    }
  }
  return missing
}

/** Whether a family table of the store lacks a column its family has, or is missing (a read, outside any transaction). */
export async function familyColumnsMissing(
  driver: SqlDriver,
  families: readonly FamilyTable[] = FAMILY_TABLES,
): Promise<boolean> {
  const existing = await existingColumns(
    driver,
    families.map((f) => f.table),
  )
  return families.some((f) => existing.get(f.table)!.size === 0) || missingFields(existing, families, 'fail').length > 0
}

/**
 * The family tables in the order an ingest takes its locks on them (it reads the latest rows first, then
 * writes the buckets): the family step locks them in this order too, so it waits for an ingest instead of
 * deadlocking with one (PostgreSQL).
 */
const LOCK_ORDER = ['latest_tables', 'latest_indexes', 'query_stats', 'table_stats', 'index_stats']
const lockRank = (table: string) => (LOCK_ORDER.includes(table) ? LOCK_ORDER.indexOf(table) : LOCK_ORDER.length)

/**
 * Adds the columns the families' fields have and their tables lack; returns what it added (empty when
 * the schema is current). Run inside the migrations' transaction (which holds their lock). On
 * PostgreSQL, where other serve processes may be ingesting, the tables that gain columns are locked
 * first, in ingest's order and with a short lock timeout (dialect.ts alterLock): a timeout fails the
 * transaction, which the caller retries (migrations.ts), rather than queueing every ingest behind a wait.
 * `missingTables: 'skip'` leaves out tables the store does not have yet (before the migrations that
 * create them).
 */
export async function addFamilyColumns(
  tx: SqlDriver,
  families: readonly FamilyTable[] = FAMILY_TABLES,
  missingTables: 'skip' | 'fail' = 'fail',
): Promise<AddedColumn[]> {
  const wanted = missingFields(
    await existingColumns(
      tx,
      families.map((f) => f.table),
    ),
    families,
    missingTables,
  )
  if (wanted.length === 0) return []
  // Names go into DDL text: only plain identifiers (they come from families.ts, never from outside).
  for (const { field } of wanted) {
    if (!/^[a-z][a-z0-9_]*$/.test(field.key))
      throw new Error(`a family field's name must be a plain identifier: ${JSON.stringify(field.key)}`)
  }
  const tables = [...new Set(wanted.map((w) => w.family.table))].sort((a, b) => lockRank(a) - lockRank(b))
  for (const statement of tx.sqlDialect.alterLock(tables)) await tx.exec(statement)
  const added: AddedColumn[] = []
  for (const { family, field } of wanted) {
    const definition = columnDefinition(tx.sqlDialect, family, field)
    await tx.exec(`ALTER TABLE ${family.table} ADD COLUMN ${field.key} ${definition}`)
    added.push({ table: family.table, column: field.key, definition })
  }
  return added
}

/** PostgreSQL's answer when the family step's lock timed out or lost a deadlock: worth another try. */
export function isLockContention(error: unknown): boolean {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code
    if (code === '55P03' || code === '40P01') return true
  }
  return false
}
