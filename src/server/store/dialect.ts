// What differs between the two stores' SQL, in one place: one SqlDialect object per store, reached from
// its driver as `driver.sqlDialect` (and from a batch's writes as `writes.sqlDialect`). The sql-*.ts
// modules build their statements from these pieces instead of branching on the store's name. The
// drivers keep what belongs to the connection (placeholders `$1` -> `?1`, booleans, int8 parsing,
// transactions), the migrations their own DDL per store. Pieces that end up in parameterised queries
// built with the sql`` template (sql.ts) are Fragments; those spliced into texts without parameters of
// their own (upsert updates, rollups, retention deletes) are strings.
import { type Dialect, type Fragment, type SqlStatement, ident, join, param, sql } from './sql.ts'
import { INT64_MAX_SQL } from './sums.ts'

export interface SqlDialect {
  readonly name: Dialect
  /** The larger of two nullable values (NULL only when both are). */
  greatest(a: string, b: string): string
  /** The smaller of two nullable values (NULL only when both are). */
  least(a: string, b: string): string
  /**
   * SUM(column) of a BIGINT counter to be written into a BIGINT column, pinned at the maximum
   * (sums.ts); NULL when every value is.
   */
  saturatingSum(column: string): string
  /** SUM(column) for a read, which JS takes as a number: never fails however large the counters. */
  readSum(column: Fragment): Fragment
  /**
   * The aggregate of `column`'s value in the group's row with the largest `order` among those where it
   * is not NULL (NULL when it is NULL in every row): a gauge as of its latest measurement, in one pass
   * over the group's rows. Undefined where aggregates take no ORDER BY: SQLite before 3.44, which is
   * what Bun uses on macOS (the system's SQLite, 3.43 on macOS 14 and 15).
   */
  readonly lastNonNull: ((column: string, order: string) => string) | undefined
  /**
   * The statement deleting up to `limit` rows of `table` matching `where` (one statement, repeated until
   * fewer go). `primaryKey`: the table's key when it has no rowid (SQLite's WITHOUT ROWID tables).
   */
  deleteSome(table: string, where: string, limit: number, primaryKey?: readonly string[]): string
  /**
   * The statement that takes the transaction-scoped lock named by its one parameter, waiting for whoever
   * holds it; undefined where transactions are exclusive already (SQLite).
   */
  readonly lockSql: string | undefined
  /**
   * `(a, b) IN (...)` of a list of pairs, in one text whatever their number: the pairs travel as two
   * array parameters (PostgreSQL) or one JSON array of [a, b] pairs (SQLite).
   */
  pairsIn(a: Fragment, b: Fragment, pairs: readonly (readonly string[])[]): Fragment
  /**
   * Whether the planner reads an OR of key ranges through the primary key (PostgreSQL's BitmapOr), so
   * one statement can sum, sort and join a window; SQLite would read every row of the database and gets
   * one range scan per range instead.
   */
  readonly rangesByIndex: boolean
  /**
   * Whether this process alone writes the store (a SQLite file, held by the lock file), so it sees
   * every write and may keep read results in memory.
   */
  readonly soleWriter: boolean
  /**
   * INSERTs of many rows into `columns` of `table`, `tail` (an ON CONFLICT clause) after each. PostgreSQL:
   * one statement whatever the number of rows, each column bound as an array of its `columnType`
   * (unnest). SQLite: multi-row VALUES in chunks of a few fixed sizes. Either way only a few texts exist
   * per `shape` (a key naming table, columns and tail), each built once.
   */
  insertMany(
    shape: string,
    table: string,
    columns: readonly string[],
    rows: readonly unknown[][],
    tail: () => string,
    columnType: (column: string) => string,
  ): SqlStatement[]
  /** The DDL type of a 64-bit integer and of a double column (the family step's ADD COLUMN). */
  readonly columnTypes: { readonly bigint: string; readonly 'double precision': string }
  /**
   * Statements that lock `tables` (names from the code, in this order) before the family step alters
   * them, waiting at most a short while: none where the transaction is exclusive already (SQLite).
   */
  alterLock(tables: readonly string[]): string[]
  /** One query answering (table_name, column_name) for every column of `tables` (the names bound, never in the text). */
  columnsOf(tables: readonly string[]): SqlStatement
}

/** Statement texts by key, built once. Bounded: the shapes are fixed by the code. */
function textCache(): (key: string, build: () => string) => string {
  const texts = new Map<string, string>()
  return (key, build) => {
    let text = texts.get(key)
    if (text === undefined) {
      text = build()
      if (texts.size < 1000) texts.set(key, text)
    }
    return text
  }
}

/** The PostgreSQL types of ingest's array parameters (ingest/batch.ts INGEST_COLUMN_TYPES). */
const COLUMN_TYPES = ['text', 'integer', 'bigint', 'double precision', 'boolean'] as const

/** Rows per SQLite statement, largest first: only a few statement texts exist per table, each prepared once. */
const CHUNK_SIZES = [256, 64, 16, 4, 1] as const
const sqliteInserts = textCache()
const postgresInserts = textCache()

