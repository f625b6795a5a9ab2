// custom_metric_threshold: batches of a custom metric with alert {above: 10000, for: 5m}, sent as an agent
// would with their collected_at a minute apart (the agent's clock, so no waiting): the doctor finds the
// label set whose every sample of the last 5 minutes is above, with the value, threshold and window in its
// title, and not the one that dipped below once, nor a series seen for less than the window.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'

let server: TestServer
let account: Account
let key: string

beforeAll(async () => {
  server = await startTestServer('sqlite')
  ;({ account, key } = await agentAccount(server))
})

afterAll(async () => {
  await server?.stop()
})

function batch(at: number, values: Record<string, number>): IngestBatch {
  return {
    batch_id: crypto.randomUUID(),
    collected_at: at,
    interval_seconds: 60,
    agent_version: '0.3.0',
    database: { name: 'shop', engine: 'postgres', host: 'db', port: 5432 },
    custom_metrics: {
      definitions: [
        {
          name: 'outbox_rows',
          kind: 'gauge',
          labels: ['queue'],
          values: ['rows'],
          interval_seconds: 60,
          alert: { op: 'above', threshold: 10_000, for_seconds: 300, severity: 'critical' },
        },
      ],
      samples: Object.entries(values).map(([queue, value]) => ({
        name: 'outbox_rows',
        column: 'rows',
        labels: { queue },
        value,
      })),
      errors: [],
    },
  }
}

test('fires for the label set above the threshold for the whole window, with value, threshold and window', async () => {
  const now = Date.now()
  let id = ''
  for (let minute = 7; minute >= 0; minute--) {
    const values: Record<string, number> = { 'mail"\n*/': 12_000 + minute, dipped: minute === 2 ? 9_000 : 15_000 }
    if (minute <= 3) values.fresh = 50_000
    const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch(now - minute * 60_000, values) })
    expect(res.status).toBe(200)
    id = res.body.database_id
  }
  const doctor = await server.call('GET', `/api/v1/databases/${id}/doctor`, { token: account.token })
  expect(doctor.status).toBe(200)
  const all = [...(doctor.body.top_issues ?? []), ...(doctor.body.findings ?? [])] as {
    rule: string
    title: string
    severity: string
    metrics: Record<string, unknown>
  }[]
  const found = [...new Map(all.filter((f) => f.rule === 'custom_metric_threshold').map((f) => [f.title, f])).values()]
  expect(found.map((f) => f.title)).toEqual(['outbox_rows {queue="mail\\"\\n*/"} > 10,000 for 5 min: now 12,000'])
  expect(found[0]!.severity).toBe('critical')
  expect(found[0]!.metrics).toMatchObject({ value: 12_000, threshold: 10_000, for_seconds: 300 })
}, 30_000)
