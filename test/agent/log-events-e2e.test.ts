// The log_events collector against a real PostgreSQL 17 writing its log with the logging collector:
// exact counts of what the server did (37 failed logins, one deadlock, a lock wait, a checkpoint, an
// autovacuum run), hostile RAISE LOG texts, rotation and an agent restart mid-file with nothing lost or
// doubled, stderr with a custom prefix, csvlog and jsonlog (switched by ALTER SYSTEM and a reload), and
// the over-SQL source for a role given the GRANTs; then ground truths against the server's own statistics:
// a failing archive_command (pg_stat_archiver), a statement timeout, temp files (pg_stat_database) and an
// autovacuum cancelled by a lock. One server for the file; each test marks its entries.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { grantsNote, logEvents } from '../../src/agent/collectors/postgres/log-events.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { loadState, saveState } from '../../src/agent/state.ts'
import { createLogger } from '../../src/shared/log.ts'
import { LogEventsSection, type LogEvent } from '../../src/shared/wire.ts'
import { Value } from '@sinclair/typebox/value'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

let server: PostgresServer
let sql: postgres.Sql
let logDir: string
let stateDir: string

beforeAll(async () => {
  server = await startPostgres(17, [
    '-c',
    'logging_collector=on',
    '-c',
    'log_line_prefix=%m [%p] %q%u@%d %r ',
    '-c',
    'log_lock_waits=on',
    '-c',
    'deadlock_timeout=100ms',
    '-c',
    'log_checkpoints=on',
    '-c',
    'log_autovacuum_min_duration=0',
    '-c',
    'autovacuum_naptime=1',
    '-c',
    'lc_messages=C',
    '-c',
    'log_rotation_age=0',
    '-c',
    'log_rotation_size=0',
    // Archiving on but paused (no archive_command) until the archive test sets a failing one.
    '-c',
    'archive_mode=on',
  ])
  sql = postgres(server.url(), { max: 3, onnotice: () => {} })
  const [row] = await sql<{ dir: string }[]>`SELECT current_setting('data_directory') AS dir`
  logDir = join(row!.dir, 'log')
  stateDir = mkdtempSync(join(tmpdir(), 'dbm-logevents-'))
}, 60_000)

afterAll(async () => {
  await sql?.end({ timeout: 1 })
  await server?.stop()
  if (stateDir) rmSync(stateDir, { recursive: true, force: true })
})

function context(state: Map<string, unknown>, extra: Partial<PostgresContext> = {}): PostgresContext {
  return {
    name: 'logs',
    database: 'postgres',
    sql,
    versionNum: 170_000,
    major: 17,
    now: Date.now(),
    pgLogDir: logDir,
    settings: { collectExplainPlans: false, collectReplication: false },
    state,
    notes: new Map(),
    log: createLogger('error', () => {}),
    ...extra,
  }
}

interface Seen {
  entries: LogEvent[]
  counts: Map<string, number>
  cycles: number
}

async function cycle(ctx: PostgresContext, seen: Seen): Promise<void> {
  ctx.now = Date.now()
  const section = (await logEvents.collect(ctx)).log_events
  expect(section).toBeDefined()
  expect(Value.Check(LogEventsSection, section)).toBe(true)
  seen.entries.push(...section!.entries)
  for (const c of section!.counts) seen.counts.set(c.kind, (seen.counts.get(c.kind) ?? 0) + c.count)
  seen.cycles++
}

/** Cycles until `done` holds, then once more after the settle time: anything extra would show as a double. */
async function drain(ctx: PostgresContext, seen: Seen, what: string, done: (s: Seen) => boolean): Promise<Seen> {
  await until(
    what,
    async () => {
      await cycle(ctx, seen)
      return done(seen) ? true : undefined
    },
    { everyMs: 300, timeoutMs: 30_000 },
  ).catch((e) => {
    throw new Error(
      `${(e as Error).message}; seen: ${JSON.stringify([...seen.counts])} ${JSON.stringify(seen.entries.filter((x) => x.kind !== 'other').map((x) => [x.kind, x.fields.table ?? null]))}`,
    )
  })
  await Bun.sleep(1_100)
  await cycle(ctx, seen)
  return seen
}

