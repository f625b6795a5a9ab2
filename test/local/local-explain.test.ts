// `dbm local` gives a laptop database its missing-index advice (issue 26): an application role owns the
// database and its `public` schema and runs a statement that scans a 20,000-row table for one customer;
// dbm local connects as the monitoring role the README's "PostgreSQL setup" makes (pg_monitor,
// pg_read_all_data). The plain agent would not explain that statement (its runner and everything it
// reads belong to a role it does not trust); dbm local trusts the database's owner, says so at start, so
// the plan is sampled at the first collection and the doctor's sequential-scans finding carries the
// CREATE INDEX on the filtered column. --explain-trusted-role is checked by its start line and by the
// check's note for a role that does not exist. One PostgreSQL 17 server, one run.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { Subprocess } from 'bun'
import { type PostgresServer, sharedPostgres } from '../support/postgres.ts'
import { cleanEnv, repoRoot } from '../support/process.ts'
import { until } from '../support/wait.ts'

const suffix = Math.random().toString(36).slice(2, 8)
const app = `app_${suffix}`
const monitor = `dbm_monitor_${suffix}`
const database = `shop_${suffix}`
const password = `pw-${crypto.randomUUID()}`
const home = mkdtempSync(join(tmpdir(), 'dbm-local-explain-'))
let pg: PostgresServer
let appSql: postgres.Sql
let proc: Subprocess<'ignore', 'pipe', 'pipe'> | undefined

/** The application's statement: one customer's orders, by a column no index covers. */
const ordersOf = (sql: postgres.Sql, customer: number) =>
  sql`SELECT id, amount FROM orders WHERE customer_id = ${customer}`

beforeAll(async () => {
  pg = await sharedPostgres(17)
  const admin = postgres(pg.url(), { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(`CREATE ROLE ${app} LOGIN PASSWORD '${password}'`)
    await admin.unsafe(`CREATE DATABASE ${database} OWNER ${app}`)
    // The README's monitoring role.
    await admin.unsafe(`CREATE ROLE ${monitor} LOGIN PASSWORD '${password}'`)
    await admin.unsafe(`GRANT pg_monitor TO ${monitor}`)
    await admin.unsafe(`GRANT pg_read_all_data TO ${monitor}`)
  } finally {
    await admin.end()
  }
  const url = new URL(pg.url())
  url.pathname = `/${database}`
  const dbAdmin = postgres(url.toString(), { max: 1, onnotice: () => {} })
  try {
    await dbAdmin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
    // The application role owns `public` outright, as after ALTER SCHEMA or on PostgreSQL 14 and older.
    await dbAdmin.unsafe(`ALTER SCHEMA public OWNER TO ${app}`)
  } finally {
    await dbAdmin.end()
  }
  url.username = app
  url.password = password
  appSql = postgres(url.toString(), { max: 1, onnotice: () => {} })
  await appSql`CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer_id int NOT NULL, amount int NOT NULL)`
  await appSql`INSERT INTO orders (customer_id, amount) SELECT i % 1000, i FROM generate_series(1, 20000) AS i`
  // ANALYZE once the insert's counts reached the statistics (flushed within a second on 15+): run before
  // that, its 20,000 live rows and the insert's 20,000 would add up to 40,000 in n_live_tup.
  const watcher = postgres(url.toString(), { max: 1, onnotice: () => {} })
  try {
    await until('the insert to be counted', async () => {
      const [row] = await watcher`SELECT n_tup_ins::int AS n FROM pg_stat_user_tables WHERE relname = 'orders'`
      return row?.n === 20000 ? true : undefined
    })
  } finally {
    await watcher.end()
  }
  await appSql`ANALYZE orders`
  // Run before the start, so that the first collection's sampling finds it among the costliest statements.
  for (let i = 0; i < 20; i++) await ordersOf(appSql, i)
}, 60_000)

afterAll(async () => {
  proc?.kill('SIGKILL')
  await appSql?.end()
  const admin = pg && postgres(pg.url(), { max: 1, onnotice: () => {} })
  if (admin) {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {})
    await admin.end()
  }
  rmSync(home, { recursive: true, force: true })
})

