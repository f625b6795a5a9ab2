// SQLite store layout (`bun bench/store-layout.ts`): what N databases' real-shaped batches (test/support/
// agent-batch.ts, 10 s apart on a simulated clock) cost in the file, per table: the table's own b-tree,
// its primary-key index (SQLite's automatic index of a rowid table's key; none in a WITHOUT ROWID table)
// and its other indexes, from the dbstat virtual table after VACUUM. With `--before V`, the same batches
// also go into a store built at schema version V, in the same run, alternating which store goes first,
// so the two ingest times compare; that store is then migrated to the latest version (timed). Then each
// store's retention sweep deletes every database's minute rows (timed per database).
// Options: --databases N, --batches N (per database), --before VERSION (0: the latest schema only; 9 or
// later, and only while today's ingest writes no column that version lacks), --moved PERCENT (tables
// whose counters move per cycle; bench:fleet's batches move about 21 %).
// Migration 10 (WITHOUT ROWID) was measured with `--before 9`.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { latestVersion, migrate } from '../src/server/store/migrations.ts'
import { SqlStore } from '../src/server/store/sql-store.ts'
import { SqliteDriver } from '../src/server/store/sqlite/driver.ts'
import { REAL_SHAPE, agentBatch } from '../test/support/agent-batch.ts'
import { fmt, machine, median, parseArgs, percentile } from './common.ts'

interface Options {
  databases: number
  batches: number
  before: number
  moved: number
}

const HOUR = 3_600_000

interface Subject {
  version: number
  dir: string
  driver: SqliteDriver
  store: SqlStore
  orgId: string
  ingestMs: number[]
}

interface TableSize {
  table: number
  key: number
  other: number
}

async function subject(version: number): Promise<Subject> {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-store-layout-'))
  const driver = new SqliteDriver(join(dir, 'dbm.sqlite'))
  await migrate(driver, Date.now, version)
  const store = new SqlStore(driver)
  const { org } = await store.createAccount({
    org: { name: 'Bench', slug: `bench-${version}`, plan: 'free' },
    user: { email: `bench-${version}@example.com`, name: 'Bench', passwordHash: 'hash', role: 'owner' },
  })
  return { version, dir, driver, store, orgId: org.id, ingestMs: [] }
}

/** The file's size after VACUUM, and each table's bytes by b-tree: its own, its key's automatic index, its other indexes. */
async function sizes(driver: SqliteDriver): Promise<{ file: number; tables: Map<string, TableSize> }> {
  await driver.exec('VACUUM')
  const pages = await driver.get<{ n: number }>(
    'SELECT page_count * page_size AS n FROM pragma_page_count, pragma_page_size',
  )
  const rows = await driver.all<{ tbl: string; name: string; type: string; bytes: number }>(
    `SELECT m.tbl_name AS tbl, m.name, m.type, SUM(s.pgsize) AS bytes FROM dbstat s JOIN sqlite_master m ON m.name = s.name GROUP BY m.name`,
  )
  const tables = new Map<string, TableSize>()
  for (const r of rows) {
    const size = tables.get(r.tbl) ?? { table: 0, key: 0, other: 0 }
    if (r.type === 'table') size.table += r.bytes
    else if (r.name.startsWith('sqlite_autoindex_')) size.key += r.bytes
    else size.other += r.bytes
    tables.set(r.tbl, size)
  }
  return { file: pages!.n, tables }
}