const fresh = (): Seen => ({ entries: [], counts: new Map(), cycles: 0 })
const marked = (seen: Seen, marker: string) => seen.entries.filter((e) => e.message.includes(marker))

test('first start reads from the end; 37 failed logins are exactly 37 auth_failed with user and client', async () => {
  const ctx = context(new Map())
  const seen = fresh()
  await cycle(ctx, seen)
  expect(seen.entries).toEqual([])
  await sql`CREATE ROLE login_victim LOGIN PASSWORD 'right'`
  const url = server.url().replace(/\/\/[^@]*@/, '//login_victim:wrong@')
  for (let i = 0; i < 37; i++) {
    const bad = postgres(url, { max: 1, connect_timeout: 5 })
    await bad`SELECT 1`.then(
      () => {
        throw new Error('logged in with a wrong password')
      },
      () => {},
    )
    await bad.end({ timeout: 1 })
  }
  await drain(ctx, seen, '37 failed logins', (s) => s.entries.filter((e) => e.kind === 'auth_failed').length >= 37)
  const failed = seen.entries.filter((e) => e.kind === 'auth_failed')
  expect(failed).toHaveLength(37)
  expect(seen.counts.get('auth_failed')).toBe(37)
  for (const e of failed) {
    expect(e).toMatchObject({ severity: 'fatal', user: 'login_victim', fields: { method: 'password' } })
    expect(e.client).toMatch(/^127\.0\.0\.1\(\d+\)$/)
  }
  expect(ctx.notes.size).toBe(0)
})

