// The family step (src/server/store/family-columns.ts): after the frozen migrations, every field of every
// counter family (src/shared/families.ts) has its column, on both stores; a field a family gains is added
// to an existing store, with rows it already holds kept (statement sums at 0, object rows null), once; and
// a field name that is not a plain identifier is refused rather than put into DDL.
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdirSync } from 'node:fs'
import postgres from 'postgres'
import { join } from 'node:path'
import type { SqlDriver } from '../../src/server/store/driver.ts'
import { addFamilyColumns } from '../../src/server/store/family-columns.ts'
import { latestVersion, migrate } from '../../src/server/store/migrations.ts'
import { PostgresDriver } from '../../src/server/store/postgres/driver.ts'
import { SqliteDriver } from '../../src/server/store/sqlite/driver.ts'
import {
  FAMILY_TABLES,
  type FamilyTable,
  type Field,
  INDEX_FIELDS,
  STATEMENT_FIELDS,
  TABLE_FIELDS,
  pgSelectList,
} from '../../src/shared/families.ts'
import { freshStoreLocation, storeKinds } from '../support/server.ts'
import { columnsOf } from '../support/store-schema.ts'

const cleanups: (() => void)[] = []
afterAll(() => {
  for (const c of cleanups) c()
})

async function freshDriver(kind: (typeof storeKinds)[number]): Promise<SqlDriver> {
  const where = await freshStoreLocation(kind)
  cleanups.push(where.cleanup)
  if (where.databaseUrl) return new PostgresDriver(where.databaseUrl)
  mkdirSync(where.dataDir, { recursive: true })
  return new SqliteDriver(join(where.dataDir, 'dbm.sqlite'))
}

const probeCounter = { key: 'probe_counter', kind: 'counter', unit: 'tuples' } as const satisfies Field
const probeMs = { key: 'probe_time_ms', kind: 'counter', unit: 'ms' } as const satisfies Field

test('every family field is a plain identifier, and its unit is ms exactly when its name ends in _ms (the API rounds durations by unit)', () => {
  for (const field of [...STATEMENT_FIELDS, ...TABLE_FIELDS, ...INDEX_FIELDS] as readonly Field[]) {
    expect({ key: field.key, plain: /^[a-z][a-z0-9_]*$/.test(field.key), ms: field.key.endsWith('_ms') }).toEqual({
      key: field.key,
      plain: true,
      ms: field.unit === 'ms',
    })
  }
})

describe.each(storeKinds)('family step on the %s store', (kind) => {
  test('after migrating, every field of every family has a column in each of its tables, of its type', async () => {
    const driver = await freshDriver(kind)
    try {
      await migrate(driver)
      for (const family of FAMILY_TABLES) {
        const columns = new Map((await columnsOf(driver, family.table)).map((c) => [c.name, c]))
        for (const field of family.fields) {
          expect({ table: family.table, field: field.key, kind: columns.get(field.key)?.kind }).toEqual({
            table: family.table,
            field: field.key,
            kind: field.unit === 'ms' ? 'double' : 'integer',
          })
        }
      }
      // and the step has nothing left to add
      expect(await driver.transaction((tx) => addFamilyColumns(tx))).toEqual([])
    } finally {
      await driver.close()
    }
  })

  test('a field a family gains becomes a column of an existing store, rows kept (sums 0, objects null), added once', async () => {
    const driver = await freshDriver(kind)
    try {
      const added: string[] = []
      await migrate(driver, Date.now, latestVersion, undefined, (c) => added.push(`${c.table}.${c.column}`))
      // what a new store got from the family step: fields added to families since the frozen migrations
      const familyFields = new Set(FAMILY_TABLES.flatMap((f) => f.fields.map((field) => `${f.table}.${field.key}`)))
      for (const column of added) expect({ column, family: familyFields.has(column) }).toEqual({ column, family: true })
      // A database with one statement minute and one table minute, written before the fields exist.
      await driver.run(
        `INSERT INTO organizations (id, name, slug, plan, verified, created_at) VALUES ('o1', 'org', 'org', 'free', $1, 0)`,
        [true],
      )
      await driver.run(
        `INSERT INTO databases (id, org_id, name, engine, host, port, tags, poll_interval_seconds, collect_explain_plans, collect_replication,
           disabled_collectors, created_at, updated_at)
         VALUES ('d1', 'o1', 'db', 'postgres', 'h', 5432, '{}', 10, $1, $1, '[]', 0, 0)`,
        [true],
      )
      await driver.run(
        `INSERT INTO query_stats (database_id, resolution, bucket, query_hash, calls, total_time_ms, rows, shared_blks_hit, shared_blks_read,
           shared_blks_dirtied, shared_blks_written, temp_blks_read, temp_blks_written, blk_read_time_ms, blk_write_time_ms, read_bytes, memory_bytes, errors)
         VALUES ('d1', 60, 60000, 'q1', 3, 1.5, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)`,
      )
      await driver.run(
        `INSERT INTO table_stats (database_id, schema_name, table_name, resolution, bucket, sampled_at, seq_scan) VALUES ('d1', 'public', 't', 60, 60000, 60000, 7)`,
      )

      const grown: FamilyTable[] = FAMILY_TABLES.map((f) =>
        f.table === 'query_stats'
          ? { ...f, fields: [...STATEMENT_FIELDS, probeMs] }
          : f.table === 'table_stats'
            ? { ...f, fields: [...TABLE_FIELDS, probeCounter] }
            : f,
      )
      const first = await driver.transaction((tx) => addFamilyColumns(tx, grown))
      const [sqliteDouble, sqliteInteger] = ['REAL NOT NULL DEFAULT 0', 'INTEGER']
      expect(first).toEqual([
        {
          table: 'query_stats',
          column: 'probe_time_ms',
          definition: kind === 'sqlite' ? sqliteDouble : 'DOUBLE PRECISION NOT NULL DEFAULT 0',
        },
        { table: 'table_stats', column: 'probe_counter', definition: kind === 'sqlite' ? sqliteInteger : 'BIGINT' },
      ])
      expect(await driver.transaction((tx) => addFamilyColumns(tx, grown))).toEqual([])

      const statement = await driver.get<{ calls: unknown; probe_time_ms: unknown }>(
        `SELECT calls, probe_time_ms FROM query_stats WHERE query_hash = 'q1'`,
      )
      expect({ calls: Number(statement!.calls), probe: Number(statement!.probe_time_ms) }).toEqual({
        calls: 3,
        probe: 0,
      })
      const table = await driver.get<{ seq_scan: unknown; probe_counter: unknown }>(
        `SELECT seq_scan, probe_counter FROM table_stats WHERE table_name = 't'`,
      )
      expect({ seq_scan: Number(table!.seq_scan), probe: table!.probe_counter }).toEqual({ seq_scan: 7, probe: null })
    } finally {
      await driver.close()
    }
  })

  test('a field whose name is not a plain identifier is refused, and nothing of the step is kept', async () => {
    const driver = await freshDriver(kind)
    try {
      await migrate(driver)
      const hostile = {
        key: 'x INTEGER); DROP TABLE databases; --',
        kind: 'counter',
        unit: 'count',
      } as const satisfies Field
      const grown: FamilyTable[] = [
        { table: 'index_stats', fields: [...INDEX_FIELDS, probeCounter, hostile], notNullZero: false },
      ]
      const error = await driver
        .transaction((tx) => addFamilyColumns(tx, grown))
        .then(
          () => undefined,
          (e: Error) => e.message,
        )
      expect(error).toContain('plain identifier')
      const names = (await columnsOf(driver, 'index_stats')).map((c) => c.name)
      expect(names).not.toContain('probe_counter')
      expect((await columnsOf(driver, 'databases')).length).toBeGreaterThan(0)
    } finally {
      await driver.close()
    }
  })
})

