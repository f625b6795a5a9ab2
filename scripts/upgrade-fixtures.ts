// Regenerates test/fixtures/upgrade/: stores written by the previous release (v0.1.0) and the batches
// agents send, for test/upgrade/. The real previous build does the writing: the tag is checked out into a
// temporary folder (git archive, this checkout's node_modules linked: the lockfile is unchanged since),
// built with its own scripts/build.ts, and its `dbm serve` (SQLite, then a PostgreSQL store) and
// `dbm agent` run against a real PostgreSQL 17 holding statements run a known number of times. Then:
//   sqlite.db.gz             the SQLite store as v0.1.0 left it (VACUUM INTO, one file)
//   postgres.sql.gz          the PostgreSQL store, `pg_dump --inserts` (Debian's pg_dump 15: the embedded
//                            packages ship no pg_dump, so the store lives on an embedded PostgreSQL 14)
//   <kind>/jwt-secret        the data dir's generated secret
//   expected.json            accounts, keys (in full), the marker statements' calls, and what the v0.1.0
//                            API answered for every read the test repeats on the current server
//   batches-v0.1.0.json      the batches v0.1.0's agent posted (recorded by a proxy), with their answers
//   batches-current.json     the batches this checkout's agent posts to this checkout's server
//   wire-v0.1.0-paths.json   every field path of v0.1.0's ingest schema (the v1 wire contract)
// Usage: bun scripts/upgrade-fixtures.ts [--tag v0.1.0]
import { Database } from 'bun:sqlite'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { schemaPaths } from '../src/shared/wire-contract.ts'
import { startPostgres, statementsDatabase, freePort, type PostgresServer } from '../test/support/postgres.ts'
import { type ServeProcess, request, startServe } from '../test/support/process.ts'
import { until } from '../test/support/wait.ts'

const repo = join(import.meta.dir, '..')
const out = join(repo, 'test', 'fixtures', 'upgrade')
const tag = process.argv.includes('--tag') ? process.argv[process.argv.indexOf('--tag') + 1]! : 'v0.1.0'
const work = mkdtempSync(join(tmpdir(), 'dbm-upgrade-fixtures-'))
mkdirSync(out, { recursive: true })

/** Marker statements and how often each runs while v0.1.0's agent watches. */
export const MARKERS = [
  { text: 'SELECT id FROM t WHERE id = $1 /* upgrade-marker-a */', runs: 37 },
  { text: 'SELECT count(*) FROM t WHERE id < $1 /* upgrade-marker-b */', runs: 12 },
] as const

function sh(cmd: string[], cwd = repo): string {
  const r = Bun.spawnSync(cmd, { cwd, stdout: 'pipe', stderr: 'pipe' })
  if (r.exitCode !== 0) throw new Error(`${cmd.join(' ')} failed (${r.exitCode}):\n${r.stdout}${r.stderr}`)
  return r.stdout.toString()
}

/** The previous release's binary, built from the tag: the path of its dbm. */
export function buildRelease(at: string, into: string): string {
  mkdirSync(into, { recursive: true })
  sh(['sh', '-c', `git archive ${at} | tar -x -C ${into}`])
  symlinkSync(join(repo, 'node_modules'), join(into, 'node_modules'))
  sh(['bun', 'scripts/build.ts'], into)
  return join(into, 'dist', 'dbm')
}

/** Forwards every request to `target` and records each ingest request and its answer. */
function recordingProxy(target: () => string) {
  const batches: { body: unknown; status: number; answer: unknown }[] = []
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const url = new URL(req.url)
      const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : await req.text()
      const res = await fetch(target() + url.pathname + url.search, { method: req.method, headers: req.headers, body })
      const text = await res.text()
      if (url.pathname === '/api/v1/ingest' && body !== undefined) {
        batches.push({ body: JSON.parse(body), status: res.status, answer: text ? JSON.parse(text) : null })
      }
      return new Response(text, {
        status: res.status,
        headers: { 'content-type': res.headers.get('content-type') ?? 'application/json' },
      })
    },
  })
  return { base: `http://127.0.0.1:${server.port}`, batches, stop: () => server.stop(true) }
}

async function agentHealth(port: number): Promise<any> {
  return fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.json())
}