test('a deadlock, a lock wait, a checkpoint and an autovacuum run, with their fields', async () => {
  const ctx = context(new Map())
  const seen = fresh()
  await cycle(ctx, seen)
  await sql`CREATE TABLE dl (id int PRIMARY KEY, v int) WITH (autovacuum_vacuum_threshold = 1, autovacuum_vacuum_scale_factor = 0)`
  await sql`INSERT INTO dl SELECT g, g FROM generate_series(1, 1000) g`
  const a = postgres(server.url(), { max: 1, onnotice: () => {} })
  const b = postgres(server.url(), { max: 1, onnotice: () => {} })
  try {
    let aLocked!: () => void
    const aHolds = new Promise<void>((r) => (aLocked = r))
    let bLocked!: () => void
    const bHolds = new Promise<void>((r) => (bLocked = r))
    const first = a
      .begin(async (tx) => {
        await tx`UPDATE dl SET v = 10 WHERE id = 1`
        aLocked()
        await bHolds
        await tx`UPDATE dl SET v = 10 WHERE id = 2`
      })
      .then(
        () => 'ok',
        (e: Error) => e.message,
      )
    const second = b
      .begin(async (tx) => {
        await aHolds
        await tx`UPDATE dl SET v = 20 WHERE id = 2`
        bLocked()
        await tx`UPDATE dl SET v = 20 WHERE id = 1`
      })
      .then(
        () => 'ok',
        (e: Error) => e.message,
      )
    const outcomes = await Promise.all([first, second])
    expect(outcomes.filter((o) => o === 'deadlock detected')).toHaveLength(1)
  } finally {
    await a.end({ timeout: 1 })
    await b.end({ timeout: 1 })
  }
  // A lock wait: the holder commits only once the collector has read the waiter's `still waiting` line.
  const holder = await sql.reserve()
  try {
    await holder`BEGIN`
    await holder`UPDATE dl SET v = 30 WHERE id = 3`
    const waiter = sql`UPDATE dl SET v = 40 WHERE id = 3`.execute()
    await drain(ctx, seen, 'the lock wait', (s) => s.entries.some((e) => e.kind === 'lock_wait'))
    await holder`COMMIT`
    await waiter
  } finally {
    holder.release()
  }
  await sql`DELETE FROM dl WHERE id > 500`
  await sql`CHECKPOINT`
  await drain(
    ctx,
    seen,
    'deadlock, lock wait, checkpoint and autovacuum of dl',
    (s) =>
      ['deadlock', 'lock_wait', 'lock_acquired', 'checkpoint'].every((k) => s.entries.some((e) => e.kind === k)) &&
      s.entries.some(
        (e) =>
          e.kind === 'autovacuum' &&
          String(e.fields.table).endsWith('public.dl') &&
          (e.fields.tuples_removed as number) >= 500,
      ),
  )
  const deadlocks = seen.entries.filter((e) => e.kind === 'deadlock')
  expect(deadlocks).toHaveLength(1)
  expect(deadlocks[0]!.sqlstate).toBeNull()
  expect((deadlocks[0]!.fields.statements as string[]).sort()).toEqual([
    'UPDATE dl SET v = ? WHERE id = ?',
    'UPDATE dl SET v = ? WHERE id = ?',
  ])
  expect(deadlocks[0]!.fields.pids as number[]).toHaveLength(2)
  const wait = seen.entries.find((e) => e.kind === 'lock_wait')!
  expect(wait.fields).toMatchObject({ mode: 'ShareLock' })
  expect((wait.fields.holders as number[]).length).toBe(1)
  expect(wait.statement).toBe('UPDATE dl SET v = ? WHERE id = ?')
  const checkpoint = seen.entries.find((e) => e.kind === 'checkpoint' && String(e.fields.reason).includes('immediate'))!
  expect(checkpoint.fields.buffers_written as number).toBeGreaterThan(0)
  expect(checkpoint.pid).not.toBeNull()
  // The run after the DELETE: the 500 deleted rows (and the updates' old versions) removed, 500 left.
  const vacuum = seen.entries.find(
    (e) =>
      e.kind === 'autovacuum' &&
      String(e.fields.table).endsWith('public.dl') &&
      (e.fields.tuples_removed as number) >= 500,
  )!
  expect(vacuum.fields.tuples_removed).toBeGreaterThanOrEqual(500)
  expect(vacuum.fields.tuples_remaining).toBe(500)
}, 60_000)

test('hostile RAISE LOG texts: forged prefixes stay in their entry; quotes, backslashes, */, bidi and a 1 MB line', async () => {
  const ctx = context(new Map())
  const seen = fresh()
  await cycle(ctx, seen)
  const forged =
    'hostile-1\n2026-12-07 03:58:29.319 UTC [1] LOG:  checkpoint complete: wrote 999 buffers (0.0%); 0 WAL file(s) added, 0 removed, 0 recycled; write=1 s, sync=1 s, total=1 s\n\tSTATEMENT: x'
  await sql`CREATE FUNCTION raise_log(text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN RAISE LOG '%', $1; END $$`
  await sql`SELECT raise_log(${forged})`
  await sql.unsafe(`DO $$ BEGIN RAISE LOG '%', $q$hostile-2 ' " \\ */ /* \u202e\u2066 ${'\u0000'.slice(1)}$q$; END $$`)
  await sql.unsafe(`DO $$ BEGIN RAISE LOG 'hostile-3 %', repeat('x', 1048576); END $$`)
  await sql.unsafe(
    `DO $$ BEGIN RAISE LOG 'process 1 still waiting for AccessExclusiveLock on relation 1 of database 1 after 9.0 ms hostile-4'; END $$`,
  )
  await drain(ctx, seen, 'the hostile entries', (s) => [1, 2, 3, 4].every((i) => marked(s, `hostile-${i}`).length > 0))
  for (const i of [1, 2, 3, 4]) expect(marked(seen, `hostile-${i}`)).toHaveLength(1)
  for (const e of seen.entries.filter((x) => x.message.includes('hostile-')))
    expect(e).toMatchObject({ kind: 'other', user: 'postgres' })
  expect(seen.entries.some((e) => e.pid === 1 || e.kind === 'checkpoint')).toBe(false)
  expect(marked(seen, 'hostile-2')[0]!.message).toContain('\\ */ /* \u202e')
  expect(marked(seen, 'hostile-3')[0]!.message.length).toBe(8_000)
}, 60_000)