describe('family step on a PostgreSQL store in use', () => {
  test('a reader holding a family table: the step waits at most its lock timeout, gives way, and is tried again until it gets the table', async () => {
    const where = await freshStoreLocation('postgres')
    cleanups.push(where.cleanup)
    const driver = new PostgresDriver(where.databaseUrl!)
    const holder = postgres(where.databaseUrl!, { max: 1, onnotice: () => {} })
    let release = () => {}
    try {
      await migrate(driver)
      await driver.exec(
        'ALTER TABLE latest_tables DROP COLUMN n_tup_newpage_upd; ALTER TABLE table_stats DROP COLUMN n_tup_newpage_upd',
      )
      // Another serve's ingest (or a dashboard read) in a transaction on latest_tables.
      const released = new Promise<void>((resolve) => (release = resolve))
      let locked!: () => void
      const holds = new Promise<void>((resolve) => (locked = resolve))
      const holding = holder.begin(async (tx) => {
        await tx`SELECT count(*) FROM latest_tables`
        locked()
        await released
      })
      await holds
      const retries: string[] = []
      const added: string[] = []
      const migrated = migrate(
        driver,
        Date.now,
        latestVersion,
        undefined,
        (c) => added.push(`${c.table}.${c.column}`),
        (attempt, cause) => {
          retries.push(`${attempt}: ${(cause as Error).message}`)
          // Given way once: the reader ends, and the next try gets the tables.
          if (attempt === 1) release()
        },
      )
      expect(await migrated).toEqual([])
      await holding
      expect(retries).toEqual([expect.stringMatching(/^1: .*lock timeout/)])
      expect(added.sort()).toEqual(['latest_tables.n_tup_newpage_upd', 'table_stats.n_tup_newpage_upd'])
    } finally {
      release()
      await holder.end()
      await driver.close()
    }
  })
})

test('pgSelectList: a plain column by the version that has it (prefixed), an expression as written, NULL where the version has none', () => {
  const fields = [
    { key: 'idx_scan', kind: 'counter', unit: 'scans', pg: 'idx_scan' },
    {
      key: 'blks_read',
      kind: 'counter',
      unit: 'blocks',
      pg: 'pg_stat_get_blocks_fetched(s.indexrelid) - pg_stat_get_blocks_hit(s.indexrelid)',
    },
    {
      key: 'newer',
      kind: 'counter',
      unit: 'count',
      pg: [
        [16, 'newer_col'],
        [14, 'older_col'],
      ],
    },
    { key: 'clickhouse_only', kind: 'counter', unit: 'bytes' },
  ] as const satisfies readonly Field[]
  expect(pgSelectList(fields, 17, 's.')).toBe(
    's.idx_scan, pg_stat_get_blocks_fetched(s.indexrelid) - pg_stat_get_blocks_hit(s.indexrelid) AS blks_read, s.newer_col AS newer',
  )
  expect(pgSelectList(fields, 14)).toBe(
    'idx_scan, pg_stat_get_blocks_fetched(s.indexrelid) - pg_stat_get_blocks_hit(s.indexrelid) AS blks_read, older_col AS newer',
  )
  expect(pgSelectList(fields, 13)).toContain('NULL AS newer')
})
