// Schema migrations on both stores: the first open applies every version, a reopen applies none, a
// schema newer than this dbm refuses to open with SchemaTooNewError; the SQLite file runs in WAL mode.
// Released migrations are frozen: each one's checksum is recorded here, each file holds literal text,
// and migrations 1 to 8 build exactly the schema recorded in fixtures/schema-v8.<store>.json (read from
// stores built before the migrations became frozen files); migration 10 rebuilds the SQLite tables their
// primary key is WITHOUT ROWID with the same columns, key, foreign key, indexes and rows (and changes no
// PostgreSQL table); a new store gets versions 1 to 10 from one frozen script (migrations/baseline-0010.ts)
// with exactly the schema the ten give one by one. For every version, a store built at it and filled in every table migrates to the
// latest with its rows intact, opens as the server opens it, and ingests and reads back a batch with
// every field of the wire set (so a column the ingest writes that an upgraded store lacks fails here, as
// n_mod_since_analyze once failed every ingest).
import { Database } from 'bun:sqlite'
import { afterEach, describe, expect, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import type { SqlDriver } from '../../src/server/store/driver.ts'
import { addFamilyColumns } from '../../src/server/store/family-columns.ts'
import {
  type Migration,
  SchemaTooNewError,
  latestVersion,
  migrate,
  migrations,
} from '../../src/server/store/migrations.ts'
import { openStore } from '../../src/server/store/open.ts'
import { PostgresDriver } from '../../src/server/store/postgres/driver.ts'
import { SqliteDriver } from '../../src/server/store/sqlite/driver.ts'
import { SqlStore } from '../../src/server/store/sql-store.ts'
import { type IngestBatch, IngestBatch as IngestBatchSchema } from '../../src/shared/wire.ts'
import { fullBatch } from '../support/full-batch.ts'
import { freshStoreLocation, storeKinds } from '../support/server.ts'
import { type ColumnInfo, columnsOf, schemaOf, tableNames } from '../support/store-schema.ts'
import type { StoreLocation } from './contract.ts'

const MINUTE = 60_000
const HOUR = 60 * MINUTE

/**
 * sha256 of each released migration (JSON of [version, name, sqlite, postgres]). A migration that stores
 * have applied is never edited: if this test fails, undo the edit and add a new migration instead. A new
 * migration records its checksum here when it is added.
 */
const RELEASED: Record<number, string> = {
  1: '7b1458109a7c179434c3f22b34b0a73ee60df484e25432ad5245f1965c9e73f8',
  2: '5bcc5f9a40aad2274ac54bcaddea3e966528be9a8d4d1ce5317015f4920d536b',
  3: '0a268ce3415869361018b04caa81575f2371f3c3c573735c77c7285dc49c63f3',
  4: '3b0968efff904b86e802a62661637fc83c795c3c00228d003d57db81009345b1',
  5: 'a5c50a558520b7e4e97915deb1e6eb13feaa687015eff756d87c4348771eb0eb',
  6: '84c0defcd59a57bcd64cf1a24639a12c80990027158762572830a2627912010e',
  7: '61574eaf421874a4c5e82460bca211494ae2f17bff940bb4e00a486d692f544f',
  8: 'd612654051b5cb153b5e046e888c9bb12cade8fb083a7183925b10ddd8c1d512',
  9: '4a24e6de9c6a3273570a74c7c2eb09fc0816b43a1504b3709f076102f5c71e09',
  10: '0dfa1879258f5c580a9cc864f476f556985600ff844f68f67b026d8a7fd38c67',
  11: '8c058af1a3e0e634414e705398a305ec7c19965d981fdcac9c2c1cbdba3ffd77',
  12: 'b91fc111edd41a5c28301ca995db3a467170f21390237cbad20c43230fbb6352',
  13: 'ec2ea55032ddaed2ee0150c87d0f4b925395d1f145eb8e6e8c79f0d7d05620cd',
  14: '8e95938842fd836364ff85dd02dcddaec0e2ff6d70c25f0f873dd048c1d49fb7',
  15: '6a06201ed2ba676c871413d4fd9eea15fdd98b29c5920e2bd1f1ec295f9d603a',
  16: '79627b400395830186fd46a8bef517e935b9d18213d293c4ac0db4705a947c9a',
  17: 'f778cbbd5c4f88721ed4756b1e3b78a5999f7c2739991ffb9958673aeaa88838',
  18: '4b5fbbf3b5a26da7dd9881b5ad26a15b83a2d2e8e802a92649e3660fae15c2f1',
  19: '518eca0083b0b1da7ff7b0f3e1360b54bb46d4491185d409d2941d942125cd9a',
  20: '135b4338ea4a97531f24276d21cf4b3c0e8ccdfa7b1740f5a336b89b479f57e7',
  21: '6da7dacde7de4dcea96db988b1ca5ba1236ca503a2089a67f67944d2670efa64',
  22: 'cabefa43a62dc04f63767bf1bed63d255e47c8629478fb5ebe73eb186cd6f58f',
  23: '5a68679f3fee55fd5366d41b83de1485432baf4071741c515c17ef94fc898749',
  24: '6a6ec2c40c1e8e7c6f7ad8ec3971e77ab0d027453af51eae71eadfcb920b3e18',
  25: '8ca6d5b6aeef3d508142b206573cb719246fba1ee04a661c87e0a0f632acc709',
  26: '9e8bc4e412641dc64beb0f568c049d29877ae7a969d479c96318d7bbc1b3af44',
}

const checksum = (m: Migration) =>
  createHash('sha256')
    .update(JSON.stringify([m.version, m.name, m.sqlite, m.postgres]))
    .digest('hex')

const MIGRATIONS_DIR = join(import.meta.dir, '../../src/server/store/migrations')

/**
 * Creates the tables the migrations after `version` create (their own DDL), for a test that runs today's
 * ingest on an older store; returns their names in the order created.
 */
async function tablesOfLaterMigrations(driver: SqlDriver, version: number): Promise<string[]> {
  const names: string[] = []
  for (const m of migrations.filter((m) => m.version > version)) {
    const ddl = driver.dialect === 'sqlite' ? m.sqlite : m.postgres
    await driver.exec(ddl)
    for (const match of ddl.matchAll(/CREATE TABLE (\w+)/g)) names.push(match[1]!)
  }
  return names
}

describe('released migrations', () => {
  test('every migration is as released: its sha256 is the one recorded (a new migration adds its line to RELEASED)', () => {
    expect(Object.fromEntries(migrations.map((m) => [m.version, checksum(m)]))).toEqual(RELEASED)
  })

  test('each NNNN-*.ts file of src/server/store/migrations holds migration NNNN as literal text, and the list has them all in order', async () => {
    const files = readdirSync(MIGRATIONS_DIR)
      .filter((f) => /^\d{4}-.+\.ts$/.test(f))
      .sort()
    const versions: number[] = []
    for (const file of files) {
      const source = readFileSync(join(MIGRATIONS_DIR, file), 'utf8')
      // nothing interpolated and nothing imported but the type: the text cannot follow live constants
      expect({ file, imports: source.match(/^import .*$/gm), interpolates: source.includes('${') }).toEqual({
        file,
        imports: ["import type { Migration } from './migration.ts'"],
        interpolates: false,
      })
      const { migration } = (await import(join(MIGRATIONS_DIR, file))) as { migration: Migration }
      expect({ file, version: migration.version }).toEqual({ file, version: Number(file.slice(0, 4)) })
      expect(migrations[migration.version - 1]).toBe(migration)
      versions.push(migration.version)
    }
    expect(versions).toEqual(migrations.map((m) => m.version))
  })
})

/** Runs one statement on the store's database over a connection of its own, outside dbm. */
async function rawQuery(location: StoreLocation, sql: string): Promise<Record<string, unknown>[]> {
  if (location.databaseUrl) {
    const client = postgres(location.databaseUrl, { max: 1, onnotice: () => {} })
    try {
      return [...(await client.unsafe(sql))]
    } finally {
      await client.end()
    }
  }
  const db = new Database(join(location.dataDir, 'dbm.sqlite'))
  try {
    return db.query(sql).all() as Record<string, unknown>[]
  } finally {
    db.close()
  }
}

/** A driver on the store's database, as openStore makes it, without migrating. */
function driverFor(location: StoreLocation): SqlDriver {
  if (location.databaseUrl) return new PostgresDriver(location.databaseUrl)
  mkdirSync(location.dataDir, { recursive: true })
  return new SqliteDriver(join(location.dataDir, 'dbm.sqlite'))
}

/** Rows of the filler in each table. */
const FILLER_ROWS = 2
/** An hour six hours back, where the filler's times start. */
const FILLER_T0 = Math.floor(Date.now() / HOUR) * HOUR - 6 * HOUR
/** Columns holding JSON that the store parses when it reads them. */
const JSON_COLUMNS: Record<string, string> = {
  tags: '{"env":"prod"}',
  disabled_collectors: '[]',
  payload: '[]',
  plan_json: '{}',
}
/** Integer columns holding epoch milliseconds. */
const TIME_COLUMN = /(^at|_at|^ts|bucket|first_seen|last_seen|_after|_until|^last_(auto)?(vacuum|analyze))$/

/** The filler's value of a column in its `i`th row; a foreign key takes the referenced row's value. */
function fillerValue(column: ColumnInfo, i: number, filled: Map<string, Record<string, unknown>[]>): unknown {
  if (column.references) return filled.get(column.references.table)![i]![column.references.column]
  const name = column.name
  if (name in JSON_COLUMNS) return JSON_COLUMNS[name]
  if (name === 'engine') return 'postgres'
  if (name === 'resolution') return 60
  switch (column.kind) {
    case 'text':
      return `${name}-${i}`
    case 'boolean':
      return i === 0
    case 'double':
      return i + 0.5
    case 'integer':
      return TIME_COLUMN.test(name) ? FILLER_T0 + i * MINUTE : i + 1
  }
}

/** Fills every table of the store (referenced tables first) with FILLER_ROWS rows; returns them by table. */
async function fillEveryTable(driver: SqlDriver): Promise<Map<string, Record<string, unknown>[]>> {
  const columns = new Map<string, ColumnInfo[]>()
  for (const table of await tableNames(driver))
    if (table !== 'schema_migrations') columns.set(table, await columnsOf(driver, table))
  const filled = new Map<string, Record<string, unknown>[]>()
  while (filled.size < columns.size) {
    const ready = [...columns].filter(
      ([table, cols]) =>
        !filled.has(table) &&
        cols.every((c) => !c.references || c.references.table === table || filled.has(c.references.table)),
    )
    if (ready.length === 0) throw new Error('the tables reference each other in a cycle')
    for (const [table, cols] of ready) {
      const rows: Record<string, unknown>[] = []
      for (let i = 0; i < FILLER_ROWS; i++) {
        const row = Object.fromEntries(cols.map((c) => [c.name, fillerValue(c, i, filled)]))
        await driver.run(
          `INSERT INTO "${table}" (${cols.map((c) => `"${c.name}"`).join(', ')}) VALUES (${cols.map((_, n) => `$${n + 1}`).join(', ')})`,
          Object.values(row),
        )
        rows.push(row)
      }
      filled.set(table, rows)
    }
  }
  return filled
}

/**
 * The rows a filled table holds after migrating from `from` to the latest: the filler's, plus what a
 * migration derives from them (migration 7 rolls each statement minute row up into its 10-minute bucket).
 */
function rowsAfterMigrating(table: string, rows: Record<string, unknown>[], from: number): Record<string, unknown>[] {
  if (table === 'query_stats' && from < 7) {
    return [
      ...rows,
      ...rows.map((r) => ({ ...r, resolution: 600, bucket: Math.floor(Number(r.bucket) / 600_000) * 600_000 })),
    ]
  }
  return rows
}

const sortedRows = (rows: Record<string, unknown>[]) =>
  rows
    .map((r) => ({ ...r }))
    .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : JSON.stringify(a) > JSON.stringify(b) ? 1 : 0))

