// The ingest wire contract across versions, on both stores: a batch from a newer agent, carrying fields
// this server does not know at every level (top, database, statement and table rows, a table's delta,
// replication and its replicas, activity), is accepted; what the server knows is stored exactly and
// served back, what it does not know is stored nowhere and named in one debug line. Known fields keep
// their validation, and the account and database routes keep refusing unknown fields. A batch is refused
// only past a number of distinct unknown paths, however many rows carry each.
import { describe, expect, test } from 'bun:test'
import type { ActiveQuery, ExplainPlan, QueryStatDelta, ReplicationStatus, TableStat } from '../../src/shared/wire.ts'
import { agentSession, at, iso, pgBatch } from '../support/batches.ts'
import { unknownIngestFields } from '../../src/server/limits.ts'
import { storeKinds } from '../support/server.ts'

const statement = (hash: string, calls: number, rows: number): QueryStatDelta => ({
  query_hash: hash,
  query_text: `SELECT * FROM ${hash} WHERE id = $1`,
  calls,
  total_time_ms: calls * 1.5,
  rows,
  shared_blks_hit: 10 * calls,
  shared_blks_read: calls,
})

const counters = {
  seq_scan: 7,
  seq_tup_read: 700,
  idx_scan: 30,
  idx_tup_fetch: 30,
  n_tup_ins: 5,
  n_tup_upd: 2,
  n_tup_del: 1,
  n_tup_hot_upd: 1,
}

const ordersTable: TableStat = {
  schema_name: 'public',
  table_name: 'orders',
  ...counters,
  n_live_tup: 1234,
  n_dead_tup: 56,
  last_vacuum: null,
  last_autovacuum: null,
  last_analyze: null,
  last_autoanalyze: null,
  table_size_bytes: 81920,
  index_size_bytes: 16384,
  has_primary_key: true,
  delta: counters,
}

const replication: ReplicationStatus = {
  is_replica: false,
  replication_lag_bytes: null,
  replication_lag_seconds: null,
  upstream_host: null,
  replicas: [
    {
      application_name: 'standby1',
      client_addr: '10.0.0.7',
      state: 'streaming',
      sync_state: 'async',
      lag_bytes: 4096,
      write_lag_ms: 1,
      flush_lag_ms: 2,
      replay_lag_ms: 3,
    },
  ],
  slots: [{ slot_name: 'standby1', slot_type: 'physical', active: true, lag_bytes: 4096, wal_status: 'reserved' }],
}

const activeSession: ActiveQuery = {
  pid: 4242,
  query_text: 'SELECT pg_sleep(1)',
  state: 'active',
  wait_event_type: 'Timeout',
  wait_event: 'PgSleep',
  duration_ms: 900,
  blocking_pids: [],
}

/** A plan whose JSON holds keys no schema describes: plan_json is kept whole, as PostgreSQL wrote it. */
const plan: ExplainPlan = {
  query_hash: 'orders',
  ts: at(10),
  plan_json: {
    Plan: {
      'Node Type': 'Seq Scan',
      'Relation Name': 'orders',
      'Total Cost': 155.5,
      'Some Future Key': { nested: [1, 2] },
    },
  },
  plan_hash: 'p1',
  total_cost: 155.5,
  actual_time_ms: null,
  seq_scans: 1,
  index_scans: 0,
  rows_estimated: 1000,
  rows_actual: null,
  source: 'sampled',
}

/** What a newer agent sends: the batch above plus one field unknown here at each level. */
function newerAgentBatch(name: string): Record<string, unknown> {
  const known = pgBatch(name, at(10), {
    query_stats: [statement('orders', 42, 420), statement('customers', 8, 16)],
    tables: [ordersTable],
    replication,
    activity: [activeSession],
    explain_plans: [plan],
  })
  return {
    ...known,
    compression: 'zstd',
    database: { ...known.database, cluster_role: 'primary' },
    query_stats: known.query_stats!.map((s) => ({ ...s, jit_generation_time_ms: 0.25 })),
    tables: [{ ...ordersTable, toast_size_bytes: 8192, delta: { ...counters, n_tup_future_counter: 3 } }],
    replication: {
      ...replication,
      synchronous_standby_names: 'standby1',
      replicas: replication.replicas.map((r) => ({ ...r, reply_time: at(10) })),
    },
    activity: [{ ...activeSession, query_id: '-1234567890' }],
  }
}

const UNKNOWN_PATHS = [
  'activity[].query_id',
  'compression',
  'database.cluster_role',
  'query_stats[].jit_generation_time_ms',
  'replication.replicas[].reply_time',
  'replication.synchronous_standby_names',
  'tables[].delta.n_tup_future_counter',
  'tables[].toast_size_bytes',
]

