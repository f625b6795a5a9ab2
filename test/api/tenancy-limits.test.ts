// The unverified organization's one-database limit under concurrency, on both stores: many agents'
// first batches (each naming a new database) and POST /databases arriving together register exactly
// one database; every other request gets the limit's 403.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { pgBatch } from '../support/batches.ts'
import { IngestAdmission } from '../../src/server/ingest-admission.ts'
import { ingestAdmissionLimits } from '../../src/server/limits.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type TestServer, agentAccount, startTestServer, storeKinds } from '../support/server.ts'

const LIMIT_ERROR = 'unverified organizations can register 1 database; verify your email address to register more'

for (const kind of storeKinds) {
  describe(`unverified database limit under concurrency (${kind})`, () => {
    let server: TestServer
    beforeAll(async () => {
      // Twenty ingests at once is the point here, not the cap on ingests in flight (ingest-admission.test.ts):
      // room for all of them, so none is shed with a 503.
      const roomy = { ...ingestAdmissionLimits, current: { inFlight: 100, bodyBytes: 1024 ** 3 } }
      server = await startTestServer(kind, {
        ingestAdmission: new IngestAdmission(
          createLogger('error', () => {}),
          roomy,
        ),
      })
    })
    afterAll(async () => {
      await server.stop()
    })

    const registered = async (token: string) =>
      (await server.call('GET', '/api/v1/databases', { token })).body.map((db: { name: string }) => db.name)

    test('20 concurrent ingests naming 20 new databases register exactly one', async () => {
      const { account, key } = await agentAccount(server, { verified: false })
      const names = Array.from({ length: 20 }, (_, i) => `ingest-race-${i}`)
      const answers = await Promise.all(
        names.map((name) =>
          server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch(name, Date.now() - 60_000) }),
        ),
      )
      const accepted = answers.filter((r) => r.status === 200)
      const refused = answers.filter((r) => r.status !== 200)
      expect(accepted).toHaveLength(1)
      expect(refused.map((r) => ({ status: r.status, body: r.body }))).toEqual(
        Array(19).fill({ status: 403, body: { error: LIMIT_ERROR } }),
      )
      const winner = names[answers.findIndex((r) => r.status === 200)]!
      expect(await registered(account.token)).toEqual([winner])
      // The registered database keeps taking batches; a 21st name is still refused.
      expect(
        (await server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch(winner, Date.now() - 50_000) }))
          .status,
      ).toBe(200)
      const late = await server.call('POST', '/api/v1/ingest', {
        apiKey: key,
        body: pgBatch('ingest-race-late', Date.now() - 50_000),
      })
      expect({ status: late.status, body: late.body }).toEqual({ status: 403, body: { error: LIMIT_ERROR } })
    })

    test('20 concurrent POST /databases register exactly one', async () => {
      const { account } = await agentAccount(server, { verified: false })
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          server.call('POST', '/api/v1/databases', {
            token: account.token,
            body: { name: `post-race-${i}`, engine: 'postgres', host: 'h' },
          }),
        ),
      )
      const created = answers.filter((r) => r.status === 201)
      expect(created).toHaveLength(1)
      expect(answers.filter((r) => r.status !== 201).map((r) => ({ status: r.status, body: r.body }))).toEqual(
        Array(19).fill({ status: 403, body: { error: LIMIT_ERROR } }),
      )
      expect(await registered(account.token)).toEqual([created[0]!.body.name])
    })

    test('ingests and POST /databases racing each other register exactly one', async () => {
      const { account, key } = await agentAccount(server, { verified: false })
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          i % 2 === 0
            ? server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch(`mixed-${i}`, Date.now() - 60_000) })
            : server.call('POST', '/api/v1/databases', {
                token: account.token,
                body: { name: `mixed-${i}`, engine: 'postgres', host: 'h' },
              }),
        ),
      )
      const succeeded = answers.filter((r) => r.status === 200 || r.status === 201)
      expect(succeeded).toHaveLength(1)
      expect(answers.filter((r) => r.status === 403)).toHaveLength(19)
      expect(await registered(account.token)).toHaveLength(1)
    })

    test('an agent and POST /databases registering the same name together: one database, no 500', async () => {
      const { account, key } = await agentAccount(server)
      for (let round = 0; round < 10; round++) {
        const name = `same-name-${round}`
        const [ingest, post] = await Promise.all([
          server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch(name, Date.now() - 60_000) }),
          server.call('POST', '/api/v1/databases', {
            token: account.token,
            body: { name, engine: 'postgres', host: 'h' },
          }),
        ])
        // The ingest always lands (on whichever registered the name); the POST is 201 or the name's 409.
        expect({ round, ingest: ingest.status }).toEqual({ round, ingest: 200 })
        expect({ round, post: post.status === 201 || post.status === 409 }).toEqual({ round, post: true })
        const ids = (await server.call('GET', '/api/v1/databases', { token: account.token })).body.filter(
          (db: { name: string }) => db.name === name,
        )
        expect(ids).toHaveLength(1)
        expect(ingest.body.database_id).toBe(ids[0].id)
      }
    })

    test('a verified organization is not limited: 20 concurrent first batches register 20 databases', async () => {
      const { account, key } = await agentAccount(server)
      const names = Array.from({ length: 20 }, (_, i) => `verified-${String(i).padStart(2, '0')}`)
      const answers = await Promise.all(
        names.map((name) =>
          server.call('POST', '/api/v1/ingest', { apiKey: key, body: pgBatch(name, Date.now() - 60_000) }),
        ),
      )
      expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200))
      expect(await registered(account.token)).toEqual(names)
    })
  })
}