export const sqliteDialect: SqlDialect = {
  name: 'sqlite',
  columnTypes: { bigint: 'INTEGER', 'double precision': 'REAL' },
  alterLock: () => [],
  // pragma_table_info as a table-valued function: the table names are a bound JSON array, not SQL text.
  columnsOf: (tables) => ({
    sql: 'SELECT t.value AS table_name, c.name AS column_name FROM json_each($1) t, pragma_table_info(t.value) c',
    params: [JSON.stringify(tables)],
  }),
  // SQLite's two-argument MAX(a, NULL) is NULL.
  greatest: (a, b) => `MAX(COALESCE(${a}, ${b}), COALESCE(${b}, ${a}))`,
  least: (a, b) => `MIN(COALESCE(${a}, ${b}), COALESCE(${b}, ${a}))`,
  // SUM() of integers fails on overflow, whatever the expression around it: sums doubles (exact while the
  // sum is below 2^53, within a double's precision past it) and casts back to an integer.
  saturatingSum: (column) => `CAST(MIN(SUM(CAST(${column} AS REAL)), ${INT64_MAX_SQL}) AS INTEGER)`,
  readSum: (column) => sql`SUM(CAST(${column} AS REAL))`,
  lastNonNull: undefined,
  // By rowid or, in a WITHOUT ROWID table, by primary key (both searches use the key).
  deleteSome(table, where, limit, primaryKey) {
    const key = primaryKey?.join(', ')
    if (key === undefined)
      return `DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} WHERE ${where} LIMIT ${limit})`
    return `DELETE FROM ${table} WHERE (${key}) IN (SELECT ${key} FROM ${table} WHERE ${where} LIMIT ${limit})`
  },
  lockSql: undefined,
  pairsIn: (a, b, pairs) =>
    sql`(${a}, ${b}) IN (SELECT value ->> 0, value ->> 1 FROM json_each(${JSON.stringify(pairs)}))`,
  rangesByIndex: false,
  soleWriter: true,
  insertMany(shape, table, columns, rows, tail) {
    const statements: SqlStatement[] = []
    const maxRows = Math.max(1, Math.floor(30_000 / columns.length))
    let start = 0
    for (const size of CHUNK_SIZES) {
      if (size > maxRows) continue
      while (rows.length - start >= size) {
        const text = sqliteInserts(`${size} ${shape}`, () => {
          // Numbered by the template (placeholder values: the loop below binds the rows in the same order).
          const tuple = sql`(${join(columns.map(() => sql`${null}`))})`
          return `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${join(new Array<Fragment>(size).fill(tuple)).sql}${tail()}`
        })
        const params = new Array<unknown>(size * columns.length)
        let i = 0
        for (let r = start; r < start + size; r++) for (const value of rows[r]!) params[i++] = value
        statements.push({ sql: text, params })
        start += size
      }
    }
    return statements
  },
}

export const postgresDialect: SqlDialect = {
  name: 'postgres',
  columnTypes: { bigint: 'BIGINT', 'double precision': 'DOUBLE PRECISION' },
  alterLock: (tables) => ["SET LOCAL lock_timeout = '2s'", `LOCK TABLE ${tables.join(', ')} IN ACCESS EXCLUSIVE MODE`],
  columnsOf: (tables) => ({
    sql: 'SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ANY($1::text[])',
    params: [[...tables]],
  }),
  greatest: (a, b) => `GREATEST(COALESCE(${a}, ${b}), COALESCE(${b}, ${a}))`,
  least: (a, b) => `LEAST(COALESCE(${a}, ${b}), COALESCE(${b}, ${a}))`,
  // SUM of BIGINT is NUMERIC: exact, compared with the maximum.
  saturatingSum: (column) =>
    `CASE WHEN SUM(${column}) > ${INT64_MAX_SQL} THEN ${INT64_MAX_SQL} ELSE SUM(${column}) END`,
  // NUMERIC, read as a string and converted.
  readSum: (column) => sql`SUM(${column})`,
  lastNonNull: (column, order) =>
    `(array_agg(${column} ORDER BY ${order} DESC) FILTER (WHERE ${column} IS NOT NULL))[1]`,
  // By ctid; `primaryKey` is not needed.
  deleteSome: (table, where, limit) =>
    `DELETE FROM ${table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${table} WHERE ${where} LIMIT ${limit}))`,
  lockSql: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))',
  pairsIn: (a, b, pairs) =>
    sql`(${a}, ${b}) IN (SELECT * FROM unnest(${param(pairs.map((p) => p[0]))}::text[], ${param(pairs.map((p) => p[1]))}::text[]))`,
  rangesByIndex: true,
  soleWriter: false,
  insertMany(shape, table, columns, rows, tail, columnType) {
    const text = postgresInserts(shape, () => {
      // Numbered by the template (placeholder values: the arrays below are bound in the same order).
      const arrays = join(columns.map((c) => sql`${param(null)}::${ident(columnType(c), COLUMN_TYPES)}[]`))
      return `INSERT INTO ${table} (${columns.join(', ')}) SELECT * FROM unnest(${arrays.sql})${tail()}`
    })
    return [{ sql: text, params: columns.map((_, c) => rows.map((row) => row[c])) }]
  },
}

/** `build` of each dialect, computed once per dialect (SQL texts that depend only on it). */
export function perDialect<T>(build: (dialect: SqlDialect) => T): (dialect: SqlDialect) => T {
  const built = new Map<Dialect, T>()
  return (dialect) => {
    let value = built.get(dialect.name)
    if (value === undefined) built.set(dialect.name, (value = build(dialect)))
    return value
  }
}

/** A statement taking the lock named `key` in the dialect's transaction, if it needs one. */
export function lockStatement(dialect: SqlDialect, key: string): SqlStatement | undefined {
  return dialect.lockSql === undefined ? undefined : { sql: dialect.lockSql, params: [key] }
}
