// Active queries, locks, tables and indexes on both stores: crafted batches across minute boundaries,
// exact values from every endpoint (sort orders, clamped limits, the unused-index filter at its 1 MB
// edge, per-bucket sums and last gauges), engine and organization checks, the WebSocket stream and
// the cascade of a database's delete.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { request as httpRequest } from 'node:http'
import type { ActiveQuery, IndexStat, IngestBatch, LockEntry, TableStat } from '../../src/shared/wire.ts'
import { type Account, type TestServer, agentAccount, signup, startTestServer, storeKinds } from '../support/server.ts'

const MINUTE = 60_000
const HOUR = 3_600_000
const MB = 1_048_576
const iso = (ms: number) => new Date(ms).toISOString()

function batch(
  name: string,
  collectedAt: number,
  sections: Partial<IngestBatch>,
  engine: 'postgres' | 'clickhouse' = 'postgres',
): IngestBatch {
  return {
    batch_id: crypto.randomUUID(),
    collected_at: collectedAt,
    interval_seconds: 10,
    agent_version: 'test',
    database: {
      name,
      engine,
      engine_version: engine === 'postgres' ? '17.2' : '26.1',
      host: 'db.internal',
      port: engine === 'postgres' ? 5432 : 8123,
    },
    ...sections,
  }
}

type Counters = Pick<
  TableStat,
  'seq_scan' | 'seq_tup_read' | 'idx_scan' | 'idx_tup_fetch' | 'n_tup_ins' | 'n_tup_upd' | 'n_tup_del' | 'n_tup_hot_upd'
>
const zeroCounters: Counters = {
  seq_scan: 0,
  seq_tup_read: 0,
  idx_scan: 0,
  idx_tup_fetch: 0,
  n_tup_ins: 0,
  n_tup_upd: 0,
  n_tup_del: 0,
  n_tup_hot_upd: 0,
}

function table(schema: string, name: string, fields: Partial<TableStat> = {}): TableStat {
  return {
    schema_name: schema,
    table_name: name,
    ...zeroCounters,
    n_live_tup: 0,
    n_dead_tup: 0,
    last_vacuum: null,
    last_autovacuum: null,
    last_analyze: null,
    last_autoanalyze: null,
    table_size_bytes: null,
    index_size_bytes: null,
    has_primary_key: false,
    delta: null,
    ...fields,
  }
}

function index(schema: string, tableName: string, name: string, fields: Partial<IndexStat> = {}): IndexStat {
  return {
    schema_name: schema,
    table_name: tableName,
    index_name: name,
    idx_scan: 0,
    idx_tup_read: 0,
    idx_tup_fetch: 0,
    size_bytes: 8192,
    index_def: `CREATE INDEX ${name} ON ${schema}.${tableName} USING btree (id)`,
    is_unique: false,
    is_primary: false,
    is_valid: true,
    delta: null,
    ...fields,
  }
}

function session(pid: number | string, durationMs: number | null, fields: Partial<ActiveQuery> = {}): ActiveQuery {
  return {
    pid,
    query_text: `SELECT ${pid}`,
    state: 'active',
    wait_event_type: null,
    wait_event: null,
    duration_ms: durationMs,
    blocking_pids: [],
    ...fields,
  }
}

function lock(pid: number, granted: boolean, durationMs: number, blockedBy: number | null = null): LockEntry {
  return {
    pid,
    lock_type: 'relation',
    mode: granted ? 'RowExclusiveLock' : 'AccessExclusiveLock',
    relation_name: 'public.orders',
    granted,
    blocked_by_pid: blockedBy,
    duration_ms: durationMs,
    query_text: `q${pid}`,
  }
}

/** An HTTP upgrade request: the status and body when refused, status 101 when accepted. */
function upgrade(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        ...headers,
      },
    })
    req.on('upgrade', (_res, socket) => {
      socket.destroy()
      resolve({ status: 101, body: null })
    })
    req.on('response', (res) => {
      let text = ''
      res.on('data', (c) => (text += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }))
    })
    req.on('error', reject)
    req.end()
  })
}

interface StreamResult {
  messages: { at: number; data: any }[]
  close?: { code: number; reason: string }
}

/** Connects, collects `want` messages (or until the server closes), then closes. */
function stream(url: string, want: number, headers?: Record<string, string>): Promise<StreamResult> {
  return new Promise((resolve) => {
    const result: StreamResult = { messages: [] }
    const ws = new WebSocket(url, headers ? ({ headers } as never) : undefined)
    ws.onmessage = (e) => {
      result.messages.push({ at: Date.now(), data: JSON.parse(String(e.data)) })
      if (result.messages.length === want) ws.close(1000)
    }
    ws.onclose = (e) => {
      if (result.messages.length < want) result.close = { code: e.code, reason: e.reason }
      resolve(result)
    }
  })
}

// The objects of the main scenario: three batches, the first (minute 0) without deltas, then two in minute 1.
const T_BASE = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR
const T1 = T_BASE + 10_000
const T2 = T_BASE + MINUTE + 10_000
const T3 = T_BASE + MINUTE + 40_000

