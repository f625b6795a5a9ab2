// What session and lock history costs per monitored database (`bun bench/session-history.ts`): a
// pgbench-shaped load (pgbench's TPC-B-like transaction: UPDATE pgbench_accounts, SELECT its balance,
// UPDATE pgbench_tellers, UPDATE pgbench_branches, INSERT INTO pgbench_history, by --clients sessions at
// scale --scale) on a real PostgreSQL 17, watched by the real agent polling every second into a SQLite
// store, for --seconds. Then the history's rows and bytes: per snapshot (dbstat after VACUUM: the table's
// b-tree and its indexes, less an empty store's) and per chain, the share of snapshots and chains that compaction
// keeps past a day, and the bytes per database-day at the default 10 s poll (8,640 snapshots). The same
// rows are copied into a PostgreSQL store, whose sizes (pg_total_relation_size: heap, TOAST, indexes,
// less the empty tables') are given beside. Options: --clients N (10), --scale N (10), --seconds N (120).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { sessionHistoryLimits } from '../src/server/limits.ts'
import { openStore } from '../src/server/store/open.ts'
import { startAgentRig } from '../test/support/agent.ts'
import { startPostgres } from '../test/support/postgres.ts'
import { freshStoreLocation } from '../test/support/server.ts'
import { fmt, machine, parseArgs } from './common.ts'

const options = parseArgs(
  process.argv.slice(2),
  { clients: 10, scale: 10, seconds: 120 },
  { clients: [1, 200], scale: [1, 1000], seconds: [10, 3600] },
)
const POLLS_PER_DAY = 8640
const TABLES = ['session_snapshots', 'lock_chains', 'lock_chain_members'] as const

const pg = await startPostgres(17)
const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-history-'))
const dsn = await pg.freshDatabase()
const setup = postgres(dsn, { max: 1, onnotice: () => {} })
const scale = options.scale
await setup.unsafe(`
  CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88));
  CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84));
  CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
  CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
  INSERT INTO pgbench_branches SELECT g, 0 FROM generate_series(1, ${scale}) g;
  INSERT INTO pgbench_tellers SELECT g, (g - 1) / 10 + 1, 0 FROM generate_series(1, ${10 * scale}) g;
  INSERT INTO pgbench_accounts SELECT g, (g - 1) / 100000 + 1, 0 FROM generate_series(1, ${100_000 * scale}) g;
`)
await setup.unsafe('VACUUM ANALYZE')

const rig = await startAgentRig(dsn, 'pgbench', dir)
let running = true
let transactions = 0
const random = (n: number) => 1 + Math.floor(Math.random() * n)
const clients = Array.from({ length: options.clients }, async (_, i) => {
  const sql = postgres(dsn, { max: 1, onnotice: () => {}, connection: { application_name: `pgbench-${i}` } })
  while (running) {
    const aid = random(100_000 * scale)
    const bid = random(scale)
    const tid = random(10 * scale)
    const delta = Math.floor(Math.random() * 10_001) - 5000
    await sql.begin(async (tx) => {
      await tx`UPDATE pgbench_accounts SET abalance = abalance + ${delta} WHERE aid = ${aid}`
      await tx`SELECT abalance FROM pgbench_accounts WHERE aid = ${aid}`
      await tx`UPDATE pgbench_tellers SET tbalance = tbalance + ${delta} WHERE tid = ${tid}`
      await tx`UPDATE pgbench_branches SET bbalance = bbalance + ${delta} WHERE bid = ${bid}`
      await tx`INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (${tid}, ${bid}, ${aid}, ${delta}, CURRENT_TIMESTAMP)`
    })
    transactions++
  }
  await sql.end()
})
await Bun.sleep(options.seconds * 1000)
running = false
await Promise.all(clients)
await rig.agent.stop()

const driver = rig.server.store.driver
const id = rig.dbId
const count = async (sql: string) => Number((await driver.get<{ n: number }>(sql, [id]))!.n)
const snapshots = await count('SELECT COUNT(*) AS n FROM session_snapshots WHERE database_id = $1')
const blocked = await count('SELECT COUNT(*) AS n FROM session_snapshots WHERE database_id = $1 AND blocked > 0')
const keptSnapshots = await count(
  `SELECT COUNT(*) AS n FROM session_snapshots WHERE database_id = $1 AND (longest_wait_ms >= ${sessionHistoryLimits.longWaitMs} OR longest_ms >= ${sessionHistoryLimits.longMs})`,
)
const chains = await count('SELECT COUNT(*) AS n FROM lock_chains WHERE database_id = $1')
const keptChains = await count(
  `SELECT COUNT(*) AS n FROM lock_chains WHERE database_id = $1 AND last_seen - started_at >= ${sessionHistoryLimits.longWaitMs}`,
)
const members = await count('SELECT COUNT(*) AS n FROM lock_chain_members WHERE database_id = $1')
const stored = await driver.all<{ activity: string | null; locks: string | null }>(
  'SELECT activity, locks FROM session_snapshots WHERE database_id = $1',
  [id],
)
const json = (packed: string | null) =>
  packed === null ? '[]' : Buffer.from(Bun.inflateSync(Buffer.from(packed, 'base64'))).toString('utf8')
const avg = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length)
const payload = {
  sessions: avg(stored.map((r) => JSON.parse(json(r.activity)).length)),
  activity: avg(stored.map((r) => json(r.activity).length)),
  activityPacked: avg(stored.map((r) => r.activity?.length ?? 0)),
  locks: avg(stored.map((r) => json(r.locks).length)),
  locksPacked: avg(stored.map((r) => r.locks?.length ?? 0)),
}

