// Issue 32's health rules and its blame fix on real PostgreSQL 17 watched by the real agent, on a server
// of this file's own (prepared transactions allowed, a small max_wal_size): dead rows from before a
// prepared transaction are not blamed on it while those made after it are; then each new rule raises
// its finding with its object named, as PostgreSQL itself reports it (hostile names through sql-text.ts),
// and the finding goes once the state is cured.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { pgIdent, pgObject, pgString } from '../../src/server/doctor/sql-text.ts'
import { type DoctorRig, watchDatabase, workload } from '../support/doctor.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

let own: PostgresServer
let rig: DoctorRig
let dsn: string
let sql: postgres.Sql
const clients: postgres.Sql[] = []

function connect(): postgres.Sql {
  const c = postgres(dsn, { max: 1, onnotice: () => {} })
  clients.push(c)
  return c
}

beforeAll(async () => {
  own = await startPostgres(17, [
    '-c',
    'max_prepared_transactions=2',
    '-c',
    'max_wal_size=32MB',
    '-c',
    'min_wal_size=32MB',
  ])
  dsn = await own.freshDatabase()
  sql = connect()
  rig = await watchDatabase(dsn, {
    // Thresholds a test can reach in seconds: a prepared transaction counts after 1 s, a checkpoint is
    // overdue after 3 s (0.01 × checkpoint_timeout's 5 minutes).
    thresholds: {
      pg_prepared_transactions: { warning_s: 1 },
      pg_rollback_ratio: { min_transactions: 100 },
      pg_stale_statistics: { grace_minutes: 0 },
      pg_checkpoint_overdue: { warning_timeouts: 0.01 },
    },
  })
})
afterAll(async () => {
  for (const { gid } of await sql<{ gid: string }[]>`SELECT gid FROM pg_prepared_xacts`.catch(() => []))
    await sql.unsafe(`ROLLBACK PREPARED ${pgString(gid)}`).catch(() => {})
  await Promise.all(clients.map((c) => c.end({ timeout: 1 }).catch(() => {})))
  await rig?.stop()
  await own?.stop()
})

/** A table of 20,000 rows with autovacuum off (so that its dead rows stay for the test), stats flushed. */
async function createTable(table: string) {
  await workload(dsn, async (s) => {
    await s.unsafe(`CREATE TABLE ${table} (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = false)`)
    await s.unsafe(`INSERT INTO ${table} SELECT g, 0 FROM generate_series(1, 20000) g`)
  })
}

describe('dead rows are blamed on a holder only when they arose after it began', () => {
  const gid = `dbm'blame */ \\ ü\nend`

  test('rows deleted before a prepared transaction are not its doing; rows deleted after it are', async () => {
    await createTable('before_t')
    await createTable('after_t')
    await sql`CREATE TABLE ledger (id int PRIMARY KEY, v int)`
    await sql`INSERT INTO ledger VALUES (1, 0)`
    await workload(dsn, (s) => s.unsafe('DELETE FROM before_t WHERE id > 10'))
    await rig.cycle()
    // The store keeps a table's series in minute buckets: the prepared transaction begins in a later
    // minute than the sample that saw before_t's dead rows and after_t's none.
    const sampledIn = Math.floor(Date.now() / 60_000)
    await until('the next minute', async () => (Math.floor(Date.now() / 60_000) > sampledIn ? true : undefined), {
      timeoutMs: 70_000,
      everyMs: 200,
    })
    const twoPhase = connect()
    await twoPhase`BEGIN`
    await twoPhase`UPDATE ledger SET v = 1 WHERE id = 1`
    await twoPhase.unsafe(`PREPARE TRANSACTION ${pgString(gid)}`)
    await workload(dsn, (s) => s.unsafe('DELETE FROM after_t WHERE id > 10'))
    await rig.cycle()

    const findings = await rig.findings('pg_dead_tuples')
    const before = findings.find((f) => f.key === 'pg_dead_tuples:public.before_t')
    const after = findings.find((f) => f.key === 'pg_dead_tuples:public.after_t')
    expect(findings.length).toBe(2)
    expect(before).toMatchObject({
      title: 'Many dead rows in public.before_t',
      metrics: { n_dead_tup: 19_990, dead_rows_before_holder: 19_990, holder_blamed: 0 },
    })
    expect(before.detail).toContain(
      `They were there before prepared transaction ${pgString(gid)} began holding back the xmin horizon `,
    )
    expect(before.detail).toContain(
      '(the table had 19,990 dead rows then), so it is not their cause: autovacuum is turned off for the table',
    )
    expect(before.detail).not.toContain('no VACUUM can remove')
    expect(before.how_to_investigate.join('\n')).not.toContain('pg_prepared_xacts')

    expect(after).toMatchObject({
      title: 'Many dead rows in public.after_t',
      metrics: { n_dead_tup: 19_990, dead_rows_before_holder: 0, holder_blamed: 1 },
    })
    expect(after.detail).toContain(
      `19,990 of them arose after prepared transaction ${pgString(gid)} (PREPARE TRANSACTION, two-phase commit, owner postgres, prepared `,
    )
    expect(after.detail).toContain(
      `no VACUUM can remove the rows deleted or updated after that until prepared transaction ${pgString(gid)} is committed or rolled back.`,
    )
    expect(after.how_to_investigate).toContain(
      'SELECT gid, prepared, owner, database, age(transaction) AS xid_age FROM pg_prepared_xacts ORDER BY prepared;',
    )
  }, 120_000)
})

