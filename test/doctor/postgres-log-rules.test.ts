// The doctor's rules over the server log, from log_events sections ingested as the agent sends them
// (a test server on each store; the log reader itself is tested against real servers under test/agent):
// an error rate far above its baseline names the top SQLSTATE and statement; a burst of failed logins
// names the user and client; autovacuum cancelled 3 times on one table names the blocker and vacuums the
// table; requested checkpoints give the max_wal_size computed from the WAL per checkpoint_timeout; temp
// files name the statement with the largest single file and a SET LOCAL work_mem sized from it; out of
// memory is critical; a logged deadlock names both statements; the archiver finding gains the log's exit code and WAL file. Hostile names (quotes,
// backslashes, comment ends, newlines, bidi characters) reach fix commands only escaped.
// What a new user found (issue 25): checkpoints forced by CHECKPOINT or a shutdown are judged by the log's
// reasons, never a max_wal_size; memory runs low on a host without swap; a cancelled autovacuum is joined
// to the lock wait logged at that moment; one work_mem per statement; no fix sets what is already on.
import { describe, expect, test } from 'bun:test'
import type { HostStatus, LogEvent } from '../../src/shared/wire.ts'
import { agentSession, pgBatch } from '../support/batches.ts'
import { logEntry, logSection } from '../support/log-events.ts'
import { storeKinds } from '../support/server.ts'

const MINUTE = 60_000
const GB = 1024 ** 3
const ON = {
  log_checkpoints: 'on',
  log_lock_waits: 'on',
  log_temp_files: '0',
  max_wal_size: '1GB',
  checkpoint_timeout: '5min',
  checkpoint_completion_target: '0.9',
}
const host = (memory: HostStatus['memory']): HostStatus =>
  ({
    source: 'proc',
    on_host: true,
    evidence: 'test',
    cpu_count: 4,
    cpu: null,
    load: null,
    memory,
    filesystems: [],
    devices: [],
  }) as HostStatus
const HOSTILE = 'we\'ird\\"; DROP TABLE x; */ --\n\u202ename'