/** Runs `dbm agent` (command) against `endpoint` for `dsn` until `done` resolves. */
async function withAgent<T>(
  command: string[],
  endpoint: string,
  key: string,
  dsn: string,
  dir: string,
  body: (healthPort: number) => Promise<T>,
): Promise<T> {
  const healthPort = await freePort()
  const config = join(dir, 'agent.yaml')
  writeFileSync(
    config,
    `api:\n  endpoint: ${endpoint}\n  key: ${key}\nhealth:\n  listen_addr: 127.0.0.1:${healthPort}\ndatabases:\n  - name: app\n    dsn: ${dsn}\n    poll_interval: 1s\n`,
  )
  const agent = Bun.spawn([...command, 'agent', '--config', config, '--buffer-dir', dir], {
    cwd: repo,
    stdout: 'ignore',
    stderr: 'pipe',
    env: { PATH: process.env.PATH ?? '' },
  })
  try {
    await until(
      'the agent to connect',
      async () =>
        (await agentHealth(healthPort).catch(() => undefined))?.databases?.[0]?.collectors?.query_stats?.startsWith(
          'ok',
        )
          ? true
          : undefined,
      { timeoutMs: 30_000 },
    )
    return await body(healthPort)
  } finally {
    agent.kill('SIGTERM')
    await agent.exited
  }
}

async function runMarkers(dsn: string) {
  const sql = postgres(dsn, { max: 1, onnotice: () => {} })
  try {
    for (const m of MARKERS) for (let i = 0; i < m.runs; i++) await sql.unsafe(m.text, [i + 1])
  } finally {
    await sql.end()
  }
}

/** Makes a database the doctor has things to say about: a table without a primary key, an unused index. */
async function shapeDatabase(dsn: string) {
  const sql = postgres(dsn, { max: 1, onnotice: () => {} })
  try {
    await sql`CREATE TABLE audit (at timestamptz, what text)`
    await sql`INSERT INTO audit SELECT now(), 'x' || g FROM generate_series(1, 200) g`
    await sql`CREATE INDEX t_unused ON t ((id * 2))`
  } finally {
    await sql.end()
  }
}

/** The statement row of a marker in a GET /queries answer (its comment tells it apart). */
export function findMarker(rows: any, text: string): any {
  const tagOf = text.slice(text.indexOf('/*'))
  return (Array.isArray(rows) ? rows : []).find((s) => String(s.query_text).includes(tagOf))
}

const verifyLink = (log: string) => /link="[^"]*#\/verify\?token=([A-Za-z0-9_-]+)"/.exec(log)?.[1]

/** The reads the upgrade test repeats, with the database's id and the window of the run. */
export function reads(dbId: string, hashes: string[], since: string, until: string): string[] {
  const w = `since=${encodeURIComponent(since)}&until=${encodeURIComponent(until)}`
  const db = `/api/v1/databases/${dbId}`
  return [
    '/api/v1/auth/me',
    '/api/v1/api-keys',
    '/api/v1/organization/members',
    '/api/v1/databases',
    db,
    `${db}/queries?${w}&limit=500`,
    ...hashes.map((h) => `${db}/queries/${h}?${w}`),
    ...hashes.map((h) => `${db}/queries/${h}/explain`),
    `${db}/tables?${w}`,
    `${db}/indexes?${w}`,
    `${db}/database-stats?${w}`,
    `${db}/alerts?status=all`,
    `${db}/recommendations?status=all`,
    `${db}/events?${w}&limit=500`,
  ]
}