test('a backlog of more than a slice: 200 entries per batch, every warning counted, logged once', async () => {
  const lines: string[] = []
  const ctx = context(new Map(), {
    log: createLogger('info', (l) => lines.push(l)),
    logReadBudgetBytes: 1024 * 1024,
  })
  await cycle(ctx, fresh())
  // About 200 bytes each (the WARNING line and its CONTEXT): 2.4 MB, read in 1 MB cycles.
  await sql.unsafe(`DO $$ BEGIN FOR i IN 1..12000 LOOP RAISE WARNING 'backlog-%', i; END LOOP; END $$`)
  const batches: { entries: number; dropped: number; counted: number; backlog: number | null }[] = []
  let warnings = 0
  await until(
    'the 12,000 warnings counted',
    async () => {
      ctx.now = Date.now()
      const section = (await logEvents.collect(ctx)).log_events!
      const counted = section.counts.reduce((n, c) => n + c.count, 0)
      batches.push({
        entries: section.entries.length,
        dropped: section.dropped,
        counted,
        backlog: section.backlog_bytes,
      })
      warnings += section.counts.filter((c) => c.severity === 'warning').reduce((n, c) => n + c.count, 0)
      return warnings >= 12_000 ? true : undefined
    },
    { everyMs: 300, timeoutMs: 30_000 },
  )
  expect(warnings).toBe(12_000)
  // The first cycles have more than a slice waiting: 200 entries sent whole, the rest in dropped.
  expect(batches[0]).toMatchObject({ entries: 200, dropped: batches[0]!.counted - 200 })
  expect(batches[1]).toMatchObject({ entries: 200, dropped: batches[1]!.counted - 200 })
  expect(lines.filter((l) => l.includes('reading a backlog of the server log'))).toHaveLength(1)
}, 60_000)

test('rotation between reads and an agent restart mid-file lose and double nothing; csvlog and jsonlog too', async () => {
  const statePath = join(stateDir, 'state.json')
  let state = new Map<string, unknown>()
  const seen = fresh()
  // A small budget: each cycle stops mid-file, so the restart happens with a backlog.
  await cycle(context(state, { logReadBudgetBytes: 4096 }), seen)
  const say = async (from: number, to: number, tag: string) => {
    for (let i = from; i < to; i++) await sql.unsafe(`DO $$ BEGIN RAISE LOG 'rot-${tag}-${i}'; END $$`)
  }
  await say(0, 40, 'a')
  await cycle(context(state, { logReadBudgetBytes: 4096 }), seen)
  await sql`SELECT pg_rotate_logfile()`
  await say(40, 80, 'a')
  await cycle(context(state, { logReadBudgetBytes: 4096 }), seen)
  expect(seen.entries.filter((e) => e.message.startsWith('rot-a-')).length).toBeLessThan(80)
  // The agent stops here: a new one loads the saved state.
  saveState(statePath, { target: 't', lineage: null }, state, Date.now())
  const loaded = loadState(statePath)
  if (loaded.kind !== 'loaded') throw new Error(`state not loaded: ${loaded.kind}`)
  state = loaded.entries
  await drain(
    context(state, { logReadBudgetBytes: 4096 }),
    seen,
    'the 80 rotated entries',
    (s) => s.entries.filter((e) => e.message.startsWith('rot-a-')).length >= 80,
  )
  const names = seen.entries.filter((e) => e.message.startsWith('rot-a-')).map((e) => e.message)
  expect(names).toHaveLength(80)
  expect(new Set(names).size).toBe(80)

  for (const [format, ext] of [
    ['csvlog', 'b'],
    ['jsonlog', 'c'],
  ] as const) {
    await sql.unsafe(`ALTER SYSTEM SET log_destination = '${format}'`)
    await sql`SELECT pg_reload_conf()`
    await until(`log_destination ${format}`, async () =>
      (await sql`SELECT current_setting('log_destination') AS d`)[0]!.d === format ? true : undefined,
    )
    const ctx = context(state)
    const formatSeen = fresh()
    await cycle(ctx, formatSeen)
    await say(0, 25, ext)
    await drain(
      ctx,
      formatSeen,
      `25 ${format} entries`,
      (s) => s.entries.filter((e) => e.message.startsWith(`rot-${ext}-`)).length >= 25,
    )
    const got = formatSeen.entries.filter((e) => e.message.startsWith(`rot-${ext}-`))
    expect(got).toHaveLength(25)
    expect(got[0]).toMatchObject({ user: 'postgres', database: 'postgres', kind: 'other' })
    expect(got[0]!.client).toMatch(/^127\.0\.0\.1:\d+$/)
  }
  await sql`ALTER SYSTEM RESET log_destination`
  await sql`SELECT pg_reload_conf()`
}, 90_000)

