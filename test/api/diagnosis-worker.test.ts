// The diagnosis worker (src/server/doctor/worker.ts) that `dbm serve` runs the health monitor's diagnoses
// in, on both stores: over its own connection to the store it finds exactly what the main thread finds
// (findings, score, status, key figures) for a database with a critical finding and for a healthy one,
// including data written by the main thread just before, also for the overview and the doctor (currentDiagnosis); a health monitor given the worker records the
// same diagnosis; and once the worker is closed the monitor diagnoses on its own thread. A diagnosis
// stuck in the worker (a test rule that never ends, test/support/stuck-worker.ts) is ended at the run
// limit and the worker started again, so another organization's doctor and the monitor go on; an API
// request answers 503 with Retry-After within its wait (under Bun's 30 s idle timeout) however long the
// diagnosis takes.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Diagnoser } from '../../src/server/doctor/diagnosis.ts'
import { API_WAIT_MS, DiagnosisBusy, startDiagnosisWorker } from '../../src/server/doctor/diagnosis-worker.ts'
import { IDLE_TIMEOUT_S } from '../../src/server/server-options.ts'
import { diagnose } from '../../src/server/doctor/index.ts'
import { currentDiagnosis } from '../../src/server/doctor/current.ts'
import { createMonitor } from '../../src/server/monitor/index.ts'
import { createLogger } from '../../src/shared/log.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, freshStoreLocation, startTestServer, storeKinds } from '../support/server.ts'

const critical = (name: string, at: number) =>
  pgBatch(name, at, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })
const healthy = (name: string, at: number) => pgBatch(name, at, { database_stats: { blks_hit: 100_000, blks_read: 0 } })

