// The diagnosis worker (src/server/doctor/worker.ts) that `dbm serve` runs the health monitor's diagnoses
// in, on both stores: over its own connection to the store it finds exactly what the main thread finds
// (findings, score, status, key figures) for a database with a critical finding and for a healthy one,
// including data written by the main thread just before, also for the overview and the doctor (currentDiagnosis); a health monitor given the worker records the
// same diagnosis; and once the worker is closed the monitor diagnoses on its own thread.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Diagnoser } from '../../src/server/doctor/diagnosis.ts'
import { DiagnosisBusy, startDiagnosisWorker } from '../../src/server/doctor/diagnosis-worker.ts'
import { diagnose } from '../../src/server/doctor/index.ts'
import { currentDiagnosis } from '../../src/server/doctor/current.ts'
import { createMonitor } from '../../src/server/monitor/index.ts'
import { createLogger } from '../../src/shared/log.ts'
import { pgBatch } from '../support/batches.ts'
import { type TestServer, agentAccount, freshStoreLocation, startTestServer, storeKinds } from '../support/server.ts'

const critical = (name: string, at: number) => pgBatch(name, at, { database_stats: { blks_hit: 50_000, blks_read: 50_000 } })
const healthy = (name: string, at: number) => pgBatch(name, at, { database_stats: { blks_hit: 100_000, blks_read: 0 } })

for (const kind of storeKinds) {
  describe(`diagnosis worker (${kind})`, () => {
    let server: TestServer
    let worker: Diagnoser
    let cleanup = () => {}
    let key = ''
    beforeAll(async () => {
      const location = await freshStoreLocation(kind)
      cleanup = location.cleanup
      server = await startTestServer(kind, { dataDir: location.dataDir, databaseUrl: location.databaseUrl })
      key = (await agentAccount(server, { verified: true })).key
      worker = await startDiagnosisWorker({ dataDir: location.dataDir, databaseUrl: location.databaseUrl, logLevel: 'warn', log: createLogger('warn') })
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
      for (const [name, batch] of [['w-critical', critical], ['w-healthy', healthy]] as const) {
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
      const asked = [1, 2, 3, 4, 5].map(() => worker.diagnose(db, now, 'api').then(() => 'done', (e: Error) => e.name))
      const theirs = worker.diagnose(other, now, 'api').then(() => 'done', (e: Error) => e.name)
      const monitors = [1, 2, 3].map(() => worker.diagnose(db, now, 'monitor').then(() => 'done', (e: Error) => e.name))
      expect(await Promise.all(asked)).toEqual(['done', 'done', 'DiagnosisBusy', 'DiagnosisBusy', 'DiagnosisBusy'])
      expect(await theirs).toBe('done')
      expect(await Promise.all(monitors)).toEqual(['done', 'done', 'done'])
      // Answered, the organization may ask again.
      expect(await worker.diagnose(db, now, 'api').then(() => 'done')).toBe('done')
      // The route answers a refusal 503 with Retry-After, not a 500.
      server.deps.diagnoser = { running: true, diagnose: () => Promise.reject(new DiagnosisBusy('the doctor is busy')), close: async () => {} }
      try {
        for (const path of ['doctor', 'overview']) {
          const res = await server.call('GET', `/api/v1/databases/${db.id}/${path}`, { apiKey: key })
          expect({ status: res.status, body: res.body, retry: res.headers.get('retry-after') }).toEqual({ status: 503, body: { error: 'the doctor is busy' }, retry: '5' })
        }
      } finally {
        server.deps.diagnoser = undefined
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
      const health = await server.store.driver.all<{ database_id: string; score: number; status: string; evaluated_at: number }>('SELECT * FROM database_health')
      expect(health.map((r) => [r.database_id, Number(r.score), r.status, Number(r.evaluated_at)]).sort()).toEqual(expected.sort() as any)
      await worker.close()
      expect(worker.running).toBe(false)
      const after = await createMonitor(deps, { retentionDays: 30 }).runOnce(now + 60_000)
      expect(after).toMatchObject({ databases: monitored, failed: 0 })
    })
  })
}