/** Each history table's bytes in a SQLite store (after VACUUM): its b-tree and its indexes'. */
async function sqliteSizes(d: typeof driver): Promise<Map<string, number>> {
  await d.exec('VACUUM')
  const sizes = new Map<string, number>()
  for (const table of TABLES) {
    const row = await d.get<{ n: number }>(
      "SELECT SUM(pgsize) AS n FROM dbstat WHERE name = $1 OR name IN (SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = $1)",
      [table],
    )
    sizes.set(table, Number(row?.n ?? 0))
  }
  return sizes
}
// Less the empty tables' pages (a fresh store's), so that a short run is not dominated by them.
const empty = await freshStoreLocation('sqlite')
const emptyStore = (await openStore(empty)).store
const sqliteEmpty = await sqliteSizes(emptyStore.driver)
await emptyStore.close()
empty.cleanup()
const sqliteBytes = new Map([...(await sqliteSizes(driver))].map(([t, n]) => [t, n - sqliteEmpty.get(t)!]))

// The same rows in a PostgreSQL store.
const location = await freshStoreLocation('postgres')
const { store: pgStore } = await openStore(location)
const { org } = await pgStore.createAccount({
  org: { name: 'Bench', slug: 'bench', plan: 'free' },
  user: { email: 'bench@example.com', name: 'B', passwordHash: 'x', role: 'owner' },
})
const created = await pgStore.createDatabase(
  org.id,
  { name: 'pgbench', engine: 'postgres', engine_version: '17', host: 'h', port: 5432, tags: {} },
  Date.now(),
)
if (created === 'limit') throw new Error('limit')
const pgSize = async (table: string) =>
  Number((await pgStore.driver.get<{ n: number }>('SELECT pg_total_relation_size($1) AS n', [table]))!.n)
const pgEmpty = new Map<string, number>()
for (const table of TABLES) pgEmpty.set(table, await pgSize(table))
for (const table of TABLES) {
  const rows = await driver.all<Record<string, unknown>>(`SELECT * FROM ${table} WHERE database_id = $1`, [id])
  for (const row of rows) {
    const columns = Object.keys(row)
    await pgStore.driver.run(
      `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
      columns.map((c) => (c === 'database_id' ? created.id : row[c])),
    )
  }
}
const pgBytes = new Map<string, number>()
for (const table of TABLES) pgBytes.set(table, (await pgSize(table)) - pgEmpty.get(table)!)
await pgStore.close()
location.cleanup()

const perSnapshot = (bytes: Map<string, number>) => bytes.get('session_snapshots')! / snapshots
const perChain = (bytes: Map<string, number>) =>
  chains === 0 ? 0 : (bytes.get('lock_chains')! + bytes.get('lock_chain_members')!) / chains
const day = (bytes: Map<string, number>) =>
  POLLS_PER_DAY * (perSnapshot(bytes) + (chains / snapshots) * perChain(bytes))
const kept = (bytes: Map<string, number>) =>
  POLLS_PER_DAY * ((keptSnapshots / snapshots) * perSnapshot(bytes) + (keptChains / snapshots) * perChain(bytes))
const mb = (n: number) => `${fmt(n / 1024 / 1024, 2)} MB`

console.log(`## Session history under a pgbench-shaped load (${new Date().toISOString().slice(0, 10)})

${(await machine()).line}, commit ${(await machine()).commit}

${options.clients} clients at scale ${scale} for ${options.seconds} s: ${fmt(transactions / options.seconds, 0)} transactions/s; the agent polled every second.

| | value |
|---|---|
| snapshots kept | ${snapshots} (${blocked} with a session waiting for a lock) |
| sessions per snapshot (avg) | ${fmt(payload.sessions, 1)} |
| activity JSON per snapshot (avg), and as stored (deflated, base64) | ${fmt(payload.activity, 0)} B, ${fmt(payload.activityPacked, 0)} B |
| locks JSON per snapshot (avg, only those that wait or block), and as stored | ${fmt(payload.locks, 0)} B, ${fmt(payload.locksPacked, 0)} B |
| lock chains / members | ${chains} / ${members} (${fmt(chains / snapshots, 2)} chains per snapshot) |
| SQLite bytes per snapshot (table and indexes) | ${fmt(perSnapshot(sqliteBytes), 0)} B |
| SQLite bytes per chain (with its members) | ${fmt(perChain(sqliteBytes), 0)} B |
| PostgreSQL bytes per snapshot (heap + TOAST + index) | ${fmt(perSnapshot(pgBytes), 0)} B |
| PostgreSQL bytes per chain (with its members) | ${fmt(perChain(pgBytes), 0)} B |
| **per database-day at a 10 s poll, SQLite** | **${mb(day(sqliteBytes))}** |
| **per database-day at a 10 s poll, PostgreSQL** | **${mb(day(pgBytes))}** |
| kept past a day (waits of ${sessionHistoryLimits.longWaitMs / 1000} s, statements of ${sessionHistoryLimits.longMs / 60_000} min, chains of ${sessionHistoryLimits.longWaitMs / 1000} s) | ${keptSnapshots} snapshots, ${keptChains} chains: ${mb(kept(sqliteBytes))} per database-day on SQLite |
`)

await rig.server.stop()
await setup.end()
await pg.stop()
rmSync(dir, { recursive: true, force: true })
