// The database list's availability_30d with many outages (issue 33's review: 21,000 outages over 1,000
// databases held the event loop for up to 1.1 s when each database filtered every row). The list reads
// the organization's outages in one statement and groups them in one pass (groupSpans); its figure for
// each database equals the one GET /databases/{id}/availability computes from that database's own rows.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { groupSpans } from '../../src/server/store/availability/reads.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, startTestServer } from '../support/server.ts'

const DATABASES = 4
const OUTAGES = 300

describe('availability_30d of many databases with many outages (sqlite)', () => {
  let server: TestServer
  let key = ''
  const ids: string[] = []
  beforeAll(async () => {
    server = await startTestServer('sqlite')
    key = (await agentAccount(server, { verified: true })).key
    const created = server.deps.clock()
    for (let i = 0; i < DATABASES; i++) {
      const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch(`many-${i}`, created) })
      ids.push(res.body.database_id)
    }
    // 300 outages of (i + 1) × 10 s each, one every 2 minutes after the registration; then the agent reports.
    for (const [i, id] of ids.entries()) {
      for (let k = 0; k < OUTAGES; k++) {
        const start = created + 60_000 + k * 120_000
        await server.store.driver.run(
          "INSERT INTO outages (database_id, started_at, ended_at, cause) VALUES ($1, $2, $3, 'refused')",
          [id, start, start + (i + 1) * 10_000],
        )
      }
    }
    server.advance(OUTAGES * 120_000 + 60_000)
    for (let i = 0; i < DATABASES; i++) {
      await server.call('POST', '/api/v1/ingest', {
        apiKey: key,
        body: pgBatch(`many-${i}`, server.deps.clock(), { availability: { state: 'up', since: created } }),
      })
    }
    // The seeded hours stand for an agent that reported all along: not a silence.
    await server.store.driver.run('DELETE FROM agent_silences')
  })
  afterAll(async () => {
    await server?.stop()
  })

  test("the list reads the outages in one statement; each figure is the database's own", async () => {
    const driver = server.store.driver
    const all = driver.all.bind(driver)
    let outageReads = 0
    driver.all = ((sql: string, params?: unknown[]) => {
      if (/FROM outages/.test(sql)) outageReads++
      return all(sql, params)
    }) as typeof driver.all
    let list: any[]
    try {
      list = (await server.call('GET', '/api/v1/databases', { apiKey: key })).body
    } finally {
      driver.all = all
    }
    expect(outageReads).toBe(1)
    for (const [i, id] of ids.entries()) {
      const own = (await server.call('GET', `/api/v1/databases/${id}/availability?days=30`, { apiKey: key })).body
      expect(own.total.down_ms).toBe(OUTAGES * (i + 1) * 10_000)
      expect(list.find((d) => d.id === id).availability_30d).toBe(own.total.ratio)
      // Read a few ms apart on a running clock: the same time watched within a second.
      expect(Math.abs(list.find((d) => d.id === id).availability_30d_watched_ms - own.total.watched_ms)).toBeLessThan(
        1_000,
      )
      expect(own.total.ratio).toBeLessThan(1)
    }
  })

  test('groupSpans: 21,000 rows of 1,000 databases grouped in one pass (bench line)', () => {
    const outages = Array.from({ length: 21_000 }, (_, i) => ({
      database_id: `db-${i % 1_000}`,
      started_at: i * 1_000,
      ended_at: i * 1_000 + 500,
      cause: 'refused',
      message: null,
    }))
    const silences = Array.from({ length: 3_000 }, (_, i) => ({
      database_id: `db-${i % 1_000}`,
      started_at: i,
      ended_at: i + 1,
    }))
    const started = performance.now()
    const grouped = groupSpans(outages, silences)
    const ms = performance.now() - started
    expect(grouped.size).toBe(1_000)
    expect(grouped.get('db-7')!.outages).toHaveLength(21)
    expect(grouped.get('db-7')!.outages[1]).toEqual({
      started_at: 1_007_000,
      ended_at: 1_007_500,
      cause: 'refused',
      message: null,
    })
    expect(grouped.get('db-7')!.silences).toHaveLength(3)
    console.log(`groupSpans: 21,000 outages and 3,000 silences of 1,000 databases in ${ms.toFixed(1)} ms`)
  })
})