async function generate(
  kind: 'sqlite' | 'postgres',
  binary: string,
  monitored: PostgresServer,
  storeServer: PostgresServer,
) {
  const dir = join(work, kind)
  const dataDir = join(dir, 'data')
  mkdirSync(dataDir, { recursive: true })
  const storeUrl = kind === 'postgres' ? await storeServer.freshDatabase() : undefined
  const env: Record<string, string> = storeUrl ? { DBM_DATABASE_URL: storeUrl } : {}
  const serve: ServeProcess = await startServe([binary], { dataDir, env })
  const proxy = recordingProxy(() => serve.base)
  const owner = {
    email: `owner-${kind}@example.com`,
    password: 'upgrade correct horse battery',
    name: 'Olga Owner',
    org_name: `Upgrade ${kind}`,
  }
  const signup = await request(serve.base, 'POST', '/api/v1/auth/signup', { body: owner })
  if (signup.status !== 201) throw new Error(`signup: ${signup.status} ${JSON.stringify(signup.body)}`)
  const token = await until('the verification mail', async () => verifyLink(serve.stderr()))
  const verified = await request(serve.base, 'GET', `/api/v1/auth/verify-email?token=${token}`)
  if (verified.status !== 200) throw new Error(`verify: ${verified.status}`)
  const login = await request(serve.base, 'POST', '/api/v1/auth/login', {
    body: { email: owner.email, password: owner.password },
  })
  const access = login.body.access_token as string
  const key = async (name: string, scopes: string[]) =>
    (await request(serve.base, 'POST', '/api/v1/api-keys', { token: access, body: { name, scopes } })).body
  const agentKey = await key('agent', ['ingest'])
  const readKey = await key('reader', ['read'])
  const revoked = await key('revoked', ['read'])
  await request(serve.base, 'DELETE', `/api/v1/api-keys/${revoked.id}`, { token: access })

  const dsn = await statementsDatabase(monitored)
  await shapeDatabase(dsn)
  const since = new Date(Date.now() - 60_000).toISOString()
  const agentDir = join(dir, 'agent')
  mkdirSync(agentDir)
  const dbId = await withAgent([binary], proxy.base, agentKey.key, dsn, agentDir, async () => {
    const id = await until(
      'the database to register',
      async () =>
        (await request(serve.base, 'GET', '/api/v1/databases', { token: access })).body.find(
          (d: any) => d.name === 'app',
        )?.id as string | undefined,
    )
    await runMarkers(dsn)
    const wanted = MARKERS.map((m) => m.runs)
    await until(
      'the marker calls to arrive',
      async () => {
        const q = await request(
          serve.base,
          'GET',
          `/api/v1/databases/${id}/queries?limit=500&since=${encodeURIComponent(since)}`,
          { token: access },
        )
        const calls = MARKERS.map((m) => findMarker(q.body, m.text)?.total_calls)
        return calls.every((c, i) => c === wanted[i]) ? true : undefined
      },
      { timeoutMs: 60_000 },
    )
    // Two more cycles after the markers: history beyond the statements.
    const count = proxy.batches.length
    await until('two more batches', async () => (proxy.batches.length >= count + 2 ? true : undefined), {
      timeoutMs: 30_000,
    })
    return id
  })
  const untilAt = new Date(Date.now() + 60_000).toISOString()
  const queries = await request(
    serve.base,
    'GET',
    `/api/v1/databases/${dbId}/queries?limit=500&since=${encodeURIComponent(since)}&until=${encodeURIComponent(untilAt)}`,
    { token: access },
  )
  const markers = MARKERS.map((m) => {
    const row = findMarker(queries.body, m.text)
    return { text: m.text, runs: m.runs, query_hash: row.query_hash as string, total_calls: row.total_calls as number }
  })
  const answers: Record<string, { status: number; body: unknown }> = {}
  for (const path of reads(
    dbId,
    markers.map((m) => m.query_hash),
    since,
    untilAt,
  )) {
    answers[path] = await request(serve.base, 'GET', path, { token: access })
  }
  // A session made before the upgrade: its refresh token and (decoded) access claims.
  const session = await request(serve.base, 'POST', '/api/v1/auth/login', {
    body: { email: owner.email, password: owner.password },
  })
  await serve.stop()
  proxy.stop()

  const kindOut = join(out, kind)
  mkdirSync(kindOut, { recursive: true })
  writeFileSync(join(kindOut, 'jwt-secret'), readFileSync(join(dataDir, 'jwt-secret')))
  if (kind === 'sqlite') {
    const copy = join(dir, 'store.db')
    const db = new Database(join(dataDir, 'dbm.sqlite'))
    db.exec(`VACUUM INTO '${copy}'`)
    db.close()
    writeFileSync(join(out, 'sqlite.db.gz'), Bun.gzipSync(new Uint8Array(readFileSync(copy)), { level: 9 }))
  }
  if (kind === 'postgres') {
    const url = new URL(storeUrl!)
    const r = Bun.spawnSync(
      [
        'pg_dump',
        '--inserts',
        '--no-owner',
        '--no-privileges',
        '-h',
        url.hostname,
        '-p',
        url.port,
        '-U',
        url.username,
        url.pathname.slice(1),
      ],
      {
        env: { ...process.env, PGPASSWORD: decodeURIComponent(url.password) },
        stdout: 'pipe',
        stderr: 'pipe',
      },
    )
    if (r.exitCode !== 0) throw new Error(`pg_dump: ${r.stderr}`)
    writeFileSync(join(out, 'postgres.sql.gz'), Bun.gzipSync(new Uint8Array(r.stdout), { level: 9 }))
  }
  const claims = JSON.parse(Buffer.from(String(session.body.access_token).split('.')[1]!, 'base64url').toString())
  return {
    owner: { email: owner.email, password: owner.password },
    org_id: signup.body.organization.id,
    user_id: signup.body.user.id,
    database_id: dbId,
    keys: { agent: agentKey.key, reader: readKey.key, revoked: revoked.key, revoked_id: revoked.id },
    session: { refresh_token: session.body.refresh_token, access_claims: claims },
    window: { since, until: untilAt },
    markers,
    answers,
    batches: proxy.batches,
  }
}