async function main(): Promise<void> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    { databases: 10, batches: 360, before: 0, moved: 100 },
    {
      databases: [1, 2_000],
      batches: [1, 100_000],
      before: [0, latestVersion - 1],
      moved: [0, 100],
    },
  )
  if (o.before !== 0 && o.before < 9)
    throw new Error('--before must be 9 or later: ingest writes tables older schemas lack')
  const subjects = [await subject(latestVersion)]
  if (o.before) subjects.unshift(await subject(o.before))
  try {
    const start = Math.floor(Date.now() / HOUR) * HOUR - 24 * HOUR
    const shape = { ...REAL_SHAPE, moved: (i: number) => (i * 37) % 100 < o.moved }
    let bytes = 0
    for (let k = 0; k < o.batches; k++) {
      const collectedAt = start + k * 10_000
      for (let d = 0; d < o.databases; d++) {
        const batch = agentBatch(`db${d}`, collectedAt, k, shape)
        if (k === 0 && d === 0) bytes = JSON.stringify(batch).length
        const order = (k + d) % 2 === 0 ? subjects : [...subjects].reverse()
        for (const s of order) {
          const t0 = performance.now()
          const outcome = await s.store.ingest(s.orgId, batch, collectedAt + 1_000)
          s.ingestMs.push(performance.now() - t0)
          if (outcome.kind !== 'applied') throw new Error(`batch ${k} of db${d}: ${outcome.kind}`)
        }
      }
    }

    const measured: { s: Subject; size: Awaited<ReturnType<typeof sizes>> }[] = []
    for (const s of subjects) measured.push({ s, size: await sizes(s.driver) })

    let migration: { ms: number; file: number } | undefined
    if (o.before) {
      const old = subjects[0]!
      const t0 = performance.now()
      await migrate(old.driver)
      const ms = performance.now() - t0
      migration = { ms, file: (await sizes(old.driver)).file }
    }

    // Retention: every minute row goes (their hours are rolled up first, as the sweep always does).
    const sweepMs = new Map<Subject, number[]>()
    const until = start + Math.ceil((o.batches * 10_000) / HOUR) * HOUR
    for (const s of subjects) {
      const times: number[] = []
      for (const { id } of await s.store.retention.databases()) {
        const t0 = performance.now()
        await s.store.retention.sweepDatabase(
          id,
          { before: start - HOUR, minutesBefore: until, rollUpTo: until },
          5_000,
        )
        times.push(performance.now() - t0)
      }
      sweepMs.set(s, times)
    }

    const m = await machine()
    const mib = (n: number) => fmt(n / 1_048_576, 2)
    const names = [
      ...new Set(
        measured.flatMap(({ size }) =>
          [...size.tables].filter(([, t]) => t.table + t.key + t.other >= 65_536).map(([n]) => n),
        ),
      ),
    ]
    const total = (t: TableSize | undefined) => (t ? t.table + t.key + t.other : 0)
    names.sort((a, b) => total(measured[0]!.size.tables.get(b)) - total(measured[0]!.size.tables.get(a)))
    const label = (s: Subject) => `v${s.version}`
    console.log(
      [
        `- Command: \`${['bun bench/store-layout.ts', ...process.argv.slice(2)].join(' ')}\``,
        `- Commit: ${m.commit}; machine: ${m.line}`,
        `- ${o.databases} databases x ${o.batches} batches (${fmt(bytes / 1024)} KiB of JSON each, 10 s apart: ${fmt((o.batches * 10) / 60, 1)} minutes), ${o.moved}% of tables moved per cycle`,
        ``,
        `| schema | ingest median ms | p90 ms | p99 ms | file after VACUUM, MiB | retention sweep median ms per database |`,
        `|---|---:|---:|---:|---:|---:|`,
        ...measured.map(
          ({ s, size }) =>
            `| ${label(s)} | ${fmt(median(s.ingestMs), 2)} | ${fmt(percentile(s.ingestMs, 0.9), 2)} | ${fmt(percentile(s.ingestMs, 0.99), 2)} | ${mib(size.file)} | ${fmt(median(sweepMs.get(s)!), 1)} |`,
        ),
        ...(migration
          ? [
              ``,
              `Migrating the v${o.before} store to v${latestVersion}: ${fmt(migration.ms)} ms; its file after VACUUM: ${mib(migration.file)} MiB.`,
            ]
          : []),
        ``,
        `MiB per table (tables of 64 KiB or more): table / primary-key index / other indexes`,
        ``,
        `| table | ${measured.map(({ s }) => label(s)).join(' | ')} |`,
        `|---|${measured.map(() => '---:').join('|')}|`,
        ...names.map((n) => {
          const cells = measured.map(({ size }) => {
            const t = size.tables.get(n)
            return t ? `${mib(total(t))} (${mib(t.table)} / ${mib(t.key)} / ${mib(t.other)})` : 'n/a'
          })
          return `| ${n} | ${cells.join(' | ')} |`
        }),
      ].join('\n'),
    )
  } finally {
    for (const s of subjects) {
      await s.store.close()
      rmSync(s.dir, { recursive: true, force: true })
    }
  }
}

if (import.meta.main) await main()
