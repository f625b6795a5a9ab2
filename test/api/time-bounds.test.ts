// Times and intervals the server takes, on both stores: a batch collected more than 10 minutes ahead of
// the server's clock is a 400 naming collected_at (within 10 minutes it is taken: agent clocks drift);
// rows already stored from such a batch (before the API refused them) break no read; a database's poll
// interval is 1 s to 24 h, a 400 naming the field outside it however large the number.
import { describe, expect, test } from 'bun:test'
import { createApp } from '../../src/server/app.ts'
import { agentSession, chBatch, pgBatch } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const MINUTE = 60_000
/** 9999-12-31T23:59:59.999Z, the largest collected_at the wire allows. */
const MAX_EPOCH_MS = 253_402_300_799_999

const statement = {
  query_hash: 'q',
  query_text: 'SELECT 1',
  calls: 1,
  total_time_ms: 1,
  rows: 1,
  shared_blks_hit: 0,
  shared_blks_read: 0,
}
const counters = {
  seq_scan: 1,
  seq_tup_read: 1,
  idx_scan: 1,
  idx_tup_fetch: 1,
  n_tup_ins: 1,
  n_tup_upd: 1,
  n_tup_del: 1,
  n_tup_hot_upd: 1,
}

/** A PostgreSQL batch with a row in every section the reads serve. */
function fullPgBatch(name: string, collectedAt: number) {
  return pgBatch(name, collectedAt, {
    query_stats: [statement],
    explain_plans: [
      {
        query_hash: 'q',
        ts: collectedAt,
        plan_json: {},
        plan_hash: 'p',
        total_cost: 1,
        actual_time_ms: 1,
        seq_scans: 1,
        index_scans: 0,
        rows_estimated: 1,
        rows_actual: 1,
        source: 'sampled',
      },
    ],
    activity: [
      {
        pid: 1,
        query_text: 'SELECT 1',
        state: 'active',
        wait_event_type: null,
        wait_event: null,
        duration_ms: 1,
        blocking_pids: [],
        xact_start: collectedAt,
        memory_usage: 1,
      },
    ],
    waits: [{ wait_event_type: 'IO', wait_event: 'DataFileRead', count: 1, total_duration_ms: 1 }],
    tables: [
      {
        schema_name: 'public',
        table_name: 't',
        ...counters,
        n_live_tup: 1,
        n_dead_tup: 1,
        last_vacuum: collectedAt,
        last_autovacuum: null,
        last_analyze: null,
        last_autoanalyze: null,
        table_size_bytes: 1,
        index_size_bytes: 1,
        delta: counters,
      },
    ],
    indexes: [
      {
        schema_name: 'public',
        table_name: 't',
        index_name: 'i',
        idx_scan: 1,
        idx_tup_read: 1,
        idx_tup_fetch: 1,
        size_bytes: 1,
        index_def: 'CREATE INDEX i ON public.t USING btree (id)',
        is_unique: false,
        is_primary: false,
        is_valid: true,
        delta: { idx_scan: 1, idx_tup_read: 1, idx_tup_fetch: 1 },
      },
    ],
    replication: {
      is_replica: false,
      replication_lag_bytes: null,
      replication_lag_seconds: null,
      upstream_host: null,
      replicas: [],
      slots: [{ slot_name: 's', slot_type: 'physical', active: true, lag_bytes: 1, wal_status: 'reserved' }],
    },
    bgwriter: { buffers_clean: 1 },
    wal_stats: { wal_bytes: 1 },
    database_stats: { xact_commit: 1 },
    io_stats: [{ backend_type: 'client backend', object: 'relation', context: 'normal', counters: { reads: 1 } }],
  })
}

function fullChBatch(name: string, collectedAt: number) {
  return chBatch(name, collectedAt, {
    query_stats: [statement],
    server_metrics: { MemoryTracking: 1 },
    parts: [{ database: 'd', table: 't', partition_id: 'all', active_parts: 1, rows: 1, bytes_on_disk: 1 }],
  })
}