test('log_destination switched stderr → csvlog → jsonlog → stderr between reads: every entry once', async () => {
  const ctx = context(new Map())
  const seen = fresh()
  await cycle(ctx, seen)
  // No read between the switches: each old format's file holds entries not read yet.
  for (const [k, format] of (['stderr', 'csvlog', 'jsonlog', 'stderr'] as const).entries()) {
    await sql.unsafe(`ALTER SYSTEM SET log_destination = '${format}'`)
    await sql`SELECT pg_reload_conf()`
    await until(`log_destination ${format}`, async () =>
      (await sql`SELECT current_setting('log_destination') AS d`)[0]!.d === format ? true : undefined,
    )
    for (let i = 0; i < 3; i++) await sql.unsafe(`DO $$ BEGIN RAISE LOG 'switch-${k}-${i}'; END $$`)
  }
  await drain(ctx, seen, '12 entries over 3 switches', (s) => marked(s, 'switch-').length >= 12)
  const names = marked(seen, 'switch-')
    .map((e) => e.message)
    .sort()
  expect(names).toEqual([0, 1, 2, 3].flatMap((k) => [0, 1, 2].map((i) => `switch-${k}-${i}`)))
  await sql`ALTER SYSTEM RESET log_destination`
  await sql`SELECT pg_reload_conf()`
}, 60_000)

test('over SQL: a note without the GRANTs; with them the entries come through pg_read_binary_file', async () => {
  await sql.unsafe(`CREATE ROLE log_reader LOGIN PASSWORD 'r'`)
  const reader = postgres(server.url().replace(/\/\/[^@]*@/, '//log_reader:r@'), { max: 1, onnotice: () => {} })
  try {
    const ctx = context(new Map(), { sql: reader, pgLogDir: undefined })
    expect(await logEvents.collect(ctx)).toEqual({})
    // The note names the role, and leaves pg_monitor out once the role has it.
    expect(ctx.notes.get('log_events')).toBe(grantsNote('log_reader', false))
    expect(grantsNote('log_reader', false)).toEndWith(
      'GRANT pg_monitor TO "log_reader"; GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint, boolean) TO "log_reader";',
    )
    expect(grantsNote('log_reader', true)).not.toContain('pg_monitor')
    await sql.unsafe('GRANT pg_monitor TO log_reader')
    await sql.unsafe('GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint, boolean) TO log_reader')
    const seen = fresh()
    await cycle(ctx, seen)
    expect(ctx.notes.has('log_events')).toBe(false)
    for (let i = 0; i < 10; i++) await sql.unsafe(`DO $$ BEGIN RAISE LOG 'over-sql-${i}'; END $$`)
    await drain(ctx, seen, '10 entries over SQL', (s) => marked(s, 'over-sql-').length >= 10)
    expect(marked(seen, 'over-sql-')).toHaveLength(10)
  } finally {
    await reader.end({ timeout: 1 })
  }
}, 60_000)