describe('prepared transactions pending past the threshold', () => {
  test("the blame test's prepared transaction: named by gid with owner, database, age and locks; its fix, run as written, ends it", async () => {
    const [prepared] = await sql<{ gid: string; owner: string; database: string; locks: number }[]>`
      SELECT p.gid, p.owner, p.database, (SELECT count(*)::int FROM pg_locks l WHERE l.pid IS NULL AND l.virtualtransaction = (SELECT x.virtualtransaction FROM pg_locks x WHERE x.locktype = 'transactionid' AND x.transactionid = p.transaction AND x.pid IS NULL LIMIT 1)) AS locks FROM pg_prepared_xacts p`
    expect(prepared!.locks).toBeGreaterThan(0)
    await until('a second pending', async () =>
      (await sql`SELECT 1 FROM pg_prepared_xacts WHERE prepared < now() - interval '1.5 s'`).length > 0
        ? true
        : undefined,
    )
    await rig.cycle()
    const [finding, ...others] = await rig.findings('pg_prepared_transactions')
    expect(others).toEqual([])
    expect(finding).toMatchObject({
      key: `pg_prepared_transactions:prepared transaction ${prepared!.gid}`,
      severity: 'warning',
      metrics: { gid: prepared!.gid, owner: prepared!.owner, database: prepared!.database, locks: prepared!.locks },
    })
    // The hostile gid quoted as a string constant, the names as identifiers: one line, nothing forged.
    expect(finding.title).toStartWith(`Prepared transaction ${pgString(prepared!.gid)} pending for `)
    expect(finding.title).not.toMatch(/[\n\r\u2028]/)
    expect(finding.detail).toContain(
      `(owner ${pgIdent(prepared!.owner)} in database ${pgIdent(prepared!.database)}) was prepared `,
    )
    expect(finding.detail).toContain(`It holds ${prepared!.locks} locks and the xmin horizon `)
    for (const command of [...finding.how_to_fix, ...finding.how_to_investigate])
      expect(command).not.toMatch(/[\n\r\u2028]/)
    await sql.unsafe(finding.how_to_investigate[1])
    await sql.unsafe(finding.how_to_fix[0])
    expect((await sql`SELECT gid FROM pg_prepared_xacts`).length).toBe(0)
    await rig.cycle()
    expect(await rig.findings('pg_prepared_transactions')).toEqual([])
  })
})

describe('the rollback ratio', () => {
  test('hundreds of rollbacks against a few commits: critical, with the counts', async () => {
    await workload(dsn, async (s) => {
      for (let i = 0; i < 300; i++)
        await s
          .begin(async (tx) => {
            await tx`SELECT 1`
            throw new Error('roll back')
          })
          .catch(() => {})
    })
    await rig.cycle()
    const [finding] = await rig.findings('pg_rollback_ratio')
    expect(finding).toMatchObject({ key: 'pg_rollback_ratio', severity: 'critical' })
    expect(finding.metrics.xact_rollback).toBeGreaterThanOrEqual(300)
    expect(finding.metrics.commit_ratio).toBeLessThan(0.5)
    expect(finding.title).toStartWith('Only ')
    expect(finding.detail).toContain(`rolled back ${finding.metrics.xact_rollback.toLocaleString('en-US')} (`)
  })
})