for (const kind of storeKinds) {
  describe(`log rules (${kind})`, () => {
    const s = agentSession(kind)
    const now = () => Date.now()
    const findings = async (id: string, rule: string) =>
      (await s.ok(id, '/doctor')).top_issues.filter((f: any) => f.rule === rule)

    test('an error rate far above its baseline names the top SQLSTATE and statement; failed logins name user and client', async () => {
      const t = now()
      // baseline: 24 errors over the last day (1 an hour); now 120 in the last minutes, 80 of them dropped by the agent
      const baseline = Array.from({ length: 24 }, (_, i) =>
        logEntry('error', t - (i + 1) * 55 * MINUTE, {
          severity: 'error',
          sqlstate: '22012',
          fingerprint: 'division by zero',
        }),
      )
      const dup = (i: number) =>
        logEntry('error', t - 3 * MINUTE + i * 100, {
          severity: 'error',
          sqlstate: '23505',
          message: 'duplicate key value violates unique constraint "orders_pkey"',
          fingerprint: 'duplicate key value violates unique constraint ?',
          statement: 'INSERT INTO orders (id) VALUES ($1)',
          user: 'app',
        })
      const sent = Array.from({ length: 40 }, (_, i) => dup(i))
      const dropped = Array.from({ length: 80 }, (_, i) => dup(40 + i))
      const auth = Array.from({ length: 37 }, (_, i) =>
        logEntry('auth_failed', t - 2 * MINUTE + i * 100, {
          severity: 'fatal',
          sqlstate: '28P01',
          message: `password authentication failed for user "${HOSTILE}"`,
          user: HOSTILE,
          client: `10.1.2.3:${40000 + i}`,
          fields: { method: 'scram-sha-256' },
        }),
      )
      const id = await s.ingest(
        pgBatch(`errors-${kind}`, t - 60_000, { log_events: logSection([...baseline, ...sent, ...auth], dropped) }),
      )

      const [rate] = await findings(id, 'pg_log_error_rate')
      expect(rate.severity).toBe('warning')
      expect(rate.metrics).toMatchObject({
        errors_recent: 120,
        errors_baseline: 24,
        per_minute: 12,
        top_sqlstate: '23505',
        top_count: 40,
      })
      expect(rate.detail).toContain('SQLSTATE 23505')
      expect(rate.detail).toContain('INSERT INTO orders (id) VALUES ($1)')

      const [burst] = await findings(id, 'pg_log_auth_failures')
      expect(burst).toMatchObject({ severity: 'warning', key: `pg_log_auth_failures:${HOSTILE}` })
      expect(burst.metrics).toMatchObject({
        failed_logins: 37,
        top_user: HOSTILE,
        top_client: '10.1.2.3',
        top_count: 37,
      })
      expect(burst.detail).toContain('from 10.1.2.3 (37)')
      // the user reaches the investigation query as an escaped constant only
      expect(burst.how_to_investigate).toContain(
        `SELECT rolname, rolcanlogin, rolvaliduntil FROM pg_roles WHERE rolname = E'we''ird\\\\"; DROP TABLE x; */ --\\n\\u202Ename';`,
      )
    })

    test('autovacuum cancelled 3 times on a table names the blocker; a manual VACUUM of the escaped table', async () => {
      const t = now()
      const table = `shop.${HOSTILE}.orders`
      const cancels: LogEvent[] = [0, 1, 2].map((i) =>
        logEntry('autovacuum_cancelled', t - (10 + i) * MINUTE, {
          severity: 'error',
          sqlstate: '57014',
          message: 'canceling autovacuum task',
          detail: `automatic vacuum of table "${table}"`,
          fields: { table, blocker_pid: 9001 },
          ...(i === 0 ? { statement: 'ALTER TABLE orders ADD COLUMN note text', user: 'migrator' } : {}),
        }),
      )
      // two on another table: under the threshold
      cancels.push(
        ...[0, 1].map((i) =>
          logEntry('autovacuum_cancelled', t - (20 + i) * MINUTE, {
            severity: 'error',
            fields: { table: 'shop.public.items' },
          }),
        ),
      )
      const id = await s.ingest(pgBatch(`vacuum-${kind}`, t - 60_000, { log_events: logSection(cancels) }))
      const found = await findings(id, 'pg_log_autovacuum_cancelled')
      expect(found).toHaveLength(1)
      expect(found[0]).toMatchObject({
        severity: 'warning',
        key: `pg_log_autovacuum_cancelled:${table}`,
        metrics: { cancellations: 3, blocker_pids: '9001' },
      })
      expect(found[0].detail).toContain('pid 9001 running: ALTER TABLE orders ADD COLUMN note text (user migrator)')
      expect(found[0].how_to_fix).toEqual([
        `VACUUM (VERBOSE, ANALYZE) U&"we'ird\\\\""; DROP TABLE x; */ --\\000A\\202Ename".orders;   -- at a quiet moment; not cancelled by lock requests`,
      ])
    })

    test('checkpoints for WAL give a max_wal_size from the WAL per checkpoint_timeout; temp files a SET LOCAL work_mem', async () => {
      const t = now()
      // 6 checkpoints started for WAL, 2 for time, 5 minutes apart, 800 MB of WAL each
      const checkpoints = Array.from({ length: 8 }, (_, i) =>
        logEntry('checkpoint', t - (5 + 5 * i) * MINUTE, {
          message: 'checkpoint complete',
          fields: { reason: i < 6 ? 'wal' : 'time', distance_bytes: 800 * 1024 * 1024 },
        }),
      )
      const frequent = logEntry('checkpoints_too_frequent', t - 6 * MINUTE, {
        message: 'checkpoints are occurring too frequently (22 seconds apart)',
        fields: { seconds_apart: 22 },
      })
      const spill = (size: number, i: number) =>
        logEntry('temp_file', t - (2 + i) * MINUTE, {
          message: `temporary file: path "base/pgsql_tmp/pgsql_tmp1.${i}", size ${size}`,
          statement: `SELECT * FROM orders ORDER BY note /* */ -- ${HOSTILE}`,
          fields: { size_bytes: size, path: `base/pgsql_tmp/pgsql_tmp1.${i}` },
        })
      // three files of one statement: the largest single file (300 MB), not their sum, sizes work_mem:
      // twice it, 600 MB, rounded up to an eighth of 512 MB: 640MB
      const spills = [spill(100 * 1024 * 1024, 0), spill(300 * 1024 * 1024, 1), spill(200 * 1024 * 1024, 2)]
      const id = await s.ingest(
        pgBatch(`checkpoints-${kind}`, t - 60_000, {
          server_state: {
            started_at: t - 86_400_000,
            settings: { checkpoint_timeout: '5min', checkpoint_completion_target: '0.9', max_wal_size: '1GB' },
          },
          log_events: logSection([...checkpoints, frequent, ...spills]),
        }),
      )
      const [cp] = await findings(id, 'pg_requested_checkpoints')
      // 7 intervals of 5 minutes held 7 × 800 MB: 800 MB per checkpoint_timeout; × 1.9 × 1.25 = 1900 MB → 2GB
      expect(cp.metrics).toMatchObject({
        log_wal_checkpoints: 6,
        log_time_checkpoints: 2,
        too_frequent_warnings: 1,
        mean_distance_bytes: 800 * 1024 * 1024,
        wal_per_timeout_bytes: 800 * 1024 * 1024,
        max_wal_size_to_set: '2GB',
      })
      expect(cp.severity).toBe('critical')
      expect(cp.how_to_fix[0]).toStartWith("ALTER SYSTEM SET max_wal_size = '2GB'; SELECT pg_reload_conf();")
      expect(cp.detail).toContain('22 seconds apart')

      const [temp] = await findings(id, 'pg_temp_files')
      expect(temp.metrics).toMatchObject({
        temp_bytes: 600 * 1024 * 1024,
        log_temp_files: 3,
        log_largest_file_bytes: 300 * 1024 * 1024,
        work_mem_for_largest_mb: 640,
      })
      expect(temp.how_to_fix[0]).toStartWith(
        "BEGIN; SET LOCAL work_mem = '640MB'; <the statement>; COMMIT;   -- for the statement SELECT * FROM orders ORDER BY note / * * / --",
      )
      // one line, its comment unbroken by the statement's text
      expect(temp.how_to_fix[0]).not.toContain('\n')
      expect(temp.how_to_fix[0].indexOf('*/')).toBe(-1)
      // one work_mem for the statement, the log's, explained; log_temp_files is on (the log has spills)
      expect(temp.how_to_fix).toHaveLength(1)
      expect(temp.how_to_fix[0]).toContain(
        'alone: twice its largest temp file (300.0 MB); work_mem is per sort or hash node and per process, so for this statement only, not server-wide',
      )
    })

    test('checkpoints forced by CHECKPOINT and a shutdown are judged by the log: none, or an info naming them, never max_wal_size', async () => {
      const t = now()
      const checkpoint = (reason: string, minutesAgo: number) =>
        logEntry('checkpoint', t - minutesAgo * MINUTE, {
          message: 'checkpoint complete',
          fields: { reason, distance_bytes: 1024 * 1024 },
        })
      // The user's case: 2 manual CHECKPOINTs, a shutdown checkpoint and a timed one; the statistics call 3 of 4 requested.
      const few = [
        checkpoint('immediate force wait', 5),
        checkpoint('immediate force wait', 9),
        checkpoint('shutdown immediate', 20),
        checkpoint('time', 40),
      ]
      const quiet = await s.ingest(
        pgBatch(`forced-few-${kind}`, t - 60_000, {
          server_state: { started_at: t - 86_400_000, settings: ON },
          bgwriter: { checkpoints_timed: 1, checkpoints_req: 3 },
          log_events: logSection(few),
        }),
      )
      expect(await findings(quiet, 'pg_requested_checkpoints')).toEqual([])

      // A job running CHECKPOINT every 10 minutes: an info naming the pattern, no max_wal_size, no log_checkpoints (on).
      const job = [
        ...Array.from({ length: 6 }, (_, i) => checkpoint('immediate force wait', 5 + 10 * i)),
        checkpoint('time', 70),
      ]
      const forced = await s.ingest(
        pgBatch(`forced-job-${kind}`, t - 60_000, {
          server_state: { started_at: t - 86_400_000, settings: ON },
          bgwriter: { checkpoints_timed: 1, checkpoints_req: 6 },
          log_events: logSection(job),
        }),
      )
      const [cp] = await findings(forced, 'pg_requested_checkpoints')
      expect(cp).toMatchObject({
        severity: 'info',
        title: 'Checkpoints are forced by CHECKPOINT commands or backups',
        metrics: { log_forced_checkpoints: 6, log_wal_checkpoints: 0, max_wal_size_to_set: null },
      })
      expect(cp.detail).toContain('"checkpoint starting: immediate force wait" ×6')
      expect(cp.detail).toContain('about every 10.0 min (a scheduled job)')
      expect(cp.how_to_fix.join('\n')).not.toContain('max_wal_size')
      expect(cp.how_to_fix.join('\n')).not.toContain('log_checkpoints')
    })

    test('memory low on a host without swap: a warning, critical lower; a cancelled autovacuum names the waiter of the lock wait logged then', async () => {
      const t = now()
      // 825 MB of 24 GB available (3.4 %), no swap: critical; 2 GB of 24 GB (8.3 %): a warning; 10 GB: nothing.
      const low = await s.ingest(
        pgBatch(`noswap-low-${kind}`, t - 60_000, {
          host: host({
            total_bytes: 24 * GB,
            available_bytes: 825 * 1024 * 1024,
            swap_total_bytes: 0,
            swap_used_bytes: 0,
          }),
        }),
      )
      const [critical] = await findings(low, 'host_memory_pressure')
      expect(critical).toMatchObject({
        severity: 'critical',
        title: 'The host is low on memory: 3.4 % available, and no swap',
        metrics: { available_bytes: 825 * 1024 * 1024, swap_total_bytes: 0 },
      })
      const some = await s.ingest(
        pgBatch(`noswap-some-${kind}`, t - 60_000, {
          host: host({ total_bytes: 24 * GB, available_bytes: 2 * GB, swap_total_bytes: 0, swap_used_bytes: 0 }),
        }),
      )
      expect((await findings(some, 'host_memory_pressure')).map((f: any) => f.severity)).toEqual(['warning'])
      const plenty = await s.ingest(
        pgBatch(`noswap-plenty-${kind}`, t - 60_000, {
          host: host({ total_bytes: 24 * GB, available_bytes: 10 * GB, swap_total_bytes: 0, swap_used_bytes: 0 }),
        }),
      )
      expect(await findings(plenty, 'host_memory_pressure')).toEqual([])

      // PostgreSQL 17's own sequence: the waiter logs its lock wait naming the autovacuum (pid 700+i) as holder, then the worker is cancelled.
      const table = 'app.public.av'
      const events: LogEvent[] = []
      for (let i = 0; i < 3; i++) {
        const ts = t - (10 + i) * MINUTE
        events.push(
          logEntry('lock_wait', ts - 2, {
            pid: 900 + i,
            user: 'migrator',
            message: `process ${900 + i} still waiting for ShareUpdateExclusiveLock on relation 16456 of database 16384 after 1000.1 ms`,
            statement: `LOCK TABLE av IN SHARE UPDATE EXCLUSIVE MODE /* */ ${HOSTILE}`,
            fields: {
              mode: 'ShareUpdateExclusiveLock',
              relation: 16456,
              wait_ms: 1000.1,
              holders: [700 + i],
              waiters: [900 + i],
            },
          }),
          logEntry('autovacuum_cancelled', ts, {
            pid: 700 + i,
            severity: 'error',
            sqlstate: '57014',
            message: 'canceling autovacuum task',
            fields: { table },
          }),
        )
      }
      // a lock wait of an unrelated session at the same moment, holding pid 1: not joined
      events.push(
        logEntry('lock_wait', t - 10 * MINUTE - 1, {
          pid: 555,
          statement: 'UPDATE other SET x = 1',
          fields: { mode: 'ShareLock', holders: [1] },
        }),
      )
      const id = await s.ingest(
        pgBatch(`vacuum-join-${kind}`, t - 60_000, {
          server_state: { started_at: t - 86_400_000, settings: ON },
          log_events: logSection(events),
        }),
      )
      const [cancelled] = await findings(id, 'pg_log_autovacuum_cancelled')
      expect(cancelled.metrics).toEqual({ cancellations: 3, blocker_pids: '900,901,902', lock_waits_joined: 3 })
      expect(cancelled.detail).toContain(
        'The lock was wanted by pid 900, 901, 902 (ShareUpdateExclusiveLock) running: LOCK TABLE av IN SHARE UPDATE EXCLUSIVE MODE /* */ we',
      )
      expect(cancelled.detail).toContain('(user migrator), as its lock waits logged at the same moment show.')
      expect(cancelled.detail).not.toContain('UPDATE other')
      expect(cancelled.how_to_investigate.join('\n')).toContain(
        '-- the statement that wanted the lock: LOCK TABLE av IN SHARE UPDATE EXCLUSIVE MODE / * * / we',
      )
      // log_lock_waits is on: never advised
      expect(cancelled.how_to_fix).toEqual([
        'VACUUM (VERBOSE, ANALYZE) public.av;   -- at a quiet moment; not cancelled by lock requests',
      ])
    })

    test('out of memory in the last hour is critical, naming the first; a deadlock names both statements; the archiver finding gains exit code and WAL file', async () => {
      const t = now()
      const id = await s.ingest(
        pgBatch(`faults-${kind}`, t - 60_000, {
          server_state: { started_at: t - 86_400_000, settings: ON },
          archiver: {
            archive_mode: 'on',
            archive_command_set: true,
            archived_count: 10,
            last_archived_wal: '000000010000000000000009',
            last_archived_time: t - 3_600_000,
            failed_count: 4,
            last_failed_wal: '00000001000000000000000A',
            last_failed_time: t - 120_000,
            ready_count: 3,
            ready_bytes: 48 * 1024 * 1024,
            oldest_ready_time: t - 1_800_000,
            stats_reset: null,
          } as any,
          log_events: logSection([
            logEntry('out_of_memory', t - 20 * MINUTE, {
              severity: 'error',
              sqlstate: '53200',
              message: 'out of memory',
              detail: 'Failed on request of size 1048576.',
              statement: 'SELECT big()',
            }),
            logEntry('out_of_memory', t - 10 * MINUTE, {
              severity: 'error',
              sqlstate: '53200',
              message: 'out of memory (second)',
            }),
            logEntry('deadlock', t - 5 * MINUTE, {
              severity: 'error',
              sqlstate: '40P01',
              message: 'deadlock detected',
              fields: {
                pids: [11, 12],
                statements: ['UPDATE a SET x = 1 WHERE id = 1', `UPDATE b SET y = 2 /* */ ${HOSTILE}`],
              },
            }),
            logEntry('archive_failed', t - 130_000, {
              severity: 'warning',
              message: 'archive command failed with exit code 12',
              fields: { exit_code: 12, wal_file: '00000001000000000000000A' },
            }),
          ]),
        }),
      )
      const [oom] = await findings(id, 'pg_log_resource_faults')
      expect(oom).toMatchObject({
        severity: 'critical',
        metrics: { out_of_memory: 2, first_at: new Date(t - 20 * MINUTE).toISOString() },
      })
      expect(oom.detail).toContain('"out of memory" Failed on request of size 1048576., while running: SELECT big()')
      const [deadlock] = await findings(id, 'pg_deadlocks')
      expect(deadlock.metrics).toEqual({ deadlocks_last_hour: 1, deadlocks_last_day: 1 })
      expect(deadlock.detail).toContain('(1) UPDATE a SET x = 1 WHERE id = 1; (2) UPDATE b SET y = 2')
      expect(deadlock.how_to_investigate.at(-1)).toStartWith(
        '-- side 2 of the latest deadlock: UPDATE b SET y = 2 / * * / we',
      )
      // log_lock_waits is on: not advised
      expect(deadlock.how_to_fix).toEqual([])
      const [archiver] = await findings(id, 'pg_archiver_failing')
      expect(archiver.metrics).toMatchObject({ log_exit_code: 12, log_wal_file: '00000001000000000000000A' })
      expect(archiver.detail).toContain("exit code 12 on WAL file '00000001000000000000000A'")
    })
  })
}