const ofKind = (seen: Seen, kind: string) => seen.entries.filter((e) => e.kind === kind)

test('a failing archive_command: one archive_failed per failure pg_stat_archiver counts, its WAL file and exit code 3', async () => {
  const ctx = context(new Map())
  const seen = fresh()
  await cycle(ctx, seen)
  const failedCount = async () =>
    Number((await sql<{ n: string }[]>`SELECT failed_count::text AS n FROM pg_stat_archiver`)[0]!.n)
  const before = await failedCount()
  await sql.unsafe(`ALTER SYSTEM SET archive_command = 'exit 3 # %f'`)
  await sql`SELECT pg_reload_conf()`
  await until('archive_command set', async () =>
    (await sql`SELECT current_setting('archive_command') AS c`)[0]!.c === 'exit 3 # %f' ? true : undefined,
  )
  await sql`CREATE TABLE archived (v int)`
  await sql`INSERT INTO archived SELECT generate_series(1, 1000)`
  const [switched] = await sql<{ wal: string }[]>`SELECT pg_walfile_name(pg_switch_wal()) AS wal`
  try {
    // The archiver tries a segment three times, a second apart, then waits a minute: three failures.
    await until('three archive failures', async () => ((await failedCount()) - before >= 3 ? true : undefined), {
      timeoutMs: 30_000,
    })
    const failures = (await failedCount()) - before
    // Each try is one; then the archiver gives up on the segment for a while (a WARNING naming it).
    const tries = (s: Seen) => ofKind(s, 'archive_failed')
    await drain(
      ctx,
      seen,
      `${failures} archive failures`,
      (s) => tries(s).length >= failures && ofKind(s, 'archive_gave_up').length > 0,
    )
    const [archiver] = await sql<{ last_failed_wal: string }[]>`SELECT last_failed_wal FROM pg_stat_archiver`
    expect(archiver!.last_failed_wal).toBe(switched!.wal)
    const failed = tries(seen)
    expect(failed).toHaveLength(failures)
    // the pause is its own kind: archive_failed counts exactly the failures pg_stat_archiver counts
    const gaveUp = ofKind(seen, 'archive_gave_up')
    expect(gaveUp).toHaveLength(Math.floor(failures / 3))
    expect(gaveUp[0]).toMatchObject({ severity: 'warning', fields: { wal_file: archiver!.last_failed_wal } })
    expect(seen.counts.get('archive_failed')).toBe(failures)
    for (const e of failed) {
      expect(e).toMatchObject({ severity: 'log', fields: { exit_code: 3, wal_file: archiver!.last_failed_wal } })
      // The command may hold a secret: only the WAL file is sent.
      expect(e.detail).toBe('The failed archive command was: (not sent)')
    }
  } finally {
    await sql`ALTER SYSTEM RESET archive_command`
    await sql`SELECT pg_reload_conf()`
  }
}, 60_000)

