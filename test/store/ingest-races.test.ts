// Ingest racing another serve on one PostgreSQL store (hostile review of the two-exchange ingest): serve A
// ingests batches of database `h` while serve B deletes `h` again and again. A fresh batch is never answered
// "duplicate" (the agent would drop it); it is applied (under the id it then has) or fails with an error the
// agent retries; and every applied batch of a database that still exists is recorded under that id.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { migrate } from '../../src/server/store/migrations.ts'
import { PostgresDriver } from '../../src/server/store/postgres/driver.ts'
import { SqlStore } from '../../src/server/store/sql-store.ts'
import { agentBatch } from '../support/agent-batch.ts'
import { sharedPostgres } from '../support/postgres.ts'

const SHAPE = { statements: 3, tables: 3, indexes: 3 }
const T0 = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3 * 3_600_000

let url = ''
let admin: postgres.Sql
let a: PostgresDriver
let b: PostgresDriver
let storeA: SqlStore
let storeB: SqlStore
let orgId = ''

beforeAll(async () => {
  url = await (await sharedPostgres()).freshDatabase()
  admin = postgres(url, { max: 2, onnotice: () => {} })
  a = new PostgresDriver(url)
  b = new PostgresDriver(url)
  await migrate(a)
  storeA = new SqlStore(a)
  storeB = new SqlStore(b)
  const { org } = await storeA.createAccount({
    org: { name: 'Race', slug: `race-${Date.now()}`, plan: 'free' },
    user: { email: `race-${Date.now()}@example.com`, name: 'Ada', passwordHash: 'hash', role: 'owner' },
  })
  orgId = org.id
}, 60_000)

afterAll(async () => {
  await a?.close()
  await b?.close()
  await admin?.end()
})

test('another serve deleting the database meanwhile: no fresh batch is answered duplicate, every applied one is recorded', async () => {
  let stop = false
  const deleter = (async () => {
    let deleted = 0
    while (!stop) {
      for (const { id } of await b.all<{ id: string }>('SELECT id FROM databases WHERE org_id = $1 AND name = $2', [
        orgId,
        'h',
      ])) {
        if (await storeB.deleteDatabase(orgId, id)) deleted++
      }
      await Bun.sleep(Math.random() * 3)
    }
    return deleted
  })()
  const outcomes: Record<string, number> = {}
  const wrong: string[] = []
  const worker = async (w: number) => {
    for (let i = 0; i < 250; i++) {
      const at = T0 + (2 * i + w) * 30_000
      const batch = agentBatch('h', at, 2 * i + w, SHAPE)
      const result = await storeA.ingest(orgId, batch, at + 1_000).catch((e: Error) => e)
      const kind =
        result instanceof Error
          ? /foreign key|violates/i.test(result.message)
            ? 'retryable error'
            : `error: ${result.message.slice(0, 80)}`
          : result.kind
      outcomes[kind] = (outcomes[kind] ?? 0) + 1
      if (result instanceof Error) continue
      if (result.kind === 'duplicate') wrong.push(`fresh batch ${batch.batch_id} answered duplicate`)
      if (result.kind === 'applied') {
        const recorded = await admin`SELECT database_id FROM ingest_batches WHERE batch_id = ${batch.batch_id}`
        const exists = (await admin`SELECT 1 FROM databases WHERE id = ${result.database.id}`).length > 0
        if (exists && (recorded.length !== 1 || recorded[0]!.database_id !== result.database.id))
          wrong.push(`batch ${batch.batch_id} recorded as ${JSON.stringify(recorded)}`)
      }
    }
  }
  await Promise.all([worker(0), worker(1)])
  stop = true
  const deleted = await deleter
  expect(wrong).toEqual([])
  // the race happened: deletes interleaved with ingests, and only the expected outcomes came out
  expect(deleted).toBeGreaterThan(10)
  expect(Object.keys(outcomes).filter((k) => !['applied', 'retryable error'].includes(k))).toEqual([])
  expect(outcomes.applied).toBeGreaterThan(0)
}, 120_000)
