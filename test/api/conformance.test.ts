// API conformance: one table of requests with bad input (limits, buckets, windows, sorts, booleans, ids
// in paths, malformed and unknown body fields) and of limits over their maximum, each with the exact
// answer, run against four servers: the app from source (createApp, test/support/server.ts) and the
// compiled `dist/dbm serve` (test/support/binary.ts), each on SQLite and on PostgreSQL. The source and
// the release binary must validate alike: a build that drops a check (as identifier minification did,
// scripts/build.ts) fails here. Every 400 is `{"error": ...}` naming the field; limits over their
// maximum are clamped to it, which the seeded lists (one row more than each maximum) show.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type {
  ActiveQuery,
  IndexStat,
  IngestBatch,
  LockEntry,
  MergeEntry,
  MutationEntry,
  PartStat,
  TableStat,
} from '../../src/shared/wire.ts'
import { resultLimits } from '../../src/server/limits.ts'
import { builtBinary } from '../support/binary.ts'
import { POSTGRES_INTERNALS_PATHS, chBatch, pgBatch } from '../support/batches.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { startServe, stopAllServers } from '../support/process.ts'
import { type StoreKind, startTestServer, verifyCall } from '../support/server.ts'

/** A running server under test: where it listens and the link of the last mail it logged to an address. */
interface Target {
  base: string
  mailLink(to: string): string | undefined
  stop(): Promise<void>
}

async function sourceTarget(kind: StoreKind): Promise<Target> {
  const server = await startTestServer(kind, { ingestWriter: true })
  return { base: server.base, mailLink: (to) => server.mailLink(to, /verify/i), stop: () => server.stop() }
}