/** The debug lines about unknown fields of one batch. */
function unknownFieldLines(logs: string[], batchId: string): string[] {
  return logs.filter(
    (line) => line.includes(' DEBUG ingest: unknown fields ignored ') && line.includes(`batch_id=${batchId}`),
  )
}

for (const kind of storeKinds) {
  describe(`ingest from a newer agent (${kind})`, () => {
    const session = agentSession(kind, { ingestWriter: true })
    const post = (batch: unknown) => session.server.call('POST', '/api/v1/ingest', { apiKey: session.key, body: batch })

    test('fields unknown at every level are accepted (200), stored nowhere, and named in one debug line', async () => {
      const batch = newerAgentBatch('newer-agent')
      const res = await post(batch)
      expect({ status: res.status, duplicate: res.body.duplicate }).toEqual({ status: 200, duplicate: false })
      const id: string = res.body.database_id

      // Statements: exactly what was sent.
      const since = `since=${iso(at(0))}&until=${iso(at(60))}`
      const queries = await session.ok(id, `/queries?${since}&sort_by=calls`)
      expect(
        queries.map((q: any) => [
          q.query_hash,
          q.total_calls,
          q.total_rows,
          q.total_time_ms,
          q.shared_blks_hit,
          q.shared_blks_read,
        ]),
      ).toEqual([
        ['orders', 42, 420, 63, 420, 42],
        ['customers', 8, 16, 12, 80, 8],
      ])
      for (const q of queries) expect(Object.keys(q)).not.toContain('jit_generation_time_ms')

      // Tables: the known gauges and counters; no trace of the unknown ones.
      const [orders] = await session.ok(id, '/tables')
      expect(orders).toMatchObject({
        schema_name: 'public',
        table_name: 'orders',
        n_live_tup: 1234,
        n_dead_tup: 56,
        table_size_bytes: 81920,
        seq_scan: 7,
      })
      expect(Object.keys(orders)).not.toContain('toast_size_bytes')

      // Replication is kept as a whole section: the stored one is the sent one without the unknown fields.
      const served = await session.ok(id, '/replication')
      expect(served).toEqual({ ...replication, ts: iso(at(10)) })
      const latestReplication = await session.server.store.internals.latestReplication(id)
      expect(latestReplication?.payload).toEqual(replication)

      // Activity is kept as a whole snapshot too.
      expect((await session.server.store.latestSnapshot(id, 'activity'))?.payload).toEqual([activeSession])

      // The registered database: what the batch's database said, and nothing more.
      const db = await session.ok(id, '')
      expect(db).toMatchObject({
        name: 'newer-agent',
        engine: 'postgres',
        engine_version: '17.2',
        host: 'db.internal',
        port: 5432,
      })
      expect(Object.keys(db)).not.toContain('cluster_role')

      // plan_json is open by design and kept whole, keys no schema knows included.
      const plans = await session.ok(id, `/queries/orders/explain?${since}`)
      expect(plans.map((p: any) => p.plan_json)).toEqual([plan.plan_json])

      const lines = unknownFieldLines(session.server.logs, batch.batch_id as string)
      expect(lines).toHaveLength(1)
      const fields = /fields=(\S+)/.exec(lines[0]!)?.[1]?.split(',')
      expect(fields?.sort()).toEqual(UNKNOWN_PATHS)
      expect(lines[0]).not.toContain('more=')
      // Names only: no value of an unknown field reaches the log.
      for (const value of ['zstd', 'primary', '-1234567890', 'standby1', '8192']) expect(lines[0]).not.toContain(value)
    })

    test('a replayed batch with unknown fields is acknowledged as a duplicate and counted once', async () => {
      const batch = newerAgentBatch('replayed')
      const first = await post(batch)
      const again = await post(batch)
      expect([first.status, first.body.duplicate, again.status, again.body.duplicate]).toEqual([200, false, 200, true])
      const queries = await session.ok(
        first.body.database_id,
        `/queries?since=${iso(at(0))}&until=${iso(at(60))}&sort_by=calls`,
      )
      expect(queries.map((q: any) => [q.query_hash, q.total_calls])).toEqual([
        ['orders', 42],
        ['customers', 8],
      ])
    })

    test('the debug line names a few unknown fields and counts the rest', async () => {
      const batch: Record<string, unknown> = pgBatch('many-new-fields', at(20))
      for (let i = 0; i < 20; i++) batch[`new_section_${String(i).padStart(2, '0')}`] = { rows: [i] }
      expect((await post(batch)).status).toBe(200)
      const [line, ...others] = unknownFieldLines(session.server.logs, batch.batch_id as string)
      expect(others).toEqual([])
      const fields = /fields=(\S+)/.exec(line!)?.[1]?.split(',')
      expect(fields).toEqual(Array.from({ length: 8 }, (_, i) => `new_section_0${i}`))
      expect(line).toMatch(/ more=12$/)
    })

    test('one unknown field in every row is one unknown path: 20,000 statements carrying it are accepted', async () => {
      const rows = Array.from({ length: 20_000 }, (_, i) => ({
        ...statement(`s${i}`, 1, 1),
        jit_generation_time_ms: i,
      }))
      const batch = { ...pgBatch('every-row', at(30)), query_stats: rows }
      const res = await post(batch)
      expect(res.status).toBe(200)
      const [line, ...others] = unknownFieldLines(session.server.logs, batch.batch_id)
      expect(others).toEqual([])
      expect(line).toContain(' fields=query_stats[].jit_generation_time_ms')
      expect(line).not.toContain('more=')
      const queries = await session.ok(
        res.body.database_id,
        `/queries?since=${iso(at(30))}&until=${iso(at(31))}&limit=1`,
      )
      expect(queries).toHaveLength(1)
      expect(Object.keys(queries[0])).not.toContain('jit_generation_time_ms')
    })

    test(`more than ${unknownIngestFields.distinctPaths} distinct unknown paths in one batch: 400, nothing stored`, async () => {
      const limit = unknownIngestFields.distinctPaths
      const withTopLevelFields = (name: string, count: number) => {
        const batch: Record<string, unknown> = pgBatch(name, at(40), { query_stats: [statement('capped', 1, 1)] })
        for (let i = 0; i < count; i++) batch[`field_${i}`] = i
        return batch
      }
      expect((await post(withTopLevelFields('at-the-cap', limit))).status).toBe(200)

      const message = { error: `too many unknown fields (more than ${limit})` }
      const over = withTopLevelFields('over-the-cap', limit + 1)
      const refused = await post(over)
      expect({ status: refused.status, body: refused.body }).toEqual({ status: 400, body: message })
      // Spread over rows, each row's own field is a path of its own.
      const rows = Array.from({ length: limit + 1 }, (_, i) => ({ ...statement(`r${i}`, 1, 1), [`field_${i}`]: i }))
      const inRows = await post({ ...pgBatch('over-the-cap', at(40)), query_stats: rows })
      expect({ status: inRows.status, body: inRows.body }).toEqual({ status: 400, body: message })
      // Nothing of the refused batches was kept: the database was never registered, the batch_id never applied.
      const databases = await session.server.call('GET', '/api/v1/databases', { apiKey: session.key })
      expect(databases.body.map((d: { name: string }) => d.name)).not.toContain('over-the-cap')
      const accepted = await post({ ...withTopLevelFields('over-the-cap', 0), batch_id: over.batch_id })
      expect({ status: accepted.status, duplicate: accepted.body.duplicate }).toEqual({ status: 200, duplicate: false })
    })

    test('known fields are validated as before, whatever unknown fields come with them', async () => {
      const cases: [string, (b: any) => void, string][] = [
        ['a negative count in a statement row', (b) => (b.query_stats[0].calls = -1), 'invalid query_stats.0.calls'],
        ['a string where a number belongs', (b) => (b.tables[0].n_live_tup = 'many'), 'invalid tables.0.n_live_tup'],
        ['an out-of-range port', (b) => (b.database.port = 70000), 'invalid database.port'],
        ['a missing required field', (b) => delete b.replication.is_replica, 'invalid replication.is_replica'],
        [
          'a wrong type inside a replica',
          (b) => (b.replication.replicas[0].lag_bytes = 'lots'),
          'invalid replication.replicas.0.lag_bytes',
        ],
      ]
      for (const [what, spoil, message] of cases) {
        const batch = newerAgentBatch('validated')
        spoil(batch)
        const res = await post(batch)
        expect({ what, status: res.status }).toEqual({ what, status: 400 })
        expect({ what, error: res.body.error.startsWith(message) }).toEqual({ what, error: true })
      }
    })

    test('the account and database routes still refuse unknown fields', async () => {
      const res = await session.server.call('POST', '/api/v1/databases', {
        apiKey: session.key,
        body: { name: 'strict', engine: 'postgres', host: 'db.internal', cluster_role: 'primary' },
      })
      expect({ status: res.status, body: res.body }).toEqual({
        status: 400,
        body: { error: 'unknown field: cluster_role' },
      })
    })
  })
}
