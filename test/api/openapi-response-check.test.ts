// An answer that does not match its route's response schema is the server's bug, never the caller's:
// the app's one error handler (app.ts onError) answers 500 {"error": "internal server error"} and logs
// an error line naming the field, not its value. The routes of production all match their schemas, so
// the test adds two routes that do not to an app built by createApp, after its handlers, as any route
// module is added: they go through the same hooks and error handler as production's routes.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { t } from 'elysia'
import { createApp } from '../../src/server/app.ts'
import { serverMetrics } from '../../src/server/metrics.ts'
import { Database } from '../../src/shared/api/databases.ts'
import { type TestServer, startTestServer } from '../support/server.ts'

let server: TestServer
let base = ''
let stop = async () => {}

beforeAll(async () => {
  server = await startTestServer('sqlite')
  const app = createApp(server.deps)
    .get('/test/wrong-type', () => ({ id: 42, name: 'from a monitored database: secret' }) as never, {
      response: { 200: t.Object({ id: t.String(), name: t.String() }) },
    })
    .get('/test/unnamed-field', () => ({ id: 'a', name: 'b', extra: 'not in the schema' }) as never, {
      response: { 200: t.Object({ id: t.String(), name: t.String() }) },
    })
    .get('/test/missing-field', () => ({ id: crypto.randomUUID() }) as never, { response: { 200: Database } })
    .listen({ hostname: '127.0.0.1', port: 0 })
  base = `http://127.0.0.1:${app.server!.port}`
  stop = async () => {
    await app.stop(true)
  }
})

afterAll(async () => {
  await stop()
  await server?.stop()
})

const errorLines = () => server.logs.filter((l) => l.includes('response does not match its schema'))

describe('an answer that does not match its response schema', () => {
  for (const [path, field] of [
    ['/test/wrong-type', 'id'],
    ['/test/missing-field', 'name'],
  ] as const) {
    test(`${path}: 500 with the plain error body, and an error line naming ${field}`, async () => {
      const before = errorLines().length
      const counted = serverMetrics.responseSchemaErrors.value
      const res = await fetch(base + path)
      expect(res.status).toBe(500)
      // Counted for GET /metrics (dbm_response_schema_errors_total), once per answer.
      expect(serverMetrics.responseSchemaErrors.value).toBe(counted + 1)
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8')
      expect(await res.json()).toEqual({ error: 'internal server error' })
      const lines = errorLines().slice(before)
      expect(lines.length).toBe(1)
      expect(lines[0]).toContain(' ERROR ')
      expect(lines[0]).toContain(`path=${path}`)
      expect(lines[0]).toContain(`field=${field}`)
      // The value is not logged: it may be a monitored database's text.
      expect(lines[0]).not.toContain('secret')
    })
  }

  test('a field the schema does not name is refused too (500, logged), not passed on', async () => {
    const before = errorLines().length
    const res = await fetch(`${base}/test/unnamed-field`)
    expect(res.status).toBe(500)
    expect(await res.json()).toEqual({ error: 'internal server error' })
    const lines = errorLines().slice(before)
    expect(lines.length).toBe(1)
    expect(lines[0]).toContain('field=extra')
  })
})