for (const kind of storeKinds) {
  describe(`diagnosis worker (${kind})`, () => {
    let server: TestServer
    let worker: Diagnoser
    let cleanup = () => {}
    let key = ''
    let location: Awaited<ReturnType<typeof freshStoreLocation>>
    beforeAll(async () => {
      location = await freshStoreLocation(kind)
      cleanup = location.cleanup
      server = await startTestServer(kind, { dataDir: location.dataDir, databaseUrl: location.databaseUrl })
      key = (await agentAccount(server, { verified: true })).key
      worker = await startDiagnosisWorker({
        dataDir: location.dataDir,
        databaseUrl: location.databaseUrl,
        logLevel: 'warn',
        log: createLogger('warn'),
      })
    })
    afterAll(async () => {
      await worker?.close()
      await server?.stop()
      cleanup()
    })

    const ingest = async (batch: ReturnType<typeof pgBatch>) => {
      const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch })
      expect(res.status).toBe(200)
      return res.body.database_id as string
    }

    test('finds exactly what the main thread finds, including what was written just before', async () => {
      const now = server.deps.clock()
      for (const [name, batch] of [
        ['w-critical', critical],
        ['w-healthy', healthy],
      ] as const) {
        const id = await ingest(batch(name, now - 20_000))
        const org = (await server.store.monitor.monitoredDatabases(0)).find((d) => d.id === id)!.org_id
        const db = (await server.store.getDatabase(org, id))!
        const { context: _context, ...here } = await diagnose(server.deps, db, now)
        const there = await worker.diagnose(db, now)
        expect(there).toEqual(here)
        // The overview's and the doctor's diagnosis (currentDiagnosis) comes from the worker when there is one.
        expect(await currentDiagnosis({ ...server.deps, diagnoser: worker }, db, now)).toEqual(here)
        expect(there.score).toBe(name === 'w-critical' ? 70 : 100)
        // A batch written now is seen by the worker's next diagnosis.
        await ingest(batch === critical ? healthy(name, now - 5_000) : critical(name, now - 5_000))
        const { context: _c2, ...hereAfter } = await diagnose(server.deps, db, now)
        expect(await worker.diagnose(db, now)).toEqual(hereAfter)
      }
    })

    test("an organization may have 2 API diagnoses waiting; more are refused (a 503 for the route), other organizations' and the monitor's go on", async () => {
      const now = server.deps.clock()
      const id = await ingest(healthy('w-busy', now - 20_000))
      const org = (await server.store.monitor.monitoredDatabases(0)).find((d) => d.id === id)!.org_id
      const db = (await server.store.getDatabase(org, id))!
      const other = { ...db, org_id: 'another-organization' }
      const asked = [1, 2, 3, 4, 5].map(() =>
        worker.diagnose(db, now, 'api').then(
          () => 'done',
          (e: Error) => e.name,
        ),
      )
      const theirs = worker.diagnose(other, now, 'api').then(
        () => 'done',
        (e: Error) => e.name,
      )
      const monitors = [1, 2, 3].map(() =>
        worker.diagnose(db, now, 'monitor').then(
          () => 'done',
          (e: Error) => e.name,
        ),
      )
      expect(await Promise.all(asked)).toEqual(['done', 'done', 'DiagnosisBusy', 'DiagnosisBusy', 'DiagnosisBusy'])
      expect(await theirs).toBe('done')
      expect(await Promise.all(monitors)).toEqual(['done', 'done', 'done'])
      // Answered, the organization may ask again.
      expect(await worker.diagnose(db, now, 'api').then(() => 'done')).toBe('done')
      // The route answers a refusal 503 with Retry-After, not a 500.
      server.deps.diagnoser = {
        running: true,
        diagnose: () => Promise.reject(new DiagnosisBusy('the doctor is busy')),
        close: async () => {},
      }
      try {
        for (const path of ['doctor', 'overview']) {
          const res = await server.call('GET', `/api/v1/databases/${db.id}/${path}`, { apiKey: key })
          expect({ status: res.status, body: res.body, retry: res.headers.get('retry-after') }).toEqual({
            status: 503,
            body: { error: 'the doctor is busy' },
            retry: '5',
          })
        }
      } finally {
        server.deps.diagnoser = undefined
      }
    })

    test("a diagnosis that never ends is stopped at the run limit; another organization's doctor and the monitor go on", async () => {
      const now = server.deps.clock()
      const dbOf = async (apiKey: string, name: string) => {
        const res = await server.call('POST', '/api/v1/ingest', { apiKey, body: healthy(name, now - 20_000) })
        const org = (await server.store.monitor.monitoredDatabases(0)).find(
          (d) => d.id === res.body.database_id,
        )!.org_id
        return (await server.store.getDatabase(org, res.body.database_id))!
      }
      const a = await dbOf(key, 'stuck-a')
      const other = await agentAccount(server, { verified: true })
      const b = await dbOf(other.key, 'w-b')
      const stuck = await startDiagnosisWorker({
        dataDir: location.dataDir,
        databaseUrl: location.databaseUrl,
        logLevel: 'warn',
        log: createLogger('error'),
        url: new URL('../support/stuck-worker.ts', import.meta.url).href,
        limits: { runMs: 1_000, apiWaitMs: 10_000 },
      })
      try {
        const started = performance.now()
        // B's diagnosis waits behind A's, which never ends: A's is stopped, B's runs in the new worker.
        const [theirs, mine] = await Promise.all([
          stuck.diagnose(a, now, 'api').then(
            () => 'done',
            (e: Error) => `${e.name}: ${e.message}`,
          ),
          stuck.diagnose(b, now, 'api'),
        ])
        expect(theirs).toBe('DiagnosisBusy: the diagnosis took longer than 1 s and was stopped; try again later')
        const { context: _context, ...expected } = await diagnose(server.deps, b, now)
        expect(mine).toEqual({
          ...expected,
          metrics_summary: {
            ...expected.metrics_summary,
            rules_evaluated: expected.metrics_summary.rules_evaluated + 1,
          },
        })
        expect(performance.now() - started).toBeLessThan(8_000)
        expect(stuck.running).toBe(true)

        // Through the routes: A's doctor is a 503, B's answers.
        server.deps.diagnoser = stuck
        try {
          const [ra, rb] = await Promise.all([
            server.call('GET', `/api/v1/databases/${a.id}/doctor`, { apiKey: key }),
            server.call('GET', `/api/v1/databases/${b.id}/doctor`, { apiKey: other.key }),
          ])
          expect({ status: ra.status, retry: ra.headers.get('retry-after') }).toEqual({ status: 503, retry: '5' })
          expect(rb.status).toBe(200)
        } finally {
          server.deps.diagnoser = undefined
        }
        // The monitor's pass: A's diagnosis fails (logged), every other database's is recorded.
        const summary = await createMonitor(
          { ...server.deps, diagnoser: stuck, log: createLogger('error') },
          { retentionDays: 30 },
        ).runOnce(now + 60_000)
        expect(summary).toMatchObject({
          databases: (await server.store.monitor.monitoredDatabases(0)).length,
          failed: 1,
        })
      } finally {
        await stuck.close()
      }
    })

    test('an API request waiting for a diagnosis answers 503 with Retry-After within its wait, under the idle timeout', async () => {
      expect(API_WAIT_MS).toBeLessThanOrEqual(IDLE_TIMEOUT_S * 1000 - 10_000)
      const now = server.deps.clock()
      const id = await ingest(healthy('w-wait', now - 20_000))
      // A diagnosis that never comes (on the main thread, or in a worker that never answers).
      server.deps.diagnoser = { running: true, diagnose: () => new Promise(() => {}), close: async () => {} }
      server.deps.diagnosisWaitMs = 500
      try {
        for (const path of ['doctor', 'overview']) {
          const res = await server.call('GET', `/api/v1/databases/${id}/${path}`, { apiKey: key })
          expect({ status: res.status, body: res.body, retry: res.headers.get('retry-after') }).toEqual({
            status: 503,
            body: { error: 'no diagnosis within 0.5 s; try again in a few seconds' },
            retry: '5',
          })
        }
        const config = await server.call('GET', `/api/v1/databases/${id}/configuration`, { apiKey: key })
        expect(config.status).toBe(200)
      } finally {
        server.deps.diagnoser = undefined
        server.deps.diagnosisWaitMs = undefined
      }
    })

    test('a health monitor given the worker records its diagnoses; closed, the monitor diagnoses on its own thread', async () => {
      const now = server.deps.clock() + 60_000
      const deps = { ...server.deps, diagnoser: worker }
      const monitored = (await server.store.monitor.monitoredDatabases(0)).length
      const summary = await createMonitor(deps, { retentionDays: 30 }).runOnce(now)
      expect(summary).toMatchObject({ databases: monitored, failed: 0 })
      // What the main thread's own diagnosis at `now` gives, database by database.
      const expected = []
      for (const m of await server.store.monitor.monitoredDatabases(0)) {
        const db = (await server.store.getDatabase(m.org_id, m.id))!
        const d = await diagnose(server.deps, db, now)
        expected.push([m.id, d.score, d.status, now])
      }
      const health = await server.store.driver.all<{
        database_id: string
        score: number
        status: string
        evaluated_at: number
      }>('SELECT * FROM database_health')
      expect(health.map((r) => [r.database_id, Number(r.score), r.status, Number(r.evaluated_at)]).sort()).toEqual(
        expected.sort() as any,
      )
      await worker.close()
      expect(worker.running).toBe(false)
      const after = await createMonitor(deps, { retentionDays: 30 }).runOnce(now + 60_000)
      expect(after).toMatchObject({ databases: monitored, failed: 0 })
    })
  })
}