async function currentBatches(monitored: PostgresServer) {
  const dir = join(work, 'current')
  const dataDir = join(dir, 'data')
  mkdirSync(dataDir, { recursive: true })
  const cli = ['bun', join(repo, 'src', 'cli.ts')]
  const serve = await startServe(cli, { dataDir })
  const proxy = recordingProxy(() => serve.base)
  const signup = await request(serve.base, 'POST', '/api/v1/auth/signup', {
    body: { email: 'now@example.com', password: 'upgrade correct horse battery', name: 'N', org_name: 'Now' },
  })
  const key = (
    await request(serve.base, 'POST', '/api/v1/api-keys', {
      token: signup.body.access_token,
      body: { name: 'agent', scopes: ['ingest'] },
    })
  ).body.key
  const dsn = await statementsDatabase(monitored)
  const agentDir = join(dir, 'agent')
  mkdirSync(agentDir)
  await withAgent(cli, proxy.base, key, dsn, agentDir, async () => {
    await runMarkers(dsn)
    await until('four batches', async () => (proxy.batches.length >= 4 ? true : undefined), { timeoutMs: 30_000 })
  })
  await serve.stop()
  proxy.stop()
  return proxy.batches
}

const monitored = await startPostgres(17, ['-c', 'shared_preload_libraries=pg_stat_statements'])
const storeServer = await startPostgres(14)
try {
  const binary = buildRelease(tag, join(work, 'release'))
  const version = sh([binary, 'version']).split('\n')[0]
  const sqlite = await generate('sqlite', binary, monitored, storeServer)
  const pg = await generate('postgres', binary, monitored, storeServer)
  const { batches: sqliteBatches, ...sqliteExpected } = sqlite
  const { batches: pgBatches, ...pgExpected } = pg
  writeFileSync(
    join(out, 'batches-v0.1.0.json'),
    `${JSON.stringify({ release: version, batches: sqliteBatches }, null, 1)}\n`,
  )
  void pgBatches
  writeFileSync(
    join(out, 'expected.json'),
    `${JSON.stringify({ release: version, tag, generated_at: new Date().toISOString(), sqlite: sqliteExpected, postgres: pgExpected }, null, 1)}\n`,
  )
  const wire = await import(join(work, 'release', 'src', 'shared', 'wire.ts'))
  writeFileSync(join(out, 'wire-v0.1.0-paths.json'), `${JSON.stringify(schemaPaths(wire.IngestBatch), null, 1)}\n`)
  writeFileSync(
    join(out, 'batches-current.json'),
    `${JSON.stringify({ batches: await currentBatches(monitored) }, null, 1)}\n`,
  )
  console.log(`fixtures written to ${out} from ${version}`)
} finally {
  await monitored.stop()
  await storeServer.stop()
  rmSync(work, { recursive: true, force: true })
}