for (const kind of storeKinds) {
  describe(`time bounds (${kind})`, () => {
    const session = agentSession(kind)
    const post = (batch: unknown) => session.server.call('POST', '/api/v1/ingest', { apiKey: session.key, body: batch })

    test('collected_at more than 10 minutes ahead of the server clock is a 400 naming it; up to 10 minutes ahead is taken', async () => {
      const now = Date.now()
      const ahead = now + 10 * MINUTE + 30_000
      const refused = await post(fullPgBatch('clock', ahead))
      expect({ status: refused.status, body: refused.body }).toEqual({
        status: 400,
        body: {
          error: `invalid collected_at: ${new Date(ahead).toISOString()} is 11 min ahead of the server's clock (at most 10 min allowed); check the clock of the agent's host`,
        },
      })
      const far = await post(fullChBatch('clock-ch', MAX_EPOCH_MS))
      expect(far.status).toBe(400)
      expect(far.body.error).toMatch(
        /^invalid collected_at: 9999-12-31T23:59:59\.999Z is \d+ days ahead of the server's clock \(at most 10 min allowed\)/,
      )
      expect((await post(fullPgBatch('clock', now + 9 * MINUTE))).status).toBe(200)
      // The server's clock is the measure: moved on, it takes what it refused.
      session.server.advance(2 * MINUTE)
      expect((await post(fullPgBatch('clock', ahead))).status).toBe(200)
      session.server.advance(-2 * MINUTE)
    })

    test('rows already stored from a batch collected in the year 9999 break no read', async () => {
      // Registered the ordinary way, then given a far-future batch straight through the store (as the API took them before).
      const pgId = (await post(fullPgBatch('stored-future', Date.now()))).body.database_id
      const chId = (await post(fullChBatch('stored-future-ch', Date.now()))).body.database_id
      const owner = await session.server.store.driver.get<{ org_id: string }>(
        'SELECT org_id FROM databases WHERE id = $1',
        [pgId],
      )
      for (const batch of [fullPgBatch('stored-future', MAX_EPOCH_MS), fullChBatch('stored-future-ch', MAX_EPOCH_MS)]) {
        expect((await session.server.store.ingest(owner!.org_id, batch, Date.now())).kind).toBe('applied')
      }
      // Every GET route of a database, with its default window and with one reaching the year 9999.
      const routes = createApp(session.server.deps)
        .routes.filter((r) => r.method === 'GET' && r.path.startsWith('/api/v1/databases/:id'))
        .map((r) =>
          r.path
            .replace('/api/v1/databases/:id', '')
            .replace(':hash', 'q')
            .replace(':schema', 'public')
            .replace(':name', 't'),
        )
      expect(routes.length).toBeGreaterThan(30)
      const failures: string[] = []
      for (const id of [pgId, chId]) {
        for (const path of routes) {
          for (const query of ['', '?since=2026-01-01T00:00:00Z&until=9999-12-31T23:59:59.999Z&bucket=2678400']) {
            const res = await session.get(id, path + query)
            if (res.status >= 500) failures.push(`${path}${query}: ${res.status} ${JSON.stringify(res.body)}`)
          }
        }
      }
      expect(failures).toEqual([])
      const list = await session.server.call('GET', '/api/v1/databases', { apiKey: session.key })
      expect(list.status).toBe(200)
    })

    test('a poll interval over 24 h or under 1 s is a 400 naming the field, however large the number', async () => {
      const id = (await post(pgBatch('interval', Date.now()))).body.database_id
      const patch = (raw: string) =>
        session.server.call('PATCH', `/api/v1/databases/${id}`, {
          apiKey: session.key,
          rawBody: raw,
          headers: { 'content-type': 'application/json' },
        })
      for (const value of ['86401', '1e308', '1e400', '0', '-1', '0.5', '3600.5']) {
        const res = await patch(`{"poll_interval_seconds": ${value}}`)
        expect({ value, status: res.status, body: res.body }).toEqual({
          value,
          status: 400,
          body: { error: 'poll_interval_seconds must be an integer from 1 to 86400' },
        })
      }
      for (const value of [86400, 1]) {
        const res = await patch(`{"poll_interval_seconds": ${value}}`)
        expect({ value, status: res.status, stored: res.body.poll_interval_seconds }).toEqual({
          value,
          status: 200,
          stored: value,
        })
      }
      // The interval a batch registers a database with is bounded the same way.
      const registered = await post({ ...pgBatch('interval-new', Date.now()), interval_seconds: 86_401 })
      expect({
        status: registered.status,
        names: String(registered.body.error).startsWith('invalid interval_seconds'),
      }).toEqual({ status: 400, names: true })
    })
  })
}