const ordersA = table('public', 'orders', {
  seq_scan: 100,
  seq_tup_read: 1000,
  idx_scan: 50,
  idx_tup_fetch: 500,
  n_tup_ins: 10,
  n_tup_upd: 5,
  n_tup_del: 1,
  n_tup_hot_upd: 2,
  n_live_tup: 1000,
  n_dead_tup: 50,
  table_size_bytes: 81920,
  index_size_bytes: 16384,
  has_primary_key: true,
  last_vacuum: T_BASE - HOUR,
  last_analyze: T_BASE - 30 * MINUTE,
  last_autoanalyze: T_BASE - 10 * MINUTE,
})
const ordersDeltaB = {
  seq_scan: 3,
  seq_tup_read: 30,
  idx_scan: 7,
  idx_tup_fetch: 70,
  n_tup_ins: 4,
  n_tup_upd: 2,
  n_tup_del: 1,
  n_tup_hot_upd: 1,
}
const ordersB = table('public', 'orders', {
  ...ordersA,
  seq_scan: 103,
  seq_tup_read: 1030,
  idx_scan: 57,
  idx_tup_fetch: 570,
  n_tup_ins: 14,
  n_tup_upd: 7,
  n_tup_del: 2,
  n_tup_hot_upd: 3,
  n_live_tup: 1003,
  n_dead_tup: 52,
  table_size_bytes: 90112,
  delta: ordersDeltaB,
})
const ordersDeltaC = {
  seq_scan: 2,
  seq_tup_read: 20,
  idx_scan: 0,
  idx_tup_fetch: 0,
  n_tup_ins: 2,
  n_tup_upd: 0,
  n_tup_del: 0,
  n_tup_hot_upd: 0,
}
// The agent could not size the table this cycle (an ACCESS EXCLUSIVE lock on it): the size is null.
const ordersC = table('public', 'orders', {
  ...ordersB,
  seq_scan: 105,
  seq_tup_read: 1050,
  n_tup_ins: 16,
  n_live_tup: 1005,
  n_dead_tup: 52,
  table_size_bytes: null,
  delta: ordersDeltaC,
})
const events = table('public', 'events', {
  seq_scan: 500,
  n_live_tup: 500,
  n_dead_tup: 400,
  table_size_bytes: 40960,
  index_size_bytes: 0,
  idx_scan: null,
  idx_tup_fetch: null,
})
const auditLog = table('audit', 'log', {
  seq_scan: 2,
  n_live_tup: 20000,
  n_dead_tup: 0,
  table_size_bytes: 1_000_000,
  index_size_bytes: 200_000,
  has_primary_key: true,
})
const empty = table('public', 'empty', {})
const withDelta = (t: TableStat): TableStat => ({ ...t, delta: { ...zeroCounters } })

const idx = {
  pkey: index('public', 'orders', 'orders_pkey', {
    is_primary: true,
    is_unique: true,
    size_bytes: 5 * MB,
    idx_tup_read: 200,
  }),
  emailKey: index('public', 'orders', 'orders_email_key', { is_unique: true, size_bytes: 5 * MB }),
  note: index('public', 'orders', 'orders_note_idx', { size_bytes: MB + 1 }),
  big: index('public', 'orders', 'orders_big_idx', { size_bytes: 10 * MB }),
  exact: index('public', 'orders', 'orders_exact_idx', { size_bytes: MB }),
  used: index('public', 'orders', 'orders_used_idx', {
    size_bytes: 5 * MB,
    idx_scan: 1,
    idx_tup_read: 300,
    idx_tup_fetch: 30,
  }),
  audit: index('audit', 'log', 'log_ts_idx', { size_bytes: null, idx_scan: 7, idx_tup_read: 100, is_valid: false }),
}
const indexesA = Object.values(idx).map((i) => ({
  ...i,
  idx_scan: i === idx.used ? 0 : i.idx_scan,
  idx_tup_read: i === idx.used ? 0 : i.idx_tup_read,
}))
const indexesB = Object.values(idx).map((i) => ({
  ...i,
  delta: {
    idx_scan: i === idx.used ? 1 : 0,
    idx_tup_read: i === idx.used ? 300 : 0,
    idx_tup_fetch: i === idx.used ? 30 : 0,
  },
}))