describe('disabled triggers', () => {
  const parent = `par'ent */ ü`
  const child = `chi"ld \\ x`
  const key = `fk "orders" */ ü`
  const trigger = `audit'trg */`
  const q = (name: string) => `"${name.replaceAll('"', '""')}"`

  test('DISABLE TRIGGER ALL: the foreign key named, critical; a user trigger off: warning; the fixes, run as written, cure both', async () => {
    await sql.unsafe(`CREATE TABLE ${q(parent)} (id int PRIMARY KEY)`)
    await sql.unsafe(
      `CREATE TABLE ${q(child)} (id int PRIMARY KEY, parent_id int CONSTRAINT ${q(key)} REFERENCES ${q(parent)})`,
    )
    await sql.unsafe('CREATE FUNCTION audit_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$')
    await sql.unsafe(
      `CREATE TRIGGER ${q(trigger)} BEFORE INSERT ON ${q(parent)} FOR EACH ROW EXECUTE FUNCTION audit_noop()`,
    )
    await sql.unsafe(`ALTER TABLE ${q(child)} DISABLE TRIGGER ALL`)
    await sql.unsafe(`ALTER TABLE ${q(parent)} DISABLE TRIGGER ${q(trigger)}`)
    await rig.cycle()
    const findings = await rig.findings('pg_disabled_triggers')
    const fk = findings.find((f) => f.severity === 'critical')
    const user = findings.find((f) => f.severity === 'warning')
    expect(findings.length).toBe(2)
    expect(fk.metrics).toMatchObject({ constraint_name: key, disabled_triggers: 2 })
    expect(fk.title).toEndWith(' unchecked')
    expect(user.how_to_fix.length).toBe(1)
    for (const command of [...fk.how_to_fix, ...user.how_to_fix, ...fk.how_to_investigate, ...user.how_to_investigate])
      expect(command).not.toMatch(/[\n\r\u2028]/)
    for (const query of [...fk.how_to_investigate, ...user.how_to_investigate]) await sql.unsafe(query)
    // The orphan a disabled key lets in: VALIDATE then fails on it; without it the fixes run clean.
    await sql.unsafe(fk.how_to_fix[0])
    await sql.unsafe(user.how_to_fix[0])
    await rig.cycle()
    expect(await rig.findings('pg_disabled_triggers')).toEqual([])
    await sql.unsafe(fk.how_to_fix[fk.how_to_fix.length - 1])
  })
})

describe('stale planner statistics', () => {
  const loaded = `lo'aded */ ü`
  const changed = `chan"ged \\ x`
  const q = (name: string) => `"${name.replaceAll('"', '""')}"`

  test('a 300,000-row table never analyzed, and one changed past the analyze threshold: named, the ANALYZE run as written cures both', async () => {
    // Autovacuum off for both, so that nothing but the finding's fix analyzes them.
    await workload(dsn, async (s) => {
      await s.unsafe(`CREATE TABLE ${q(loaded)} (id int, v int) WITH (autovacuum_enabled = false)`)
      await s.unsafe(`INSERT INTO ${q(loaded)} SELECT g, g FROM generate_series(1, 300000) g`)
      await s.unsafe(`CREATE TABLE ${q(changed)} (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = false)`)
      await s.unsafe(`INSERT INTO ${q(changed)} SELECT g, 0 FROM generate_series(1, 10000) g`)
    })
    // 2,000 rows changed after the analyze: past 50 + 0.1 × 10,000.
    await workload(dsn, async (s) => {
      await s.unsafe(`ANALYZE ${q(changed)}`)
      await s.unsafe(`UPDATE ${q(changed)} SET v = 1 WHERE id <= 2000`)
    })
    await rig.cycle()
    const findings = await rig.findings('pg_stale_statistics')
    const never = findings.find((f) => f.key === `pg_stale_statistics:${pgObject('public', loaded)}`)
    const stale = findings.find((f) => f.key === `pg_stale_statistics:${pgObject('public', changed)}`)
    expect(never).toMatchObject({
      severity: 'warning',
      title: `public.${q(loaded)} has never been analyzed`,
      metrics: { never_analyzed: 1, n_live_tup: 300_000, autovacuum_enabled: 0 },
    })
    expect(never.detail).toContain('has 300,000 live rows and has never been analyzed')
    expect(never.detail).toContain('Autovacuum is turned off for the table')
    expect(never.how_to_fix).toEqual([
      `ANALYZE public.${q(loaded)};`,
      `ALTER TABLE public.${q(loaded)} RESET (autovacuum_enabled, toast.autovacuum_enabled);   -- autovacuum is turned off for it`,
    ])
    expect(stale).toMatchObject({
      severity: 'warning',
      title: `The planner statistics of public.${q(changed)} are stale`,
      metrics: { never_analyzed: 0, n_live_tup: 10_000, analyze_threshold: 1_050 },
    })
    expect(stale.metrics.n_mod_since_analyze).toBeGreaterThanOrEqual(2_000)
    expect(stale.detail).toContain(`past the 1,050 at which autovacuum analyzes it`)
    for (const command of [
      ...never.how_to_fix,
      ...stale.how_to_fix,
      ...never.how_to_investigate,
      ...stale.how_to_investigate,
    ])
      expect(command).not.toMatch(/[\n\r\u2028]/)
    for (const query of [...never.how_to_investigate, ...stale.how_to_investigate]) await sql.unsafe(query)
    await sql.unsafe(never.how_to_fix[0])
    await sql.unsafe(stale.how_to_fix[0])
    await rig.cycle()
    const keys = (await rig.findings('pg_stale_statistics')).map((f) => f.key)
    expect(keys).not.toContain(never.key)
    expect(keys).not.toContain(stale.key)
  })
})