test("the database owner's statement is explained under dbm local with the README's monitoring role, and the doctor proposes its index", async () => {
  const dsn = `postgres://${monitor}@127.0.0.1:${pg.port}/${database}`
  proc = Bun.spawn(
    ['bun', 'src/cli.ts', 'local', dsn, '--explain-trusted-role', 'no_such_role', '--data-dir', join(home, 'data')],
    {
      cwd: repoRoot,
      env: cleanEnv({ HOME: home, PGPASSWORD: password }),
      stdin: 'ignore',
      stdout: 'pipe',
      stderr: 'pipe',
      timeout: 120_000,
      killSignal: 'SIGKILL',
    },
  )
  let out = ''
  let err = ''
  void (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of proc!.stdout) out += decoder.decode(chunk, { stream: true })
  })()
  void (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of proc!.stderr) err += decoder.decode(chunk, { stream: true })
  })()
  const printed = (pattern: RegExp, timeoutMs = 20_000) =>
    until(
      `stdout to show ${pattern}`,
      async () => {
        if (proc!.exitCode !== null) throw new Error(`dbm local exited (${proc!.exitCode}):\n${out}\n${err}`)
        return out.match(pattern) ?? undefined
      },
      { timeoutMs, everyMs: 25 },
    )

  const [, link] = await printed(/^Sign in: +(http:\S+)$/m)
  // The start says whom it trusts for plans, and why.
  expect(out).toContain(
    `Plans:     statements of each PostgreSQL database's owner are explained (it is your own database: its code is yours), and "no_such_role" (--explain-trusted-role)\n`,
  )
  const name = `127.0.0.1:${pg.port}/${database}`
  // The check's line names the flag, not a config key, for the role that does not exist; nothing blocks the plans.
  const [checkLine] = await printed(new RegExp(`^ok {4}${name.replace(/[./]/g, '\\$&')}: postgres 17.*$`, 'm'))
  expect(checkLine).toContain(
    '; note: --explain-trusted-role names no role "no_such_role" (role names are case-sensitive)',
  )
  expect(checkLine).not.toContain('plans will not be sampled')
  expect(checkLine).not.toContain('agent config')

  const signedIn = await fetch(link!, { redirect: 'manual' })
  expect(signedIn.status).toBe(302)
  const cookie = signedIn.headers
    .getSetCookie()
    .map((c) => c.split(';', 1)[0]!)
    .filter((c) => !c.endsWith('='))
    .join('; ')
  const base = new URL(link!).origin
  const get = async <T>(path: string): Promise<T> =>
    (await (await fetch(`${base}/api/v1${path}`, { headers: { cookie } })).json()) as T
  const db = await until('the database to report', async () =>
    (await get<{ id: string; name: string; last_seen_at: string | null }[]>('/databases')).find(
      (d) => d.name === name && d.last_seen_at !== null,
    ),
  )

  // The first collection sampled the statement's plan: a Seq Scan of orders filtered on customer_id.
  const [stat] =
    await appSql`SELECT queryid::text AS id FROM pg_stat_statements WHERE query LIKE 'SELECT id, amount FROM orders WHERE customer_id = $1%'`
  const plans = await until('the sampled plan', async () => {
    const list = await get<{ plan_json: unknown; source: string; seq_scans: number }[]>(
      `/databases/${db.id}/queries/${stat!.id}/explain`,
    )
    return list.length > 0 ? list : undefined
  })
  expect([plans[0]!.source, plans[0]!.seq_scans]).toEqual(['sampled', 1])
  expect(JSON.stringify(plans[0]!.plan_json)).toContain('"Filter":"(customer_id = $1)"')

  // Full reads of the 20,000 rows after the first collection's baseline: 120 of them, all sequential.
  for (let i = 0; i < 120; i++) await ordersOf(appSql, i)
  const finding = await until(
    'the sequential-scans finding with its index',
    async () => {
      const doctor = await get<{ top_issues: { title: string; detail: string; how_to_fix: string[] }[] }>(
        `/databases/${db.id}/doctor`,
      )
      return doctor.top_issues.find(
        (f) => f.title === 'Sequential scans on public.orders' && f.how_to_fix[0]?.startsWith('CREATE INDEX'),
      )
    },
    { timeoutMs: 40_000, everyMs: 500 },
  )
  expect(finding.detail).toContain('public.orders (20,000 rows')
  expect(finding.how_to_fix[0]).toStartWith(
    `CREATE INDEX CONCURRENTLY ON public.orders (customer_id);   -- for statement ${stat!.id}`,
  )
  proc.kill('SIGINT')
  expect(await proc.exited).toBe(0)
}, 90_000)