async function binaryTarget(kind: StoreKind): Promise<Target> {
  const [binary, databaseUrl] = await Promise.all([
    builtBinary(),
    kind === 'postgres' ? sharedPostgres().then((pg) => pg.freshDatabase()) : undefined,
  ])
  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-conformance-'))
  const server = await startServe([binary], { dataDir, extraArgs: databaseUrl ? ['--database-url', databaseUrl] : [] })
  return {
    base: server.base,
    // Without an SMTP relay the binary logs each mail as one line: `INFO mail to=<address> subject=... link="<url>"`.
    mailLink: (to) =>
      server
        .stderr()
        .split('\n')
        .findLast((line) => line.includes(' INFO mail ') && line.includes(` to=${to} `))
        ?.match(/ link="?([^"\s]+)"?/)?.[1],
    async stop() {
      await server.stop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

interface Answer {
  status: number
  body: any
}

async function send(
  base: string,
  method: string,
  path: string,
  auth: Record<string, string>,
  payload?: { json?: unknown; raw?: string },
): Promise<Answer> {
  const headers: Record<string, string> = { ...auth }
  if (payload) headers['content-type'] = 'application/json'
  const res = await fetch(base + path, {
    method,
    headers,
    body: payload?.raw ?? (payload ? JSON.stringify(payload.json) : undefined),
  })
  const text = await res.text()
  let body: unknown = text
  try {
    body = text ? JSON.parse(text) : null
  } catch {}
  return { status: res.status, body }
}

// ---- the seeded data: one row more than each list's maximum ----

const now = Date.now()
const over = (endpoint: keyof typeof resultLimits) => resultLimits[endpoint].max + 1

const counters = {
  seq_scan: 0,
  seq_tup_read: 0,
  idx_scan: 0,
  idx_tup_fetch: 0,
  n_tup_ins: 0,
  n_tup_upd: 0,
  n_tup_del: 0,
  n_tup_hot_upd: 0,
}
const table = (i: number): TableStat => ({
  schema_name: 'public',
  table_name: `t${i}`,
  ...counters,
  n_live_tup: i,
  n_dead_tup: 0,
  last_vacuum: null,
  last_autovacuum: null,
  last_analyze: null,
  last_autoanalyze: null,
  table_size_bytes: 8192 * (i + 1),
  index_size_bytes: 0,
  has_primary_key: true,
  delta: null,
})
/** Unused (no scans, neither unique nor primary, over 1 MB), so /indexes/unused lists them too. */
const index = (i: number): IndexStat => ({
  schema_name: 'public',
  table_name: 't0',
  index_name: `i${i}`,
  idx_scan: 0,
  idx_tup_read: 0,
  idx_tup_fetch: 0,
  size_bytes: 2_000_000 + i,
  index_def: `CREATE INDEX i${i} ON public.t0 USING btree (c${i})`,
  is_unique: false,
  is_primary: false,
  is_valid: true,
  delta: null,
})
const session = (i: number): ActiveQuery => ({
  pid: 1000 + i,
  query_text: `SELECT ${i}`,
  state: 'active',
  wait_event_type: null,
  wait_event: null,
  duration_ms: i,
  blocking_pids: [],
})
const lock = (i: number): LockEntry => ({
  pid: 2000 + i,
  lock_type: 'relation',
  mode: 'RowExclusiveLock',
  relation_name: 'public.t0',
  granted: true,
  blocked_by_pid: null,
  duration_ms: i,
  query_text: `UPDATE t0 SET c = ${i}`,
})
const statement = (i: number) => ({
  query_hash: `q${i}`,
  query_text: `SELECT ${i}`,
  calls: 1,
  total_time_ms: i + 1,
  rows: 1,
  shared_blks_hit: 0,
  shared_blks_read: 0,
})
const part = (i: number): PartStat => ({
  database: 'events',
  table: 'hits',
  partition_id: `p${i}`,
  active_parts: 1 + (i % 7),
  rows: i,
  bytes_on_disk: i,
})
const merge = (i: number): MergeEntry => ({
  database: 'events',
  table: 'hits',
  elapsed_s: i,
  progress: 0.5,
  num_parts: 2,
  total_size_bytes_compressed: 1,
  result_part_name: `all_${i}_${i}_1`,
  is_mutation: false,
})
const mutation = (i: number): MutationEntry => ({
  database: 'events',
  table: 'hits',
  mutation_id: `m${i}`,
  command: 'DELETE WHERE 1',
  create_time: now - 60_000,
  is_done: false,
  parts_to_do: 1,
  latest_fail_reason: '',
  latest_fail_time: null,
  stuck: false,
})
const rowsOf = <T>(n: number, make: (i: number) => T) => Array.from({ length: n }, (_, i) => make(i))

const seedBatches: IngestBatch[] = [
  pgBatch('pg', now - 60_000, {
    query_stats: rowsOf(over('queries'), statement),
    tables: rowsOf(over('tables'), table),
    indexes: rowsOf(over('indexes'), index),
    activity: rowsOf(over('active'), session),
    locks: rowsOf(over('locks'), lock),
  }),
  chBatch('ch', now - 60_000, {
    parts: rowsOf(over('parts'), part),
    merges: rowsOf(over('merges'), merge),
    mutations: rowsOf(over('mutations'), mutation),
  }),
]

// ---- the table ----

/**
 * One request and its exact answer. `{pg}` and `{ch}` in the path stand for the seeded databases' ids.
 * The answer is compared as `{status, body}`, or as `{status, rows}` (the length of the list, or of the
 * body's field `list`) for limits over their maximum, or `{status, port}` for a created database.
 */
interface Case {
  method?: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'
  path: string
  json?: unknown
  raw?: string
  want: { status: number; body?: unknown; rows?: number; port?: unknown }
  list?: string
}

const error = (message: string) => ({ status: 400, body: { error: message } })
const limitError = (endpoint: keyof typeof resultLimits) =>
  error(`limit must be a whole number from 1 (at most ${resultLimits[endpoint].max} are returned)`)

const UNKNOWN_ID = '00000000-0000-7000-8000-000000000000'
const WINDOW_BACKWARDS = 'since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z'

/** Each list with a limit: the path (on a database with one row more than the maximum), the list's field, the endpoint. */
const limitedLists: [path: string, list: string | undefined, endpoint: keyof typeof resultLimits, seeded: boolean][] = [
  ['/api/v1/databases/{pg}/queries', undefined, 'queries', true],
  ['/api/v1/databases/{pg}/queries/q1/explain', undefined, 'explain', false],
  ['/api/v1/databases/{pg}/active', undefined, 'active', true],
  ['/api/v1/databases/{pg}/locks', undefined, 'locks', true],
  ['/api/v1/databases/{pg}/tables', undefined, 'tables', true],
  ['/api/v1/databases/{pg}/indexes', undefined, 'indexes', true],
  ['/api/v1/databases/{pg}/indexes/unused', undefined, 'indexes', true],
  ['/api/v1/databases/{ch}/parts', 'partitions', 'parts', true],
  ['/api/v1/databases/{ch}/merges', 'merges', 'merges', true],
  ['/api/v1/databases/{ch}/mutations', 'mutations', 'mutations', true],
  ['/api/v1/databases/{pg}/recommendations', undefined, 'recommendations', false],
  ['/api/v1/databases/{pg}/alerts', undefined, 'alerts', false],
]

const limitCases: Case[] = limitedLists.flatMap(([path, list, endpoint, seeded]) => {
  const max = resultLimits[endpoint].max
  const cases: Case[] = ['-1', '0', '000', '1.5', 'ten', '', '+5', '1e2', '0x10', `${max}.0001`, '1'.repeat(21)].map(
    (limit) => ({
      path: `${path}?limit=${limit}`,
      want: limitError(endpoint),
    }),
  )
  if (seeded) {
    // Over the maximum, however far: clamped to it; a valid limit is taken as given.
    for (const limit of [max + 1, `0${max}`, '9'.repeat(20)])
      cases.push({ path: `${path}?limit=${limit}`, list, want: { status: 200, rows: max } })
    cases.push({ path: `${path}?limit=2`, list, want: { status: 200, rows: 2 } })
  }
  return cases
})

const BUCKET_ERROR = 'bucket must be a whole number of seconds, at least 60'
const seriesPaths = [
  '/api/v1/databases/{pg}/waits',
  '/api/v1/databases/{pg}/replication/history',
  '/api/v1/databases/{pg}/replication/slots/history',
  '/api/v1/databases/{pg}/bgwriter',
  '/api/v1/databases/{pg}/wal-stats/timeseries',
  '/api/v1/databases/{pg}/io-stats/timeseries',
  '/api/v1/databases/{pg}/database-stats/timeseries',
  '/api/v1/databases/{ch}/parts/timeseries',
  '/api/v1/databases/{ch}/server-metrics',
]
const seriesCases: Case[] = seriesPaths.flatMap((path) => [
  ...['-60', '0', '30', '59', 'minute', '90.5', '', '-0', '0x3c', '6e1', '9'.repeat(21)].map((bucket) => ({
    path: `${path}?bucket=${bucket}`,
    want: error(BUCKET_ERROR),
  })),
  {
    path: `${path}?bucket=90`,
    want: error('bucket must be a multiple of 60 seconds (the data are kept per minute): use 60 or 120'),
  },
  // Over the maximum (31 days): clamped.
  { path: `${path}?bucket=${'9'.repeat(20)}`, want: { status: 200 } },
  { path: `${path}?bucket=0120`, want: { status: 200 } },
  { path: `${path}?${WINDOW_BACKWARDS}`, want: error('since must be before until') },
  { path: `${path}?since=yesterday`, want: error('since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z') },
])

const windowPaths = [
  '/api/v1/databases/{pg}/queries',
  '/api/v1/databases/{pg}/queries/q1',
  '/api/v1/databases/{pg}/queries/q1/explain',
  '/api/v1/databases/{pg}/tables/public/t1',
  '/api/v1/databases/{pg}/indexes/public/i1',
]
const windowCases: Case[] = windowPaths.flatMap((path) => [
  { path: `${path}?${WINDOW_BACKWARDS}`, want: error('since must be before until') },
  {
    path: `${path}?until=2026-13-45T00:00:00Z`,
    want: error('until must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z'),
  },
  { path: `${path}?since=${'9'.repeat(65)}`, want: error('since must be an RFC 3339 timestamp') },
])

const choiceCases: Case[] = [
  {
    path: '/api/v1/databases/{pg}/queries?sort_by=speed',
    want: error('sort_by must be one of: total_time, calls, mean_time, rows, io_time'),
  },
  {
    path: '/api/v1/databases/{pg}/tables?sort_by=rows',
    want: error(
      'sort_by must be one of: size, dead_tuples, seq_scans, live_tuples, index_size, heap_size, toast_size, total_size',
    ),
  },
  {
    path: '/api/v1/databases/{pg}/indexes?sort_by=dead_tuples',
    want: error('sort_by must be one of: size, scans, tuples_read'),
  },
  {
    path: '/api/v1/databases/{pg}/indexes/unused?sort_by=',
    want: error('sort_by must be one of: size, scans, tuples_read'),
  },
  {
    path: '/api/v1/databases/{ch}/parts?sort_by=size',
    want: error('sort_by must be one of: active_parts, bytes_on_disk, rows'),
  },
  { path: '/api/v1/databases/{pg}/alerts?status=closed', want: error('status must be one of: open, resolved, all') },
  { path: '/api/v1/databases/{pg}/recommendations?status=', want: error('status must be one of: open, resolved, all') },
  { path: '/api/v1/databases/{ch}/mutations?stuck=maybe', want: error('stuck must be true or false') },
  { path: '/api/v1/databases/{ch}/mutations?include_done=2', want: error('include_done must be true or false') },
  { path: '/api/v1/api-keys?include_revoked=yes', want: error('include_revoked must be true or false') },
  // Unknown query parameters (cache busters) are ignored.
  { path: '/api/v1/databases/{pg}/tables?limit=3&_=12345', want: { status: 200, rows: 3 } },
  // The other engine's endpoints.
  {
    path: '/api/v1/databases/{ch}/tables',
    want: error('this endpoint serves postgres databases; "ch" is a clickhouse database'),
  },
  {
    path: '/api/v1/databases/{pg}/parts',
    want: error('this endpoint serves clickhouse databases; "pg" is a postgres database'),
  },
]

const databasePaths = [
  '',
  '/health',
  '/overview',
  '/doctor',
  '/queries',
  '/queries/q1',
  '/queries/q1/explain',
  '/active',
  '/locks',
  '/waits',
  '/tables',
  '/tables/public/t1',
  '/indexes',
  '/indexes/unused',
  '/indexes/public/i1',
  ...POSTGRES_INTERNALS_PATHS,
  '/parts',
  '/parts/timeseries',
  '/merges',
  '/mutations',
  '/server-metrics',
  '/recommendations',
  '/alerts',
]
const NOT_A_DATABASE_ID = error('id must be a database id (a UUID)')
const idCases: Case[] = [
  ...databasePaths.flatMap((path) => [
    { path: `/api/v1/databases/not-an-id${path}`, want: NOT_A_DATABASE_ID },
    { path: `/api/v1/databases/${UNKNOWN_ID}${path}`, want: { status: 404, body: { error: 'database not found' } } },
  ]),
  { path: `/api/v1/databases/${UNKNOWN_ID.slice(0, -1)}`, want: NOT_A_DATABASE_ID },
  { path: `/api/v1/databases/${UNKNOWN_ID}x`, want: NOT_A_DATABASE_ID },
  { method: 'PATCH', path: '/api/v1/databases/1', json: { port: 1 }, want: NOT_A_DATABASE_ID },
  { method: 'DELETE', path: "/api/v1/databases/1'%20OR%20'1'='1", want: NOT_A_DATABASE_ID },
  {
    method: 'DELETE',
    path: `/api/v1/databases/${UNKNOWN_ID}`,
    want: { status: 404, body: { error: 'database not found' } },
  },
  { method: 'DELETE', path: '/api/v1/api-keys/nope', want: error('id must be an API key id (a UUID)') },
  {
    method: 'DELETE',
    path: `/api/v1/api-keys/${UNKNOWN_ID}`,
    want: { status: 404, body: { error: 'API key not found' } },
  },
]

const NOT_JSON = error('request body must be valid JSON')
const NOT_AN_OBJECT = error('request body must be a JSON object')
const PORT_ERROR = error('port must be an integer from 1 to 65535')
const newDatabase = { name: 'new', engine: 'postgres', host: 'db.internal' }
const bodyCases: Case[] = [
  ...(
    [
      'POST /api/v1/databases',
      'PATCH /api/v1/databases/{pg}',
      'POST /api/v1/api-keys',
      'PUT /api/v1/organization/webhook',
      'POST /api/v1/ingest',
    ] as const
  ).flatMap((route) => {
    const [method, path] = route.split(' ') as [Case['method'], string]
    return [
      { method, path, raw: '{"name": "x",', want: NOT_JSON },
      { method, path, raw: "{'name': 'x'}", want: NOT_JSON },
      { method, path, raw: '[{"name": "x"}]', want: NOT_AN_OBJECT },
      { method, path, raw: '"x"', want: NOT_AN_OBJECT },
    ]
  }),
  {
    method: 'POST',
    path: '/api/v1/databases',
    json: { ...newDatabase, colour: 'red' },
    want: error('unknown field: colour'),
  },
  {
    method: 'POST',
    path: '/api/v1/databases',
    json: { ...newDatabase, engine: 'mysql' },
    want: error('engine must be one of: postgres, clickhouse'),
  },
  {
    method: 'POST',
    path: '/api/v1/databases',
    json: { ...newDatabase, name: ' ' },
    want: error('name is required and must be a non-empty string of at most 200 characters'),
  },
  {
    method: 'POST',
    path: '/api/v1/databases',
    json: { engine: 'postgres', host: 'h' },
    want: error('name is required and must be a non-empty string of at most 200 characters'),
  },
  ...[0, -1, 65536, 1.5, 1e300, '0', '-5432', '65536', '5432.5', 'http', '', null, true].map((port) => ({
    method: 'POST' as const,
    path: '/api/v1/databases',
    json: { ...newDatabase, port },
    want: PORT_ERROR,
  })),
  {
    method: 'POST',
    path: '/api/v1/databases',
    json: { ...newDatabase, tags: { env: 1 } },
    want: error('invalid tags.env: Expected string'),
  },
  // A whole number in a string is taken as the number.
  {
    method: 'POST',
    path: '/api/v1/databases',
    json: { ...newDatabase, name: 'string-port', port: '5433' },
    want: { status: 201, port: 5433 },
  },
  { method: 'PATCH', path: '/api/v1/databases/{pg}', json: { colour: 'red' }, want: error('unknown field: colour') },
  ...[0, -10, 86401, 2.5, '0', '86401', 'ten'].map((value) => ({
    method: 'PATCH' as const,
    path: '/api/v1/databases/{pg}',
    json: { poll_interval_seconds: value },
    want: error('poll_interval_seconds must be an integer from 1 to 86400'),
  })),
  { method: 'PATCH', path: '/api/v1/databases/{pg}', json: { port: '0' }, want: PORT_ERROR },
  {
    method: 'PATCH',
    path: '/api/v1/databases/{pg}',
    json: { collect_explain_plans: 'yes' },
    want: error('collect_explain_plans must be true or false'),
  },
  {
    method: 'PATCH',
    path: '/api/v1/databases/{pg}',
    json: { disabled_collectors: ['nope'] },
    want: error(
      'disabled_collectors: unknown postgres collector "nope" (known: query_stats, explain_plans, activity, locks, waits, tables, indexes, replication, bgwriter, wal_stats, io_stats, database_stats, constraints, bloat, connections, progress, column_stats, archiver, backups, triggers, wal_dir, security, host, log_events, custom_metrics)',
    ),
  },
  {
    method: 'POST',
    path: '/api/v1/api-keys',
    json: {},
    want: error('name is required and must be a non-empty string of at most 200 characters'),
  },
  { method: 'POST', path: '/api/v1/api-keys', json: { name: 'k', scope: 'all' }, want: error('unknown field: scope') },
  {
    method: 'PUT',
    path: '/api/v1/organization/webhook',
    json: { url: 5 },
    want: error('url is required and must be a non-empty string of at most 2048 characters'),
  },
  {
    method: 'PUT',
    path: '/api/v1/organization/webhook',
    json: { url: 'https://hooks.example.com/x', events: [] },
    want: error('unknown field: events'),
  },
]

/** A body as a failure shows it: an error in full, anything else by its shape (a list of 500 rows would bury the diff). */
function summary(body: unknown): unknown {
  if (Array.isArray(body)) return `a list of ${body.length}`
  if (body && typeof body === 'object' && !('error' in body)) return `an object with ${Object.keys(body).join(', ')}`
  return body
}

/** A case as it reads in a failure: method, path and body. */
const label = (c: Case) =>
  `${c.method ?? 'GET'} ${c.path}${c.raw !== undefined ? ` ${c.raw}` : c.json !== undefined ? ` ${JSON.stringify(c.json)}` : ''}`

const cases: Case[] = [...limitCases, ...seriesCases, ...windowCases, ...choiceCases, ...idCases, ...bodyCases]

// ---- the run ----

const targets: [name: string, start: () => Promise<Target>][] = [
  ['source, SQLite', () => sourceTarget('sqlite')],
  ['source, PostgreSQL', () => sourceTarget('postgres')],
  ['dist/dbm, SQLite', () => binaryTarget('sqlite')],
  ['dist/dbm, PostgreSQL', () => binaryTarget('postgres')],
]

afterAll(async () => {
  await stopAllServers()
})

/** GET /api/v1/openapi.json as the source answers it: each binary must answer the same document. */
let sourceDocument: any

for (const [name, start] of targets) {
  describe(`API conformance: ${name}`, () => {
    let target: Target | undefined
    let auth: Record<string, string> = {}
    const ids: Record<string, string> = {}

    beforeAll(async () => {
      target = await start()
      const email = `conformance-${crypto.randomUUID()}@example.com`
      const signup = await send(
        target.base,
        'POST',
        '/api/v1/auth/signup',
        {},
        {
          json: { email, password: 'correct horse battery', name: 'Conformance', org_name: 'Conformance' },
        },
      )
      if (signup.status !== 201) throw new Error(`signup: ${signup.status} ${JSON.stringify(signup.body)}`)
      const token = { authorization: `Bearer ${signup.body.access_token}` }
      const link = target.mailLink(email)
      if (!link) throw new Error('no verification mail was logged')
      const verified = await send(target.base, 'GET', verifyCall(link), {})
      if (verified.status !== 200) throw new Error(`verify: ${verified.status} ${JSON.stringify(verified.body)}`)
      // Every scope: the table calls the admin routes too (registering, changing databases, the webhook).
      const key = await send(target.base, 'POST', '/api/v1/api-keys', token, {
        json: { name: 'conformance', scopes: ['ingest', 'read', 'admin'] },
      })
      auth = { 'x-api-key': key.body.key }
      for (const batch of seedBatches) {
        const res = await send(target.base, 'POST', '/api/v1/ingest', auth, { json: batch })
        if (res.status !== 200) throw new Error(`ingest: ${res.status} ${JSON.stringify(res.body)}`)
        ids[batch.database.engine === 'postgres' ? 'pg' : 'ch'] = res.body.database_id
      }
    }, 60_000)

    afterAll(async () => {
      await target?.stop()
    })

    test(`${cases.length} requests answer exactly as the table says`, async () => {
      // Only the cases answered otherwise are listed, each with what it got and what the table says.
      const wrong: { request: string; got: Record<string, unknown>; want: Case['want'] }[] = []
      for (const c of cases) {
        const path = c.path.replace('{pg}', ids.pg!).replace('{ch}', ids.ch!)
        const res = await send(
          target!.base,
          c.method ?? 'GET',
          path,
          auth,
          c.raw !== undefined ? { raw: c.raw } : c.json !== undefined ? { json: c.json } : undefined,
        )
        const got: Record<string, unknown> = { status: res.status }
        if ('body' in c.want || res.status !== c.want.status) got.body = summary(res.body)
        if ('rows' in c.want) {
          const list = c.list ? res.body?.[c.list] : res.body
          got.rows = Array.isArray(list) ? list.length : list
        }
        if ('port' in c.want) got.port = res.body?.port
        if (!Bun.deepEquals(got, c.want)) wrong.push({ request: label(c), got, want: c.want })
      }
      expect(wrong).toEqual([])
    }, 60_000)

    test("GET /api/v1/openapi.json is the source's document; a route checked against its response schema answers in full", async () => {
      const res = await send(target!.base, 'GET', '/api/v1/openapi.json', {})
      expect(res.status).toBe(200)
      if (name.startsWith('source')) sourceDocument ??= res.body
      expect(sourceDocument).toBeDefined()
      expect(res.body).toEqual(sourceDocument)
      // Elysia checks this answer against the Database schema: every field the document names, no other.
      const db = await send(target!.base, 'GET', `/api/v1/databases/${ids.pg}`, auth)
      expect(db.status).toBe(200)
      expect(Object.keys(db.body).sort()).toEqual(
        Object.keys(sourceDocument.components.schemas.Database.properties).sort(),
      )
      expect(db.body).toMatchObject({ id: ids.pg, engine: 'postgres', status: 'connected' })
    })
  })
}
