// What the API tests that ingest share: batch builders for either engine; times on a fixed grid a few
// hours back with the since/until parameters of a window; and one describe block's server with a
// verified account and its agent key, calls that ingest a batch and read an endpoint of the database it
// registered, and the checks several endpoint suites make (answers per path, bucket and window
// validation, other organizations, rows left after a deletion).
import { BATCH_AGE_HEADER } from '../../src/shared/ingest-path.ts'
import { afterAll, beforeAll, expect } from 'bun:test'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { type StoreKind, type TestServer, agentAccount, createApiKey, signup, startTestServer } from './server.ts'

export const MINUTE = 60_000
export const HOUR = 3_600_000

export const iso = (ms: number) => new Date(ms).toISOString()

/**
 * A 2-hour boundary 4 to 6 hours ago: every batch at `at(0)` to `at(240)` falls inside the default 24-hour
 * window, and the 7200 s intervals (aligned to the epoch) fall the same way at any hour of the day.
 */
export const base = Math.floor(Date.now() / (2 * HOUR)) * 2 * HOUR - 4 * HOUR
/** `minutes` (and `seconds`) past the base. */
export const at = (minutes: number, seconds = 0) => base + minutes * MINUTE + seconds * 1000
/** The since/until query parameters of a window. */
export const range = (from: number, to: number) => `since=${iso(from)}&until=${iso(to)}`

function batchOf(database: IngestBatch['database'], collectedAt: number, sections: Partial<IngestBatch>): IngestBatch {
  return {
    batch_id: crypto.randomUUID(),
    collected_at: collectedAt,
    interval_seconds: 10,
    agent_version: 'test',
    database,
    ...sections,
  }
}

/** A batch of PostgreSQL database `name` (a 10-second cycle) with the given sections. */
export function pgBatch(
  name: string,
  collectedAt: number,
  sections: Partial<IngestBatch> = {},
  engineVersion = '17.2',
): IngestBatch {
  return batchOf(
    { name, engine: 'postgres', engine_version: engineVersion, host: 'db.internal', port: 5432 },
    collectedAt,
    sections,
  )
}

/** A batch of ClickHouse database `name` (a 10-second cycle) with the given sections. */
export function chBatch(name: string, collectedAt: number, sections: Partial<IngestBatch> = {}): IngestBatch {
  return batchOf(
    { name, engine: 'clickhouse', engine_version: '26.1.2.1', host: 'ch.internal', port: 8123 },
    collectedAt,
    sections,
  )
}

/** The engine-internals endpoints that serve PostgreSQL databases only (routes/internals.ts). */
export const POSTGRES_INTERNALS_PATHS = [
  '/replication',
  '/replication/history',
  '/replication/slots/history',
  '/bgwriter',
  '/wal-stats',
  '/wal-stats/timeseries',
  '/io-stats',
  '/io-stats/timeseries',
  '/database-stats',
  '/database-stats/timeseries',
  '/archiver',
  '/backups',
]

/**
 * A test server on a store of `kind` with a verified account and an API key, started before the
 * describe block's tests and stopped after them, and calls on it as that account's agent.
 */
export function agentSession(kind: StoreKind, options?: Parameters<typeof startTestServer>[1]) {
  let server: TestServer | undefined
  let key = ''
  beforeAll(async () => {
    server = await startTestServer(kind, options)
    key = (await agentAccount(server)).key
  })
  afterAll(async () => {
    await server?.stop()
  })

  const session = {
    get server(): TestServer {
      if (!server) throw new Error('the test server starts in beforeAll')
      return server
    },
    get key() {
      return key
    },
    /** Ingests the batch and returns its database's id (throws unless 200). */
    async ingest(b: IngestBatch): Promise<string> {
      const res = await session.server.call('POST', '/api/v1/ingest', { apiKey: key, body: b })
      if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body.database_id
    },
    /**
     * Ingests the batch as the agent sends one from its buffer, `ageSeconds` after it collected it (its
     * X-Dbm-Batch-Age): the server dates it that much before its receipt, so it never replaces a snapshot
     * received since.
     */
    async ingestLate(b: IngestBatch, ageSeconds: number): Promise<string> {
      const res = await session.server.call('POST', '/api/v1/ingest', {
        apiKey: key,
        body: b,
        headers: { [BATCH_AGE_HEADER]: String(ageSeconds) },
      })
      if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body.database_id
    },
    /** GET /api/v1/databases/{id}{path}: status and body. */
    async get(id: string, path: string) {
      const res = await session.server.call('GET', `/api/v1/databases/${id}${path}`, { apiKey: key })
      return { status: res.status, body: res.body }
    },
    /** The body of GET /api/v1/databases/{id}{path}, expecting 200. */
    async ok(id: string, path: string) {
      const res = await session.get(id, path)
      expect({ path, status: res.status }).toEqual({ path, status: 200 })
      return res.body
    },
    /** Each path of the database answers with this status and body. */
    async expectEach(id: string, paths: string[], answer: { status: number; body: unknown }) {
      for (const path of paths) expect({ path, ...(await session.get(id, path)) }).toEqual({ path, ...answer })
    },
    /** A timeseries endpoint's 400s for a bad bucket (under a minute, not whole minutes), too many intervals and a bad since (and its 200 at the smallest bucket). */
    async expectSeriesValidation(id: string, path: string) {
      for (const bucket of ['30', '0', '-60', '90.5', 'minute']) {
        expect({ path, bucket, ...(await session.get(id, `${path}?bucket=${bucket}`)) }).toEqual({
          path,
          bucket,
          status: 400,
          body: { error: 'bucket must be a whole number of seconds, at least 60' },
        })
      }
      for (const [bucket, near] of [
        ['90', '60 or 120'],
        ['3599', '3540 or 3600'],
      ]) {
        expect({ path, bucket, ...(await session.get(id, `${path}?bucket=${bucket}`)) }).toEqual({
          path,
          bucket,
          status: 400,
          body: { error: `bucket must be a multiple of 60 seconds (the data are kept per minute): use ${near}` },
        })
      }
      const month = range(Date.parse('2026-01-01T00:00:00Z'), Date.parse('2026-01-31T00:00:00Z'))
      expect({ path, ...(await session.get(id, `${path}?${month}&bucket=60`)) }).toEqual({
        path,
        status: 400,
        body: {
          error:
            'bucket too small for this window: at most 10000 intervals per request; use a bucket of at least 300 seconds',
        },
      })
      expect({ path, status: (await session.get(id, `${path}?${month}&bucket=300`)).status }).toEqual({
        path,
        status: 200,
      })
      expect({ path, ...(await session.get(id, `${path}?since=yesterday`)) }).toEqual({
        path,
        status: 400,
        body: { error: 'since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z' },
      })
    },
    /** Each path of the database is a 404 for a new account of another organization. */
    async expectHiddenFromOtherOrganizations(id: string, paths: string[]) {
      const stranger = await signup(session.server)
      const strangerKey = (await createApiKey(session.server, stranger)).key
      for (const path of paths) {
        const res = await session.server.call('GET', `/api/v1/databases/${id}${path}`, { apiKey: strangerKey })
        expect({ path, status: res.status, body: res.body }).toEqual({
          path,
          status: 404,
          body: { error: 'database not found' },
        })
      }
    },
    /** The rows of a table that belong to the database. */
    async rowCount(table: string, id: string): Promise<number> {
      const row = await session.server.store.driver.get<{ n: number }>(
        `SELECT COUNT(*) AS n FROM ${table} WHERE database_id = $1`,
        [id],
      )
      return Number(row!.n)
    },
  }
  return session
}
