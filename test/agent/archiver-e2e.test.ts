// The WAL archiver end to end: a real PostgreSQL 17 started with archive_mode on and an archive_command
// that always fails (`false`, set by ALTER SYSTEM), watched by the real agent pushing to a real dbm server. Once PostgreSQL
// counts failures, GET /archiver shows pg_stat_archiver's failed count and last failed WAL file, and the
// doctor's pg_archiver_failing names that file; after archive_command becomes `true` and a reload,
// the archived count moves and the finding clears. A role that may not list the archive status directory
// gets a note and null counts, and pg_monitor may list it.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { archiver } from '../../src/agent/collectors/postgres/archiver.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

let server: PostgresServer
let sql: postgres.Sql
let rig: AgentRig
let dir: string

interface ArchiverRow {
  archived_count: number
  failed_count: number
  last_failed_wal: string | null
  last_archived_wal: string | null
  failing: boolean
}

const archiverRow = async (): Promise<ArchiverRow> => {
  const [row] = await sql<ArchiverRow[]>`
    SELECT archived_count::int, failed_count::int, last_failed_wal, last_archived_wal,
           coalesce(last_failed_time > last_archived_time, last_failed_time IS NOT NULL) AS failing
    FROM pg_stat_archiver`
  return row!
}

/** A write and a WAL switch: one more completed segment for the archiver. */
const switchWal = async () => {
  await sql`INSERT INTO filler SELECT generate_series(1, 100)`
  await sql`SELECT pg_switch_wal()`
}

const archiverFinding = async () => {
  const doctor = await rig.api('/doctor')
  return (
    doctor.top_issues as { rule: string; objects: string[]; metrics: Record<string, unknown>; severity: string }[]
  ).find((f) => f.rule === 'pg_archiver_failing')
}

beforeAll(async () => {
  // archive_mode needs a start; the command is set by ALTER SYSTEM (one given with -c would override it for good).
  server = await startPostgres(17, ['-c', 'archive_mode=on'])
  sql = postgres(server.url(), { max: 1, onnotice: () => {} })
  await sql`ALTER SYSTEM SET archive_command = 'false'`
  await sql`SELECT pg_reload_conf()`
  await sql`CREATE TABLE filler (x int)`
  await switchWal()
  await until('PostgreSQL to count a failed archive attempt', async () =>
    (await archiverRow()).failed_count > 0 ? true : undefined,
  )
  dir = mkdtempSync(join(tmpdir(), 'dbm-archiver-'))
  rig = await startAgentRig(server.url(), 'archived', dir)
}, 60_000)

afterAll(async () => {
  await rig?.stop()
  await sql?.end({ timeout: 1 })
  await server?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('a failing archive_command: /archiver says what pg_stat_archiver says, the doctor names the WAL file; fixed, it clears', async () => {
  // The archiver retries three times, then waits: the counts settle, and the API catches up with them.
  const failing = await until('GET /archiver to show what pg_stat_archiver shows', async () => {
    const [api, row] = [await rig.api('/archiver'), await archiverRow()]
    return api.failed_count === row.failed_count && api.last_failed_wal === row.last_failed_wal
      ? { api, row }
      : undefined
  })
  expect(failing.row.failing).toBe(true)
  expect(failing.api).toMatchObject({
    archive_mode: 'on',
    archive_command_set: true,
    archived_count: 0,
    last_archived_wal: null,
    failing: true,
  })
  expect(failing.api.failed_count).toBeGreaterThan(0)
  expect(failing.api.last_failed_wal).toMatch(/^[0-9A-F]{24}$/)
  expect(failing.api.ready_count).toBeGreaterThanOrEqual(1)
  expect(failing.api.ready_bytes).toBe(failing.api.ready_count * 16 * 1024 ** 2)
  expect(Date.parse(failing.api.last_failed_time)).toBeGreaterThan(0)

  const finding = await until('the doctor to find archiving failing', archiverFinding)
  expect(finding.severity).toBe('critical')
  expect(finding.objects).toEqual([failing.row.last_failed_wal!])
  expect(finding.metrics.last_failed_wal).toBe(failing.row.last_failed_wal)

  await sql`ALTER SYSTEM SET archive_command = 'true'`
  await sql`SELECT pg_reload_conf()`
  await switchWal()
  const fixed = await until('PostgreSQL to archive after the fix', async () => {
    const row = await archiverRow()
    return row.archived_count > 0 && !row.failing ? row : undefined
  })
  const api = await until('GET /archiver to show the archived files', async () => {
    const a = await rig.api('/archiver')
    return a.archived_count >= fixed.archived_count && !a.failing ? a : undefined
  })
  expect(api.failed_count).toBe(fixed.failed_count)
  expect(api.last_archived_wal).toMatch(/^[0-9A-F]{24}$/)
  await until('the finding to clear', async () => ((await archiverFinding()) === undefined ? true : undefined))
}, 60_000)

test('a role without pg_monitor: the counts, a note and no backlog; with pg_monitor the backlog and no note', async () => {
  await sql.unsafe(`CREATE ROLE archiver_watcher LOGIN PASSWORD 'w'`)
  const url = server.url().replace(/\/\/[^@]*@/, '//archiver_watcher:w@')
  const watcher = postgres(url, { max: 1, onnotice: () => {} })
  const ctx: PostgresContext = {
    name: 'archived',
    database: 'postgres',
    sql: watcher,
    versionNum: 170_000,
    major: 17,
    now: Date.now(),
    settings: { collectExplainPlans: false, collectReplication: false },
    state: new Map(),
    notes: new Map(),
    log: createLogger('error', () => {}),
  }
  try {
    const plain = (await archiver.collect(ctx)).archiver!
    expect(plain.ready_count).toBeNull()
    expect(plain.failed_count).toBe((await archiverRow()).failed_count)
    expect(ctx.notes.get('archiver')).toContain('pg_monitor')
    await sql.unsafe('GRANT pg_monitor TO archiver_watcher')
    const monitor = (await archiver.collect(ctx)).archiver!
    expect(monitor.ready_count).not.toBeNull()
    expect(monitor.archive_command_set).toBe(true)
    expect(ctx.notes.has('archiver')).toBe(false)
  } finally {
    await watcher.end({ timeout: 1 })
  }
})