/** What listQueryStats answers for one statement of a batch that was its only one in the window. */
function queryRowOf(q: NonNullable<IngestBatch['query_stats']>[number], minute: number) {
  const hit = q.shared_blks_hit
  const read = q.shared_blks_read
  return {
    query_hash: q.query_hash,
    query_text: q.query_text,
    total_calls: q.calls,
    total_time_ms: q.total_time_ms,
    mean_time_ms: q.total_time_ms / q.calls,
    total_rows: q.rows,
    shared_blks_hit: hit,
    shared_blks_read: read,
    shared_blks_dirtied: q.shared_blks_dirtied,
    shared_blks_written: q.shared_blks_written,
    cache_hit_ratio: hit / (hit + read),
    temp_blks_read: q.temp_blks_read,
    temp_blks_written: q.temp_blks_written,
    blk_read_time_ms: q.blk_read_time_ms,
    blk_write_time_ms: q.blk_write_time_ms,
    read_bytes: q.read_bytes,
    memory_bytes: q.memory_bytes,
    errors: q.errors,
    p99_ms: q.p99_ms,
    first_bucket: minute,
  }
}

/** The tables migration 10 rebuilds WITHOUT ROWID on SQLite. */
const WITHOUT_ROWID_SINCE_10 = [
  'index_stats',
  'ingest_batches',
  'latest_tables',
  'metric_counters',
  'metric_gauges',
  'query_rollups',
  'query_stats',
  'replication_lag',
  'replication_slot_lag',
  'table_stats',
  'wait_stats',
]