test('a statement timeout is one statement_cancelled (statement_timeout); temp files add up to pg_stat_database exactly', async () => {
  const ctx = context(new Map())
  const seen = fresh()
  await cycle(ctx, seen)
  const timedOut = await sql
    .begin(async (tx) => {
      await tx`SET LOCAL statement_timeout = 10`
      await tx`SELECT pg_sleep(1)`
    })
    .then(
      () => 'finished',
      (e: Error) => e.message,
    )
  expect(timedOut).toBe('canceling statement due to statement timeout')

  const temp = async () =>
    (
      await sql<
        { files: string; bytes: string }[]
      >`SELECT temp_files::text AS files, temp_bytes::text AS bytes FROM pg_stat_database WHERE datname = current_database()`
    )[0]!
  const before = await temp()
  const session = await sql.reserve()
  try {
    await session`SET log_temp_files = 0`
    await session`SET work_mem = '64kB'`
    await session`SELECT g FROM generate_series(1, 20000) g ORDER BY g DESC`
    await session`RESET ALL`
  } finally {
    session.release()
  }
  // The statistics arrive when the session reports them (at most a second later).
  const after = await until('the temp files in pg_stat_database', async () => {
    const now = await temp()
    return Number(now.files) > Number(before.files) ? now : undefined
  })
  const files = Number(after.files) - Number(before.files)
  const bytes = Number(after.bytes) - Number(before.bytes)
  await drain(
    ctx,
    seen,
    'the statement timeout and the temp files',
    (s) => ofKind(s, 'statement_cancelled').length >= 1 && ofKind(s, 'temp_file').length >= files,
  )
  const cancelled = ofKind(seen, 'statement_cancelled')
  expect(cancelled).toHaveLength(1)
  expect(cancelled[0]).toMatchObject({
    severity: 'error',
    user: 'postgres',
    statement: 'SELECT pg_sleep(?)',
    fields: { reason: 'statement_timeout' },
  })
  const temps = ofKind(seen, 'temp_file')
  expect(temps).toHaveLength(files)
  expect(temps.reduce((n, e) => n + (e.fields.size_bytes as number), 0)).toBe(bytes)
}, 60_000)

test('an autovacuum cancelled by a lock: one autovacuum_cancelled naming the table', async () => {
  const ctx = context(new Map())
  const seen = fresh()
  await cycle(ctx, seen)
  // A vacuum slowed to a crawl (one cost unit per 100 ms) runs until something cancels it.
  await sql`CREATE TABLE av_cancel (id int) WITH (autovacuum_vacuum_threshold = 0, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_insert_threshold = 0, autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1)`
  await sql`INSERT INTO av_cancel SELECT generate_series(1, 20000)`
  await sql`DELETE FROM av_cancel`
  await until(
    'the autovacuum of av_cancel running',
    async () =>
      (await sql`SELECT 1 FROM pg_stat_progress_vacuum WHERE relid = 'av_cancel'::regclass`).length > 0
        ? true
        : undefined,
    { timeoutMs: 30_000 },
  )
  const locker = await sql.reserve()
  let lockerPid = 0
  try {
    lockerPid = Number((await locker`SELECT pg_backend_pid() AS pid`)[0]!.pid)
    await locker`BEGIN`
    // Waits for the autovacuum until deadlock_timeout, which then cancels it.
    await locker`LOCK TABLE av_cancel IN ACCESS EXCLUSIVE MODE`
    await locker`COMMIT`
  } finally {
    locker.release()
  }
  await drain(ctx, seen, 'the cancelled autovacuum', (s) => ofKind(s, 'autovacuum_cancelled').length >= 1)
  const cancelled = ofKind(seen, 'autovacuum_cancelled')
  expect(cancelled).toHaveLength(1)
  expect(cancelled[0]!.severity).toBe('error')
  expect(String(cancelled[0]!.fields.table)).toMatch(/^(postgres\.)?public\.av_cancel$/)
  // The waiter names the autovacuum it cancels only at DEBUG1 on some majors, and in the same cycle's read.
  const logged = readdirSync(logDir).some(
    (f) =>
      readFileSync(join(logDir, f), 'latin1').includes(`[${lockerPid}] postgres@postgres 127.0.0.1(`) &&
      readFileSync(join(logDir, f), 'latin1').includes('sending cancel to blocking autovacuum PID'),
  )
  if (!logged) expect(cancelled[0]!.fields.blocker_pid).toBeNull()
  else expect([null, lockerPid]).toContain(cancelled[0]!.fields.blocker_pid as number | null)
  await sql`DROP TABLE av_cancel`
}, 60_000)