describe('pg_wal against max_wal_size', () => {
  test('a slot keeping WAL: pg_wal past twice max_wal_size (32 MB here), the slot named; its fixes, run as written, shrink it back', async () => {
    await sql`SELECT pg_create_physical_replication_slot('dbm_wal_hold', true)`
    await sql`CREATE TABLE wal_filler (v int)`
    // Eight 16 MB segments the slot keeps: a row written into each, then the switch to the next.
    for (let i = 0; i < 8; i++) {
      await sql`INSERT INTO wal_filler VALUES (${i})`
      await sql`SELECT pg_switch_wal()`
    }
    await sql`CHECKPOINT`
    await rig.cycle()
    const [finding, ...others] = await rig.findings('pg_wal_size')
    expect(others).toEqual([])
    const [dir] = await sql<
      { files: number; size: number }[]
    >`SELECT count(*)::int AS files, sum(size)::float8 AS size FROM pg_ls_waldir()`
    expect(finding).toMatchObject({
      key: 'pg_wal_size:pg_wal',
      severity: 'critical',
      metrics: { wal_files: dir!.files, wal_bytes: dir!.size, max_wal_size_bytes: 32 * 1024 ** 2 },
    })
    expect(finding.title).toStartWith('pg_wal holds ')
    expect(finding.detail).toContain("What keeps it: the inactive physical replication slot 'dbm_wal_hold' keeps ")
    expect(finding.how_to_fix[0]).toBe(
      "SELECT pg_drop_replication_slot('dbm_wal_hold');   -- if its consumer is gone for good",
    )
    expect(finding.how_to_fix.at(-1)).toStartWith('CHECKPOINT;')
    for (const query of finding.how_to_investigate) await sql.unsafe(query)
    await sql.unsafe(finding.how_to_fix[0])
    await sql.unsafe(finding.how_to_fix.at(-1))
    await rig.cycle()
    expect(await rig.findings('pg_wal_size')).toEqual([])
  })
})

describe('checkpoints overdue', () => {
  test('an idle server whose checkpoint is old: nothing; WAL written and no checkpoint past the threshold: named; its CHECKPOINT cures it', async () => {
    // Autovacuum off for the test, so that nothing but the test writes WAL.
    await sql`ALTER SYSTEM SET autovacuum = off`
    await sql`SELECT pg_reload_conf()`
    try {
      await sql`CHECKPOINT`
      await until(
        'the checkpoint 4 s old',
        async () =>
          (await sql`SELECT 1 FROM pg_control_checkpoint() WHERE checkpoint_time < now() - interval '4 s'`).length > 0
            ? true
            : undefined,
        { timeoutMs: 20_000, everyMs: 200 },
      )
      await rig.cycle()
      const [idle] = await sql<
        { since: number }[]
      >`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), redo_lsn)::float8 AS since FROM pg_control_checkpoint()`
      expect(idle!.since).toBeLessThan(65_536)
      expect(await rig.findings('pg_checkpoint_overdue')).toEqual([])

      await sql`CREATE TABLE checkpoint_filler AS SELECT g FROM generate_series(1, 20000) g`
      await rig.cycle()
      const [finding, ...others] = await rig.findings('pg_checkpoint_overdue')
      expect(others).toEqual([])
      expect(finding).toMatchObject({
        key: 'pg_checkpoint_overdue:checkpoint',
        severity: 'warning',
        metrics: { checkpoint_timeout_ms: 300_000 },
      })
      expect(finding.title).toStartWith('No checkpoint for ')
      expect(finding.metrics.wal_since_redo_bytes).toBeGreaterThan(65_536)
      expect(finding.metrics.checkpoint_age_ms).toBeGreaterThanOrEqual(3_000)
      expect(finding.detail).toContain(' against a checkpoint_timeout of 5.0 min, and ')
      for (const query of finding.how_to_investigate) await sql.unsafe(query)
      await sql.unsafe(finding.how_to_fix[0])
      await rig.cycle()
      expect(await rig.findings('pg_checkpoint_overdue')).toEqual([])
    } finally {
      await sql`ALTER SYSTEM RESET autovacuum`
      await sql`SELECT pg_reload_conf()`
    }
  })
})