/**
 * Every row of every table, each value as the store holds it (on SQLite through quote(), which keeps
 * the storage class: 1, 1.0 and '1' differ), sorted by all columns.
 */
async function dumpEveryTable(driver: SqlDriver): Promise<Record<string, unknown[]>> {
  const dump: Record<string, unknown[]> = {}
  for (const table of await tableNames(driver)) {
    if (table === 'schema_migrations') continue
    const columns = (await columnsOf(driver, table)).map((c) => `"${c.name}"`)
    const values = driver.dialect === 'sqlite' ? columns.map((c) => `quote(${c}) AS ${c}`) : columns
    dump[table] = await driver.all(
      `SELECT ${values.join(', ')} FROM "${table}" ORDER BY ${columns.map((_, i) => i + 1).join(', ')}`,
    )
  }
  return dump
}

/** What SQLite says of each table: its columns (table_xinfo), foreign keys, and whether it is WITHOUT ROWID. */
async function sqliteTables(
  driver: SqlDriver,
): Promise<Record<string, { columns: unknown[]; foreignKeys: unknown[]; withoutRowid: boolean }>> {
  const found: Record<string, { columns: unknown[]; foreignKeys: unknown[]; withoutRowid: boolean }> = {}
  for (const table of await tableNames(driver)) {
    found[table] = {
      columns: await driver.all('SELECT * FROM pragma_table_xinfo($1) ORDER BY cid', [table]),
      foreignKeys: await driver.all('SELECT * FROM pragma_foreign_key_list($1) ORDER BY id, seq', [table]),
      withoutRowid:
        (await driver.get<{ wr: number }>('SELECT wr FROM pragma_table_list WHERE name = $1', [table]))!.wr === 1,
    }
  }
  return found
}