for (const kind of storeKinds) {
  describe(`active queries, locks, tables and indexes (${kind})`, () => {
    let server: TestServer
    let account: Account
    let key: string
    let id: string
    beforeAll(async () => {
      server = await startTestServer(kind)
      ;({ account, key } = await agentAccount(server))
      const activity = [
        session(41, 5),
        session(42, null, { state: 'idle in transaction' }),
        session(43, 1200.5, {
          wait_event_type: 'Lock',
          wait_event: 'transactionid',
          blocking_pids: [41],
          user: 'app',
          application_name: 'billing',
          client_addr: '10.0.0.7',
          database: 'shop',
          backend_type: 'client backend',
          xact_start: T3 - 2000,
        }),
      ]
      const locks = [lock(10, true, 5000), lock(11, false, 300, 10), lock(12, true, 9000), lock(13, false, 100, 12)]
      await ingest(batch('objects', T1, { tables: [ordersA, events, auditLog, empty], indexes: indexesA }))
      await ingest(
        batch('objects', T2, {
          tables: [ordersB, withDelta(events), withDelta(auditLog), withDelta(empty)],
          indexes: indexesB,
        }),
      )
      id = await ingest(
        batch('objects', T3, {
          tables: [ordersC, withDelta(events), withDelta(auditLog), withDelta(empty)],
          activity,
          locks,
        }),
      )
    })
    afterAll(async () => {
      await server.stop()
    })

    async function ingest(b: IngestBatch): Promise<string> {
      const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: b })
      if (res.status !== 200) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body.database_id
    }
    const get = (path: string, as: { apiKey?: string; token?: string } = { apiKey: key }) =>
      server.call('GET', path, as)
    const body = async (path: string) => {
      const res = await get(path)
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body
    }
    const wsUrl = (path: string) => `${server.base.replace(/^http/, 'ws')}${path}`

    test('GET /active: the latest snapshot, longest first, with the extra wire fields', async () => {
      const active = await body(`/api/v1/databases/${id}/active`)
      expect(active.map((a: any) => a.pid)).toEqual([43, 41, 42])
      expect(active[0]).toEqual({
        pid: 43,
        query_text: 'SELECT 43',
        state: 'active',
        wait_event_type: 'Lock',
        wait_event: 'transactionid',
        duration_ms: 1200.5,
        blocking_pids: [41],
        user: 'app',
        application_name: 'billing',
        client_addr: '10.0.0.7',
        database: 'shop',
        backend_type: 'client backend',
        xact_start: iso(T3 - 2000),
        ts: iso(T3),
      })
      expect(active[2]).toEqual({
        pid: 42,
        query_text: 'SELECT 42',
        state: 'idle in transaction',
        wait_event_type: null,
        wait_event: null,
        duration_ms: null,
        blocking_pids: [],
        ts: iso(T3),
      })
      expect((await body(`/api/v1/databases/${id}/active?limit=2`)).map((a: any) => a.pid)).toEqual([43, 41])
    })

    test('GET /locks: ungranted first, then the longest held', async () => {
      const locks = await body(`/api/v1/databases/${id}/locks`)
      expect(locks.map((l: any) => [l.pid, l.granted, l.blocked_by_pid])).toEqual([
        [11, false, 10],
        [13, false, 12],
        [12, true, null],
        [10, true, null],
      ])
      expect(locks[0]).toEqual({
        pid: 11,
        lock_type: 'relation',
        mode: 'AccessExclusiveLock',
        relation_name: 'public.orders',
        granted: false,
        blocked_by_pid: 10,
        duration_ms: 300,
        query_text: 'q11',
        ts: iso(T3),
      })
      expect(await body(`/api/v1/databases/${id}/locks?limit=1`)).toHaveLength(1)
    })

    test('GET /tables: every sort order, the exact entry, limits', async () => {
      const names = async (q: string) =>
        (await body(`/api/v1/databases/${id}/tables${q}`)).map((t: any) => `${t.schema_name}.${t.table_name}`)
      expect(await names('')).toEqual(['audit.log', 'public.orders', 'public.events', 'public.empty'])
      expect(await names('?sort_by=size')).toEqual(['audit.log', 'public.orders', 'public.events', 'public.empty'])
      expect(await names('?sort_by=dead_tuples')).toEqual([
        'public.events',
        'public.orders',
        'audit.log',
        'public.empty',
      ])
      expect(await names('?sort_by=seq_scans')).toEqual(['public.events', 'public.orders', 'audit.log', 'public.empty'])
      expect(await names('?sort_by=live_tuples')).toEqual([
        'audit.log',
        'public.orders',
        'public.events',
        'public.empty',
      ])
      expect(await names('?sort_by=index_size')).toEqual([
        'audit.log',
        'public.orders',
        'public.events',
        'public.empty',
      ])
      expect(await names('?sort_by=dead_tuples&limit=2')).toEqual(['public.events', 'public.orders'])

      const orders = (await body(`/api/v1/databases/${id}/tables`)).find((t: any) => t.table_name === 'orders')
      // The size the agent could not measure in the last cycle is the last one measured.
      expect(orders).toEqual({
        schema_name: 'public',
        table_name: 'orders',
        seq_scan: 105,
        idx_scan: 57,
        n_tup_ins: 16,
        n_tup_upd: 7,
        n_tup_del: 2,
        n_live_tup: 1005,
        n_dead_tup: 52,
        last_vacuum: iso(T_BASE - HOUR),
        last_autovacuum: null,
        last_analyze: iso(T_BASE - 30 * MINUTE),
        table_size_bytes: 90112,
        index_size_bytes: 16384,
        has_primary_key: true,
        // These batches are an older agent's, without the field.
        autovacuum_enabled: null,
        dead_tuple_ratio: Number((52 / 1057).toFixed(6)),
        seq_tup_read: 1050,
        idx_tup_fetch: 570,
        n_tup_hot_upd: 3,
        n_tup_newpage_upd: null, // a counter these batches do not send (agents before it): null
        heap_bytes: null, // sizes these batches do not send (agents before them): null
        toast_bytes: null,
        n_mod_since_analyze: null, // a gauge these batches do not send (agents before it): null
        total_bytes: 90112 + 16384,
        last_autoanalyze: iso(T_BASE - 10 * MINUTE),
        ts: iso(T3),
      })
      const emptyTable = (await body(`/api/v1/databases/${id}/tables`)).find((t: any) => t.table_name === 'empty')
      expect(emptyTable).toMatchObject({ table_size_bytes: null, dead_tuple_ratio: null, has_primary_key: false })
    })

    test('GET /tables: autovacuum_enabled as the latest batch sent it, null when it did not carry it (an older agent); a late batch changes nothing', async () => {
      const now = Date.now()
      const tables = (ledger: boolean | undefined, plain: boolean | undefined) => [
        table('public', 'ledger', { autovacuum_enabled: ledger }),
        table('public', 'plain', { autovacuum_enabled: plain }),
      ]
      const settings = await ingest(batch('settings', now - 2 * MINUTE, { tables: tables(false, true) }))
      const seen = async () => {
        const list = (await body(`/api/v1/databases/${settings}/tables`)) as any[]
        const detail = await body(`/api/v1/databases/${settings}/tables/public/ledger`)
        return {
          ...Object.fromEntries(list.map((t) => [t.table_name, t.autovacuum_enabled])),
          detail: detail.autovacuum_enabled,
        }
      }
      expect(await seen()).toEqual({ ledger: false, plain: true, detail: false })
      await ingest(batch('settings', now - 3 * MINUTE, { tables: tables(true, true) }))
      expect(await seen()).toEqual({ ledger: false, plain: true, detail: false })
      await ingest(batch('settings', now - MINUTE, { tables: tables(undefined, undefined) }))
      expect(await seen()).toEqual({ ledger: null, plain: null, detail: null })
      await ingest(batch('settings', now, { tables: tables(true, false) }))
      expect(await seen()).toEqual({ ledger: true, plain: false, detail: true })
    })

    test('GET /tables: heap, TOAST and total sizes as a current agent sends them; one not measured this cycle keeps the last', async () => {
      const now = Date.now()
      const sizes = {
        table_size_bytes: 5_000_000,
        index_size_bytes: 300_000,
        heap_bytes: 800_000,
        toast_bytes: 4_100_000,
      }
      const db = await ingest(
        batch('sizes', now - MINUTE, {
          tables: [table('public', 'docs', sizes), table('public', 'plain', { ...sizes, toast_bytes: 0 })],
        }),
      )
      const seen = async () => {
        const pick = (t: any) => [t.table_name, t.heap_bytes, t.index_size_bytes, t.toast_bytes, t.total_bytes]
        const list = (await body(`/api/v1/databases/${db}/tables?sort_by=toast_size`)) as any[]
        const detail = await body(`/api/v1/databases/${db}/tables/public/docs`)
        return {
          list: list.map(pick),
          detail: pick(detail),
          point: [detail.timeseries.at(-1).heap_bytes, detail.timeseries.at(-1).toast_bytes],
        }
      }
      expect(await seen()).toEqual({
        list: [
          ['docs', 800_000, 300_000, 4_100_000, 5_300_000],
          ['plain', 800_000, 300_000, 0, 5_300_000],
        ],
        detail: ['docs', 800_000, 300_000, 4_100_000, 5_300_000],
        point: [800_000, 4_100_000],
      })
      // The table was locked against sizing this cycle: every size null, the last ones stand.
      const unmeasured = { table_size_bytes: null, index_size_bytes: null, heap_bytes: null, toast_bytes: null }
      await ingest(
        batch('sizes', now, {
          tables: [table('public', 'docs', unmeasured), table('public', 'plain', { ...sizes, toast_bytes: 0 })],
        }),
      )
      expect((await seen()).detail).toEqual(['docs', 800_000, 300_000, 4_100_000, 5_300_000])
    })

    test('GET /tables/{schema}/{name}: sums per minute bucket, last gauges, hourly beyond 24 hours', async () => {
      const detail = await body(
        `/api/v1/databases/${id}/tables/public/orders?since=${iso(T_BASE)}&until=${iso(T_BASE + HOUR)}`,
      )
      expect(detail).toMatchObject({
        schema_name: 'public',
        table_name: 'orders',
        seq_scan: 105,
        since: iso(T_BASE),
        until: iso(T_BASE + HOUR),
        resolution_seconds: 60,
      })
      expect(detail.timeseries).toEqual([
        // Minute 0 holds only the first sample: no deltas, its gauges.
        {
          ts: iso(T_BASE),
          seq_scan: null,
          seq_tup_read: null,
          idx_scan: null,
          idx_tup_fetch: null,
          n_tup_ins: null,
          n_tup_upd: null,
          n_tup_del: null,
          n_tup_hot_upd: null,
          n_tup_newpage_upd: null, // a counter these batches do not send (agents before it): null
          n_live_tup: 1000,
          n_dead_tup: 50,
          table_size_bytes: 81920,
          index_size_bytes: 16384,
          heap_bytes: null,
          toast_bytes: null,
          n_mod_since_analyze: null, // a gauge these batches do not send (agents before it): null
        },
        // Minute 1: the two batches' deltas summed; gauges from the last one, its unknown size from the one before.
        {
          ts: iso(T_BASE + MINUTE),
          seq_scan: 5,
          seq_tup_read: 50,
          idx_scan: 7,
          idx_tup_fetch: 70,
          n_tup_ins: 6,
          n_tup_upd: 2,
          n_tup_del: 1,
          n_tup_hot_upd: 1,
          n_tup_newpage_upd: null, // a counter these batches do not send (agents before it): null
          n_live_tup: 1005,
          n_dead_tup: 52,
          table_size_bytes: 90112,
          index_size_bytes: 16384,
          heap_bytes: null,
          toast_bytes: null,
          n_mod_since_analyze: null, // a gauge these batches do not send (agents before it): null
        },
      ])
      const hourly = await body(
        `/api/v1/databases/${id}/tables/public/orders?since=${iso(T_BASE - 24 * HOUR)}&until=${iso(T_BASE + HOUR)}`,
      )
      expect(hourly.resolution_seconds).toBe(3600)
      expect(hourly.timeseries).toEqual([
        {
          ts: iso(T_BASE),
          seq_scan: 5,
          seq_tup_read: 50,
          idx_scan: 7,
          idx_tup_fetch: 70,
          n_tup_ins: 6,
          n_tup_upd: 2,
          n_tup_del: 1,
          n_tup_hot_upd: 1,
          n_tup_newpage_upd: null, // a counter these batches do not send (agents before it): null
          n_live_tup: 1005,
          n_dead_tup: 52,
          table_size_bytes: 90112,
          index_size_bytes: 16384,
          heap_bytes: null,
          toast_bytes: null,
          n_mod_since_analyze: null, // a gauge these batches do not send (agents before it): null
        },
      ])
      // The default window is the last 24 hours; a window after the data has no points.
      expect(
        (await body(`/api/v1/databases/${id}/tables/public/events`)).timeseries.map((p: any) => [p.ts, p.seq_scan]),
      ).toEqual([
        [iso(T_BASE), null],
        [iso(T_BASE + MINUTE), 0],
      ])
      expect(
        (
          await body(
            `/api/v1/databases/${id}/tables/public/events?since=${iso(T_BASE + 2 * MINUTE)}&until=${iso(T_BASE + HOUR)}`,
          )
        ).timeseries,
      ).toEqual([])
      for (const path of ['tables/public/nope', 'tables/nope/orders']) {
        const missing = await get(`/api/v1/databases/${id}/${path}`)
        expect({ path, status: missing.status, body: missing.body }).toEqual({
          path,
          status: 404,
          body: { error: 'table not found' },
        })
      }
    })

    test('GET /indexes: sort orders and the exact entry', async () => {
      const names = async (q: string) =>
        (await body(`/api/v1/databases/${id}/indexes${q}`)).map((i: any) => `${i.schema_name}.${i.index_name}`)
      const bySize = [
        'public.orders_big_idx',
        'public.orders_email_key',
        'public.orders_pkey',
        'public.orders_used_idx',
        'public.orders_note_idx',
        'public.orders_exact_idx',
        'audit.log_ts_idx',
      ]
      expect(await names('')).toEqual(bySize)
      expect(await names('?sort_by=size')).toEqual(bySize)
      expect(await names('?sort_by=scans')).toEqual([
        'audit.log_ts_idx',
        'public.orders_used_idx',
        'public.orders_big_idx',
        'public.orders_email_key',
        'public.orders_exact_idx',
        'public.orders_note_idx',
        'public.orders_pkey',
      ])
      expect(await names('?sort_by=tuples_read')).toEqual([
        'public.orders_used_idx',
        'public.orders_pkey',
        'audit.log_ts_idx',
        'public.orders_big_idx',
        'public.orders_email_key',
        'public.orders_exact_idx',
        'public.orders_note_idx',
      ])
      expect(await names('?sort_by=scans&limit=2')).toEqual(['audit.log_ts_idx', 'public.orders_used_idx'])
      const pkey = (await body(`/api/v1/databases/${id}/indexes`)).find((i: any) => i.index_name === 'orders_pkey')
      expect(pkey).toEqual({
        schema_name: 'public',
        table_name: 'orders',
        index_name: 'orders_pkey',
        ts: iso(T2),
        idx_scan: 0,
        idx_tup_read: 200,
        idx_tup_fetch: 0,
        size_bytes: 5 * MB,
        index_def: 'CREATE INDEX orders_pkey ON public.orders USING btree (id)',
        is_unique: true,
        is_primary: true,
        is_valid: true,
      })
      expect(
        (await body(`/api/v1/databases/${id}/indexes`)).find((i: any) => i.index_name === 'log_ts_idx'),
      ).toMatchObject({ size_bytes: null, is_valid: false })
    })

    test('GET /indexes/unused: never scanned, neither primary nor unique, over exactly 1 MB', async () => {
      const unused = await body(`/api/v1/databases/${id}/indexes/unused`)
      // orders_exact_idx (1 MB) is not over the threshold; orders_note_idx (1 MB + 1 byte) is.
      expect(unused.map((i: any) => [i.index_name, i.size_bytes])).toEqual([
        ['orders_big_idx', 10 * MB],
        ['orders_note_idx', MB + 1],
      ])
      expect(unused[1]).toEqual({
        schema_name: 'public',
        table_name: 'orders',
        index_name: 'orders_note_idx',
        ts: iso(T2),
        idx_scan: 0,
        idx_tup_read: 0,
        idx_tup_fetch: 0,
        size_bytes: MB + 1,
        index_def: 'CREATE INDEX orders_note_idx ON public.orders USING btree (id)',
        is_unique: false,
        is_primary: false,
        is_valid: true,
      })
      expect((await body(`/api/v1/databases/${id}/indexes/unused?limit=1`)).map((i: any) => i.index_name)).toEqual([
        'orders_big_idx',
      ])
      expect(
        (await body(`/api/v1/databases/${id}/indexes/unused?sort_by=scans`)).map((i: any) => i.index_name),
      ).toEqual(['orders_big_idx', 'orders_note_idx'])
    })

    test('GET /indexes/{schema}/{name}: metadata and per-bucket deltas; 404 for an unknown index', async () => {
      const detail = await body(
        `/api/v1/databases/${id}/indexes/public/orders_used_idx?since=${iso(T_BASE)}&until=${iso(T_BASE + HOUR)}`,
      )
      expect(detail).toMatchObject({
        index_name: 'orders_used_idx',
        idx_scan: 1,
        idx_tup_read: 300,
        is_unique: false,
        resolution_seconds: 60,
      })
      expect(detail.timeseries).toEqual([
        { ts: iso(T_BASE), idx_scan: null, idx_tup_read: null, idx_tup_fetch: null, size_bytes: 5 * MB },
        { ts: iso(T_BASE + MINUTE), idx_scan: 1, idx_tup_read: 300, idx_tup_fetch: 30, size_bytes: 5 * MB },
      ])
      const missing = await get(`/api/v1/databases/${id}/indexes/public/nope`)
      expect({ status: missing.status, body: missing.body }).toEqual({
        status: 404,
        body: { error: 'index not found' },
      })
    })

    test('query parameters: limits clamped to their maximum, 400 for bad values', async () => {
      const tables = Array.from({ length: 600 }, (_, i) => table('bulk', `t${i}`, { table_size_bytes: i }))
      const indexes = Array.from({ length: 600 }, (_, i) => index('bulk', `t${i}`, `i${i}`, { size_bytes: 2 * MB + i }))
      const activity = Array.from({ length: 250 }, (_, i) => session(1000 + i, i))
      const locks = Array.from({ length: 600 }, (_, i) => lock(2000 + i, i % 2 === 0, i))
      const bulk = await ingest(batch('bulk', Date.now(), { tables, indexes, activity, locks }))
      const count = async (path: string) => (await body(`/api/v1/databases/${bulk}/${path}`)).length
      expect(await count('active')).toBe(50)
      expect(await count('active?limit=100000')).toBe(200)
      expect(await count('locks')).toBe(100)
      expect(await count('locks?limit=100000')).toBe(500)
      expect(await count('tables')).toBe(50)
      expect(await count('tables?limit=100000')).toBe(500)
      expect(await count('indexes')).toBe(50)
      expect(await count('indexes?limit=501')).toBe(500)
      expect(await count('indexes/unused?limit=100000')).toBe(500)
      expect((await body(`/api/v1/databases/${bulk}/tables?limit=1`))[0].table_name).toBe('t599')

      const cases: [string, string][] = [
        [
          'tables?sort_by=rows',
          'sort_by must be one of: size, dead_tuples, seq_scans, live_tuples, index_size, heap_size, toast_size, total_size',
        ],
        ['tables?limit=0', 'limit must be a whole number from 1 (at most 500 are returned)'],
        ['tables?limit=ten', 'limit must be a whole number from 1 (at most 500 are returned)'],
        ['indexes?sort_by=dead_tuples', 'sort_by must be one of: size, scans, tuples_read'],
        ['indexes/unused?sort_by=unused', 'sort_by must be one of: size, scans, tuples_read'],
        ['indexes?limit=-1', 'limit must be a whole number from 1 (at most 500 are returned)'],
        ['indexes/unused?limit=1.5', 'limit must be a whole number from 1 (at most 500 are returned)'],
        ['active?limit=0', 'limit must be a whole number from 1 (at most 200 are returned)'],
        ['locks?limit=x', 'limit must be a whole number from 1 (at most 500 are returned)'],
        ['tables/public/orders?since=yesterday', 'since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z'],
        [
          'indexes/public/i1?until=2026-13-45T00:00:00Z',
          'until must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z',
        ],
      ]
      for (const [path, error] of cases) {
        const res = await get(`/api/v1/databases/${bulk}/${path}`)
        expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 400, body: { error } })
      }
    })

    test('a database without data answers empty lists', async () => {
      const bare = await ingest(batch('bare', Date.now(), {}))
      for (const path of ['active', 'locks', 'tables', 'indexes', 'indexes/unused']) {
        expect({ path, body: await body(`/api/v1/databases/${bare}/${path}`) }).toEqual({ path, body: [] })
      }
    })

    test('ClickHouse: /active serves it with its extra fields; PostgreSQL-only endpoints answer 400', async () => {
      const ch = await ingest(
        batch(
          'ch',
          T3,
          {
            activity: [
              session('9f1c-query-id', 250, {
                state: null,
                memory_usage: 1024,
                read_bytes: 2048,
                written_bytes: 0,
                read_rows: 10,
                user: 'default',
              }),
            ],
          },
          'clickhouse',
        ),
      )
      expect(await body(`/api/v1/databases/${ch}/active`)).toEqual([
        {
          pid: '9f1c-query-id',
          query_text: 'SELECT 9f1c-query-id',
          state: null,
          wait_event_type: null,
          wait_event: null,
          duration_ms: 250,
          blocking_pids: [],
          user: 'default',
          memory_usage: 1024,
          read_bytes: 2048,
          written_bytes: 0,
          read_rows: 10,
          ts: iso(T3),
        },
      ])
      for (const path of [
        'locks',
        'tables',
        'tables/public/orders',
        'indexes',
        'indexes/unused',
        'indexes/public/orders_pkey',
      ]) {
        const res = await get(`/api/v1/databases/${ch}/${path}`)
        expect({ path, status: res.status, body: res.body }).toEqual({
          path,
          status: 400,
          body: { error: 'this endpoint serves postgres databases; "ch" is a clickhouse database' },
        })
      }
    })

    test("another organization's database is not found; no credential is 401", async () => {
      const other = await signup(server)
      for (const path of [
        'active',
        'locks',
        'tables',
        'tables/public/orders',
        'indexes',
        'indexes/unused',
        'indexes/public/orders_pkey',
      ]) {
        const res = await get(`/api/v1/databases/${id}/${path}`, { token: other.token })
        expect({ path, status: res.status, body: res.body }).toEqual({
          path,
          status: 404,
          body: { error: 'database not found' },
        })
        expect((await get(`/api/v1/databases/${id}/${path}`, {})).status).toBe(401)
      }
    })

    test('a late batch adds to its buckets without replacing newer latest entries; a dropped table leaves the list', async () => {
      const t0 = T_BASE + 5 * MINUTE
      const a = table('public', 'a', { seq_scan: 10, n_live_tup: 1, table_size_bytes: 100 })
      const b = table('public', 'b', { table_size_bytes: 50 })
      const db = await ingest(
        batch('lifecycle', t0 + 30_000, { tables: [a, b], indexes: [index('public', 'a', 'a_idx')] }),
      )
      // Collected earlier (minute 4), arriving later: its delta lands in minute 4, the latest entries stay.
      await ingest(
        batch('lifecycle', t0 - 30_000, {
          tables: [{ ...a, seq_scan: 7, n_live_tup: 99, delta: { ...zeroCounters, seq_scan: 3 } }],
        }),
      )
      const detail = await body(
        `/api/v1/databases/${db}/tables/public/a?since=${iso(T_BASE)}&until=${iso(T_BASE + HOUR)}`,
      )
      expect(detail).toMatchObject({ seq_scan: 10, n_live_tup: 1, ts: iso(t0 + 30_000) })
      expect(detail.timeseries.map((p: any) => [p.ts, p.seq_scan, p.n_live_tup])).toEqual([
        [iso(T_BASE + 4 * MINUTE), 3, 99],
        [iso(T_BASE + 5 * MINUTE), null, 1],
      ])
      // A batch without the tables section leaves them; one without table b drops b from the latest entries.
      await ingest(batch('lifecycle', t0 + 40_000, {}))
      expect((await body(`/api/v1/databases/${db}/tables`)).map((t: any) => t.table_name)).toEqual(['a', 'b'])
      await ingest(
        batch('lifecycle', t0 + 50_000, { tables: [{ ...a, delta: { ...zeroCounters, seq_scan: 4 } }], indexes: [] }),
      )
      expect((await body(`/api/v1/databases/${db}/tables`)).map((t: any) => t.table_name)).toEqual(['a'])
      expect((await get(`/api/v1/databases/${db}/tables/public/b`)).status).toBe(404)
      expect(await body(`/api/v1/databases/${db}/indexes`)).toEqual([])
      // The two later samples of a fall in the same minute bucket: null + 4.
      const after = await body(
        `/api/v1/databases/${db}/tables/public/a?since=${iso(T_BASE)}&until=${iso(T_BASE + HOUR)}`,
      )
      expect(after.timeseries.map((p: any) => [p.ts, p.seq_scan])).toEqual([
        [iso(T_BASE + 4 * MINUTE), 3],
        [iso(T_BASE + 5 * MINUTE), 4],
      ])
    })

    test('a batch naming a table twice counts both deltas and keeps one latest entry', async () => {
      const t = table('public', 'twice', { seq_scan: 5, table_size_bytes: 10, delta: { ...zeroCounters, seq_scan: 2 } })
      const db = await ingest(
        batch('twice', T_BASE + 10 * MINUTE, {
          tables: [t, { ...t, seq_scan: 6, table_size_bytes: 20, delta: { ...zeroCounters, seq_scan: 1 } }],
        }),
      )
      const detail = await body(
        `/api/v1/databases/${db}/tables/public/twice?since=${iso(T_BASE)}&until=${iso(T_BASE + HOUR)}`,
      )
      expect(detail).toMatchObject({ seq_scan: 6, table_size_bytes: 20 })
      expect(detail.timeseries.map((p: any) => [p.seq_scan, p.table_size_bytes])).toEqual([[3, 20]])
    })

    test('WebSocket /active/ws: the snapshot at once and again after the interval, by token, cookie or API key', async () => {
      const started = Date.now()
      const result = await stream(wsUrl(`/api/v1/databases/${id}/active/ws?token=${account.token}&interval=1`), 2)
      expect(result.close).toBeUndefined()
      expect(result.messages).toHaveLength(2)
      expect(result.messages[0]!.at - started).toBeLessThan(900)
      expect(result.messages[1]!.at - result.messages[0]!.at).toBeGreaterThanOrEqual(900)
      for (const m of result.messages) {
        expect(m.data.ts).toBe(iso(T3))
        expect(m.data.active.map((a: any) => a.pid)).toEqual([43, 41, 42])
        expect(m.data.active).toEqual(await body(`/api/v1/databases/${id}/active`))
      }
      const limited = await stream(
        wsUrl(`/api/v1/databases/${id}/active/ws?token=${account.token}&limit=1&interval=999`),
        1,
      )
      expect(limited.messages[0]!.data.active.map((a: any) => a.pid)).toEqual([43])

      const byCookie = await stream(wsUrl(`/api/v1/databases/${id}/active/ws`), 1, {
        cookie: `dbm_access=${account.token}`,
      })
      expect(byCookie.messages[0]!.data.ts).toBe(iso(T3))
      const bare = await ingest(batch('bare', Date.now(), {}))
      const byKey = await stream(wsUrl(`/api/v1/databases/${bare}/active/ws`), 1, { 'x-api-key': key })
      expect(byKey.messages[0]!.data).toEqual({ ts: null, active: [] })
    })

    test('WebSocket /active/ws: refused upgrades, and a close with 1008 for bad parameters', async () => {
      const path = `/api/v1/databases/${id}/active/ws`
      const url = `${server.base}${path}`
      expect(await upgrade(`${url}?token=${account.token}`)).toEqual({ status: 101, body: null })
      expect(await upgrade(url)).toEqual({
        status: 401,
        body: { error: 'authentication required: send "X-API-Key: <key>" or "Authorization: Bearer <token>"' },
      })
      expect(await upgrade(`${url}?token=not.a.jwt`)).toEqual({
        status: 401,
        body: { error: 'invalid or expired access token' },
      })
      expect(await upgrade(`${url}?token=${encodeURIComponent('a b\r\nx')}`)).toEqual({
        status: 401,
        body: { error: 'invalid or expired access token' },
      })
      expect(await upgrade(`${url}?token=${key}`)).toEqual({
        status: 401,
        body: { error: 'invalid or expired access token' },
      })
      const other = await signup(server)
      expect(await upgrade(`${url}?token=${other.token}`)).toEqual({
        status: 404,
        body: { error: 'database not found' },
      })
      expect(
        await upgrade(
          `${server.base}/api/v1/databases/00000000-0000-7000-8000-000000000000/active/ws?token=${account.token}`,
        ),
      ).toEqual({
        status: 404,
        body: { error: 'database not found' },
      })
      expect(await upgrade(`${server.base}/api/v1/databases/nope/active/ws?token=${account.token}`)).toEqual({
        status: 400,
        body: { error: 'id must be a database id (a UUID)' },
      })
      // The dashboard cookie is taken only from this site.
      const cookie = { cookie: `dbm_access=${account.token}` }
      expect(await upgrade(url, { ...cookie, origin: 'https://evil.example' })).toEqual({
        status: 403,
        body: { error: 'cross-site request refused' },
      })
      expect(await upgrade(url, { ...cookie, origin: server.base })).toEqual({ status: 101, body: null })
      // Through a WebSocket client the refusal is a failed connection, never a message.
      expect(await stream(wsUrl(`${path}?token=bad`), 1)).toEqual({ messages: [], close: { code: 1006, reason: '' } })

      const interval = 'interval must be a whole number of seconds from 1 (at most 60 are used)'
      const refused: [string, string][] = [
        ['interval=0', interval],
        ['interval=abc', interval],
        ['interval=1.5', interval],
        ['limit=0', 'limit must be a whole number from 1 (at most 200 are returned)'],
      ]
      for (const [query, reason] of refused) {
        const result = await stream(wsUrl(`${path}?token=${account.token}&${query}`), 1)
        expect({ query, ...result }).toEqual({ query, messages: [], close: { code: 1008, reason } })
      }
      expect(server.logs.join('\n')).not.toContain(account.token)
    })

    test('deleting the database removes its table and index rows', async () => {
      const db = await ingest(batch('doomed', T2, { tables: [ordersB], indexes: indexesB }))
      const counts = async () => {
        const out: Record<string, number> = {}
        for (const t of ['table_stats', 'index_stats', 'latest_tables', 'latest_indexes']) {
          const row = await server.store.driver.get<{ n: number }>(
            `SELECT COUNT(*) AS n FROM ${t} WHERE database_id = $1`,
            [db],
          )
          out[t] = Number(row?.n)
        }
        return out
      }
      // Minute rows only: the hourly ones are rolled up once the hour has closed.
      expect(await counts()).toEqual({ table_stats: 1, index_stats: 7, latest_tables: 1, latest_indexes: 7 })
      expect((await server.call('DELETE', `/api/v1/databases/${db}`, { token: account.token })).status).toBe(204)
      expect(await counts()).toEqual({ table_stats: 0, index_stats: 0, latest_tables: 0, latest_indexes: 0 })
    })

    // Last: it moves the server's clock past every access token issued so far.
    test('WebSocket /active/ws: the stream ends with 1008 once its access token expires', async () => {
      const fresh = await signup(server)
      const mine = (
        await server.call('POST', '/api/v1/databases', {
          token: fresh.token,
          body: { name: 'mine', engine: 'postgres', host: 'h' },
        })
      ).body.id
      const result = await new Promise<StreamResult>((resolve) => {
        const out: StreamResult = { messages: [] }
        const ws = new WebSocket(wsUrl(`/api/v1/databases/${mine}/active/ws?token=${fresh.token}&interval=1`))
        ws.onmessage = (e) => {
          out.messages.push({ at: Date.now(), data: JSON.parse(String(e.data)) })
          server.advance(16 * MINUTE) // past the 15-minute access token lifetime
          if (out.messages.length === 3) ws.close(1000) // the stream went on: fail fast
        }
        ws.onclose = (e) => resolve({ ...out, close: { code: e.code, reason: e.reason } })
      })
      expect(result.messages.map((m) => m.data)).toEqual([{ ts: null, active: [] }])
      expect(result.close).toEqual({ code: 1008, reason: 'invalid or expired access token' })
    })
  })
}