const byName =
  <T extends { schema_name: string }>(name: (row: T) => string) =>
  (a: T, b: T) =>
    `${a.schema_name}.${name(a)}` < `${b.schema_name}.${name(b)}` ? -1 : 1

for (const kind of storeKinds) {
  describe(`migrations (${kind})`, () => {
    const cleanups: Array<() => void> = []
    afterEach(() => {
      for (const cleanup of cleanups.splice(0)) cleanup()
    })
    const location = async () => {
      const l = await freshStoreLocation(kind)
      cleanups.push(l.cleanup)
      return l
    }

    test('the versions run from 1 to latestVersion without gaps', () => {
      expect(migrations.map((m) => m.version)).toEqual(Array.from({ length: latestVersion }, (_, i) => i + 1))
    })

    test('the first open applies every migration, a second open applies none', async () => {
      const where = await location()
      const first = await openStore(where)
      expect(first.applied).toEqual(migrations.map((m) => m.version))
      await first.store.close()

      const second = await openStore(where)
      expect(second.applied).toEqual([])
      await second.store.close()

      const rows = await rawQuery(where, 'SELECT version, name FROM schema_migrations ORDER BY version')
      expect(rows.map((r) => ({ version: Number(r.version), name: r.name }))).toEqual(
        migrations.map((m) => ({ version: m.version, name: m.name })),
      )
    })

    test('the location names the data without credentials', async () => {
      const where = await location()
      const opened = await openStore(where)
      await opened.store.close()
      if (kind === 'sqlite') {
        expect(opened.location).toBe(join(where.dataDir, 'dbm.sqlite'))
      } else {
        const url = new URL(where.databaseUrl!)
        expect(opened.location).toBe(`postgres://postgres:***@${url.host}${url.pathname}`)
      }
    })

    test('a schema newer than this dbm refuses to open with SchemaTooNewError', async () => {
      const where = await location()
      await (await openStore(where)).store.close()
      const future = latestVersion + 1
      await rawQuery(
        where,
        `INSERT INTO schema_migrations (version, name, applied_at) VALUES (${future}, 'from the future', 0)`,
      )

      const error = await openStore(where).then(
        () => undefined,
        (e) => e,
      )
      expect(error).toBeInstanceOf(SchemaTooNewError)
      expect(error.message).toBe(
        `the store's schema is version ${future}, but this dbm knows versions up to ${latestVersion}: ` +
          'upgrade dbm (or point it at another data directory / database URL)',
      )
      // the refused open changed nothing
      const rows = await rawQuery(where, 'SELECT MAX(version) AS v FROM schema_migrations')
      expect(Number(rows[0]?.v)).toBe(future)
    })

    // Two dbm processes starting at once on one PostgreSQL store; a single process cannot race two
    // connections on one SQLite file (the second BEGIN IMMEDIATE blocks the only thread).
    test.skipIf(kind === 'sqlite')('concurrent first opens apply the migrations once (PostgreSQL only)', async () => {
      const where = await location()
      const opened = await Promise.all([openStore(where), openStore(where), openStore(where)])
      expect(opened.map((o) => o.applied).sort((a, b) => b.length - a.length)).toEqual([
        migrations.map((m) => m.version),
        [],
        [],
      ])
      await Promise.all(opened.map((o) => o.store.close()))
    })

    test.skipIf(kind === 'postgres')('the SQLite file is in WAL mode (SQLite only)', async () => {
      const where = await location()
      const { store } = await openStore(where)
      expect(await store.driver.get('PRAGMA journal_mode')).toEqual({ journal_mode: 'wal' })
      await store.close()
      // WAL is a property of the file: a connection of its own sees it too
      expect(await rawQuery(where, 'PRAGMA journal_mode')).toEqual([{ journal_mode: 'wal' }])
    })

    test('migrations 1 to 8 build the schema recorded in fixtures/schema-v8 (the DDL stores got before the migrations were frozen)', async () => {
      const driver = driverFor(await location())
      try {
        expect(await migrate(driver, Date.now, 8)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
        const fixture = JSON.parse(readFileSync(join(import.meta.dir, `fixtures/schema-v8.${kind}.json`), 'utf8'))
        expect(await schemaOf(driver)).toEqual(fixture)
      } finally {
        await driver.close()
      }
    })

    test(`migration 10 rebuilds WITHOUT ROWID (SQLite only) the tables their primary key is, with the same columns, key, foreign key, indexes and rows; the PostgreSQL schema is unchanged`, async () => {
      const driver = driverFor(await location())
      try {
        expect(await migrate(driver, () => FILLER_T0, 9)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9])
        await fillEveryTable(driver)
        // and rows as ingest writes them (NULLs, fractions, large counters) into every rebuilt table that a batch fills
        // (today's ingest writes the columns the family step adds for counters added after migration 10: they
        // are added for the ingest and dropped again, since no version-9 store had them; so are the tables of
        // migrations after 10, which today's ingest reads and writes too)
        const collectedAt = Math.floor(Date.now() / MINUTE) * MINUTE - 2 * MINUTE + 5_000
        const familyColumns = await driver.transaction((tx) => addFamilyColumns(tx))
        const laterTables = await tablesOfLaterMigrations(driver, 10)
        expect(
          (await new SqlStore(driver).ingest('id-0', fullBatch('name-0', collectedAt), collectedAt + 1_000)).kind,
        ).toBe('applied')
        for (const c of familyColumns) await driver.exec(`ALTER TABLE ${c.table} DROP COLUMN ${c.column}`)
        for (const table of laterTables.reverse()) await driver.exec(`DROP TABLE ${table}`)
        const before = { schema: await schemaOf(driver), rows: await dumpEveryTable(driver) }
        const tablesBefore = driver.dialect === 'sqlite' ? await sqliteTables(driver) : {}
        for (const table of WITHOUT_ROWID_SINCE_10)
          expect({ table, rows: before.rows[table]!.length > 0 }).toEqual({ table, rows: true })

        // the frozen migration alone: the family step's columns (counters added since) are not its doing
        expect(await migrate(driver, Date.now, 10, undefined, false)).toEqual([10])

        expect(await dumpEveryTable(driver)).toEqual(before.rows)
        if (before.schema.dialect === 'postgres') {
          expect(await schemaOf(driver)).toEqual(before.schema)
          return
        }
        // The same DDL but for WITHOUT ROWID and the name SQLite's rename quotes (whitespace aside: the
        // column migration 8 added sits on a line of its own now); the indexes exactly as they were.
        const spaced = (sql: string | null) => sql?.replace(/\s+/g, ' ')
        const expected = before.schema.objects.map((o) =>
          WITHOUT_ROWID_SINCE_10.includes(o.name)
            ? {
                ...o,
                sql: `${spaced(o.sql)!.replace(`CREATE TABLE ${o.name} (`, `CREATE TABLE "${o.name}" (`)} WITHOUT ROWID`,
              }
            : o,
        )
        const after = await schemaOf(driver)
        expect(after.dialect === 'sqlite' && after.objects.map((o) => ({ ...o, sql: spaced(o.sql) }))).toEqual(
          expected.map((o) => ({ ...o, sql: spaced(o.sql) })),
        )
        const tablesAfter = await sqliteTables(driver)
        expect(Object.keys(tablesAfter).filter((t) => tablesAfter[t]!.withoutRowid)).toEqual(
          [...WITHOUT_ROWID_SINCE_10, 'database_health'].sort(),
        )
        // Each table's columns and foreign keys as they were, but that a WITHOUT ROWID table's key is NOT NULL:
        // query_rollups' single-column key was not (a SQLite quirk; PostgreSQL's primary keys always are).
        const keyNotNull = (c: Record<string, unknown>) => (c.pk === 0 ? c : { ...c, notnull: 1 })
        expect(tablesAfter).toEqual(
          Object.fromEntries(
            Object.entries(tablesBefore).map(([t, info]) => [
              t,
              WITHOUT_ROWID_SINCE_10.includes(t)
                ? { ...info, columns: (info.columns as Record<string, unknown>[]).map(keyNotNull), withoutRowid: true }
                : info,
            ]),
          ),
        )
      } finally {
        await driver.close()
      }
    })

    test('a new store gets versions 1 to 10 from the frozen baseline (migrations/baseline-0010.ts): exactly the schema and schema_migrations rows of the ten migrations applied one by one', async () => {
      const oneByOne = driverFor(await location())
      const fromBaseline = driverFor(await location())
      try {
        const upTo10 = Array.from({ length: 10 }, (_, i) => i + 1)
        // A store that is not new never takes the baseline: to 9, then 10 (no family step: the frozen text alone).
        expect(await migrate(oneByOne, () => FILLER_T0, 9)).toEqual(upTo10.slice(0, 9))
        expect(await migrate(oneByOne, () => FILLER_T0, 10, undefined, false)).toEqual([10])
        const told: number[][] = []
        expect(
          await migrate(
            fromBaseline,
            () => FILLER_T0,
            10,
            (m, from) => told.push([m.version, from]),
            false,
          ),
        ).toEqual(upTo10)
        expect(told).toEqual(upTo10.map((v) => [v, 0]))

        expect(await schemaOf(fromBaseline)).toEqual(await schemaOf(oneByOne))
        if (kind === 'sqlite') expect(await sqliteTables(fromBaseline)).toEqual(await sqliteTables(oneByOne))
        const recorded = (d: SqlDriver) =>
          d.all('SELECT version, name, applied_at FROM schema_migrations ORDER BY version')
        expect(await recorded(fromBaseline)).toEqual(await recorded(oneByOne))
      } finally {
        await oneByOne.close()
        await fromBaseline.close()
      }
    })

    test('migration 14 gives every existing API key all three scopes and no creating key; keys made after it keep the scopes they are given', async () => {
      const where = await location()
      const driver = driverFor(where)
      try {
        expect(await migrate(driver, () => FILLER_T0, 13)).toEqual(Array.from({ length: 13 }, (_, i) => i + 1))
        await driver.run(
          "INSERT INTO organizations (id, name, slug, plan, verified, created_at) VALUES ('org-1', 'Acme', 'acme', 'free', $1, 1)",
          [true],
        )
        await driver.run(
          "INSERT INTO users (id, org_id, email, name, role, password_hash, created_at) VALUES ('user-1', 'org-1', 'ada@example.com', 'Ada', 'owner', 'h', 1)",
        )
        for (const [id, createdBy, revokedAt] of [
          ['key-1', 'user-1', null],
          ['key-2', null, null],
          ['key-3', 'user-1', 5],
        ] as const) {
          await driver.run(
            "INSERT INTO api_keys (id, org_id, key_id, name, secret_hash, created_by, created_at, revoked_at) VALUES ($1, 'org-1', $2, $1, 'h', $3, 1, $4)",
            [id, `kid-${id}`, createdBy, revokedAt],
          )
        }
      } finally {
        await driver.close()
      }
      const { store, applied } = await openStore(where)
      try {
        expect(applied).toEqual(migrations.filter((m) => m.version > 13).map((m) => m.version))
        for (const id of ['key-1', 'key-2', 'key-3']) {
          const key = await store.findApiKey(`kid-${id}`)
          expect({ id, scopes: key?.scopes, created_by_key: key?.created_by_key }).toEqual({
            id,
            scopes: ['ingest', 'read', 'admin'],
            created_by_key: null,
          })
        }
        expect((await store.listApiKeys('org-1', true)).map((k) => [k.id, k.creator?.email ?? null])).toEqual([
          ['key-1', 'ada@example.com'],
          ['key-2', null],
          ['key-3', 'ada@example.com'],
        ])
        const made = await store.createApiKey({
          id: 'key-4',
          org_id: 'org-1',
          key_id: 'kid-key-4',
          name: 'agent',
          secret_hash: 'h',
          scopes: ['ingest'],
          created_by: 'user-1',
          created_at: 2,
        })
        expect((await store.findApiKey(made.key_id))?.scopes).toEqual(['ingest'])
      } finally {
        await store.close()
      }
    })

    for (let from = 1; from <= latestVersion; from++) {
      test(`a store at version ${from}, filled in every table, migrates keeping its rows, then ingests and reads back a batch with every wire field set`, async () => {
        const where = await location()
        const driver = driverFor(where)
        let filled: Map<string, Record<string, unknown>[]>
        try {
          expect(await migrate(driver, () => FILLER_T0, from)).toEqual(Array.from({ length: from }, (_, i) => i + 1))
          filled = await fillEveryTable(driver)
        } finally {
          await driver.close()
        }

        const { store, applied } = await openStore(where)
        try {
          expect(applied).toEqual(migrations.filter((m) => m.version > from).map((m) => m.version))
          // every row of every table is still there, as written (and migration 7's rollups of them)
          for (const [table, rows] of filled) {
            const found = await store.driver.all(
              `SELECT ${Object.keys(rows[0]!)
                .map((c) => `"${c}"`)
                .join(', ')} FROM "${table}"`,
            )
            expect({ table, rows: sortedRows(found) }).toEqual({
              table,
              rows: sortedRows(rowsAfterMigrating(table, rows, from)),
            })
          }
          expect((await store.listDatabases('id-0')).map((d) => d.name)).toEqual(['name-0'])

          // a batch with every field of the wire set, into the old database: every column ingest writes exists
          const collectedAt = Math.floor(Date.now() / MINUTE) * MINUTE - 2 * MINUTE + 5_000
          const minute = collectedAt - 5_000
          const batch = fullBatch('name-0', collectedAt)
          expect([...Value.Errors(IngestBatchSchema, batch)].map((e) => `${e.path}: ${e.message}`)).toEqual([])
          expect((await store.ingest('id-0', batch, collectedAt + 1_000)).kind).toBe('applied')

          const window = { since: minute - HOUR, until: minute + MINUTE }
          const queries = batch
            .query_stats!.map((q) => queryRowOf(q, minute))
            .sort((a, b) => b.total_calls - a.total_calls)
          expect((await store.listQueryStats('id-0', window, 'calls', 100)) as unknown).toEqual(queries)

          const tables = await store.objects.listTables('id-0', 'size', 100)
          const sentTables = batch.tables!.map(({ delta: _, ...t }) => ({ ...t, ts: collectedAt }))
          expect(tables.sort(byName((t) => t.table_name)) as unknown).toEqual(
            sentTables.sort(byName((t) => t.table_name)),
          )
          const indexes = await store.objects.listIndexes('id-0', 'size', 100)
          const sentIndexes = batch.indexes!.map(({ delta: _, ...i }) => ({ ...i, ts: collectedAt }))
          expect(indexes.sort(byName((i) => i.index_name)) as unknown).toEqual(
            sentIndexes.sort(byName((i) => i.index_name)),
          )

          // the minute row holds the deltas and the gauges
          const table = batch.tables![0]!
          const series = await store.objects.tableSeries('id-0', table.schema_name, table.table_name, window)
          const point = series.points[0]! as Record<string, number | null>
          expect(Object.keys(point)).toEqual(expect.arrayContaining(Object.keys(table.delta!)))
          const sent = { ...table, ...table.delta } as Record<string, unknown>
          expect(series as unknown).toEqual({
            resolution: 60,
            points: [Object.fromEntries(Object.keys(point).map((k) => [k, k === 'ts' ? minute : sent[k]]))],
          })
        } finally {
          await store.close()
        }
      })
    }
  })
}
