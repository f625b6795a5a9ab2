// Restarts, version changes and risky setting changes as findings (server_restarted,
// server_version_changed, setting_changed), from batches ingested as the agents send them, on each
// store and for both engines: a PostgreSQL start that moved is a warning with the uptime, critical with
// the log's crash and recovery (and pg_log_resource_faults then leaves the crash to it), gone after the
// recent minutes; ClickHouse's from its uptime; versions old → new, major or not; settings of the risky
// table old → new with the command that puts the old value back, a value pg_risky_settings judges left
// to it, a setting changed back no finding, hostile values only as escaped constants; and the uptime
// figure of the overview.
import { describe, expect, test } from 'bun:test'
import { HOUR, MINUTE, agentSession, chBatch, pgBatch } from '../support/batches.ts'
import { logEntry, logSection } from '../support/log-events.ts'
import { storeKinds } from '../support/server.ts'

const DAY = 24 * HOUR
const HOSTILE = 'we\'ird\\"; DROP TABLE x; */ --\n\u202ename'
const iso = (ms: number) => new Date(ms).toISOString()

for (const kind of storeKinds) {
  describe(`server changes (${kind})`, () => {
    const s = agentSession(kind)
    const findings = async (id: string, rule: string) =>
      (await s.ok(id, '/doctor')).top_issues.filter((f: any) => f.rule === rule)

    test('PostgreSQL restarted: a warning with the uptime, gone after 15 minutes; a crash makes it critical', async () => {
      s.server.freeze(true)
      try {
        const t = Date.now()
        const started = t - 6 * MINUTE
        const id = await s.ingest(
          pgBatch(`restart-${kind}`, t - 20 * MINUTE, { server_state: { started_at: t - 2 * DAY } }),
        )
        expect(await findings(id, 'server_restarted')).toEqual([])
        await s.ingest(pgBatch(`restart-${kind}`, t - 5 * MINUTE, { server_state: { started_at: started } }))
        const [f] = await findings(id, 'server_restarted')
        expect(f).toMatchObject({
          severity: 'warning',
          key: 'server_restarted',
          category: 'availability',
          title: 'PostgreSQL restarted 6.0 min ago',
          metrics: {
            restarted_at: iso(started),
            uptime_s: 360,
            previous_start_at: iso(t - 2 * DAY),
            crash_signal: null,
            recovery_entries: 0,
          },
        })
        expect(f.detail).toStartWith(
          `PostgreSQL started at ${iso(started)}, up for 6.0 min (previous start ${iso(t - 2 * DAY)}, which ran 2.0 days).`,
        )
        // the uptime figure: from the start to the latest batch's arrival (the frozen clock), on the overview and the doctor's summary
        const overview = await s.ok(id, '/overview')
        expect({ server_started_at: overview.server_started_at, uptime_s: overview.uptime_s }).toEqual({
          server_started_at: iso(started),
          uptime_s: 360,
        })
        expect((await s.ok(id, '/doctor')).metrics_summary).toMatchObject({
          server_started_at: iso(started),
          uptime_s: 360,
        })
        // 4 minutes without data (the server stopped again, say): the uptime counts to the latest data, not to now.
        s.server.advance(4 * MINUTE)
        const [later] = await findings(id, 'server_restarted')
        expect(later).toMatchObject({ title: 'PostgreSQL restarted 10.0 min ago', metrics: { uptime_s: 360 } })
        expect(later.detail).toStartWith(
          `PostgreSQL started at ${iso(started)}, up for 6.0 min at the latest data (${iso(t)}) (previous start`,
        )
        s.server.advance(-4 * MINUTE)
        // 15 minutes after the start: no finding any more (the restart stays on the timeline)
        s.server.advance(9 * MINUTE + 1000)
        expect(await findings(id, 'server_restarted')).toEqual([])
        s.server.advance(-(9 * MINUTE + 1000))

        // A crash: the log's "terminated by signal 9" before the start and crash recovery after it.
        const crashed = await s.ingest(
          pgBatch(`crash-${kind}`, t - 20 * MINUTE, { server_state: { started_at: t - 2 * DAY } }),
        )
        const log = logSection([
          logEntry('server_crash', started - 30_000, {
            severity: 'log',
            message: `server process (PID 4242) was terminated by signal 9: Killed ${HOSTILE}`,
            fields: { signal: 9, process: 'server process (PID 4242)' },
          }),
          logEntry('recovery', started + 1000, {
            message: 'database system was not properly shut down; automatic recovery in progress',
            fields: { phase: 'started', redo_ms: null },
          }),
          logEntry('recovery', started + 3000, {
            message: 'redo done at 0/1A2B3C4 system usage: ... elapsed: 1.23 s',
            fields: { phase: 'redo_done', redo_ms: 1230 },
          }),
        ])
        await s.ingest(
          pgBatch(`crash-${kind}`, t - 5 * MINUTE, { server_state: { started_at: started }, log_events: log }),
        )
        const [c] = await findings(crashed, 'server_restarted')
        expect(c).toMatchObject({
          severity: 'critical',
          title: 'PostgreSQL restarted after a crash 6.0 min ago',
          metrics: {
            uptime_s: 360,
            crash_signal: 9,
            crash_process: 'server process (PID 4242)',
            crash_logged_at: iso(started - 30_000),
            recovery_entries: 2,
          },
        })
        expect(c.detail).toContain(
          `It crashed: the log says at ${iso(started - 30_000)}: "server process (PID 4242) was terminated by signal 9: Killed we'ird\\"; DROP TABLE x; */ -- \u202ename" (server process (PID 4242), signal 9); crash recovery ran (redo done in 1.2 s).`,
        )
        expect(c.recommendation).toContain('signal 9 is usually the kernel OOM killer')
        // one finding per cause: the crash is not pg_log_resource_faults' too
        expect(await findings(crashed, 'pg_log_resource_faults')).toEqual([])
      } finally {
        s.server.freeze(false)
      }
    })

    test('PostgreSQL reinitialized in place after a crash (start time unchanged): critical from the log', async () => {
      const t = Date.now()
      const id = await s.ingest(
        pgBatch(`reinit-${kind}`, t - 20 * MINUTE, { server_state: { started_at: t - 2 * DAY } }),
      )
      const log = logSection([
        logEntry('server_crash', t - 4 * MINUTE, {
          message: 'server process (PID 77) was terminated by signal 11: Segmentation fault',
          fields: { signal: 11, process: 'server process (PID 77)' },
        }),
        logEntry('recovery', t - 4 * MINUTE + 500, {
          message: 'database system was not properly shut down; automatic recovery in progress',
          fields: { phase: 'started', redo_ms: null },
        }),
      ])
      await s.ingest(
        pgBatch(`reinit-${kind}`, t - 2 * MINUTE, { server_state: { started_at: t - 2 * DAY }, log_events: log }),
      )
      const [f] = await findings(id, 'server_restarted')
      expect(f).toMatchObject({
        severity: 'critical',
        metrics: { crash_signal: 11, recovery_entries: 1, previous_start_at: null },
      })
      expect(f.detail).toStartWith(`PostgreSQL reinitialized after a crash at ${iso(t - 4 * MINUTE + 500)}`)
      expect(f.detail).toContain(`the postmaster itself has run since ${iso(t - 2 * DAY)}`)
      expect(await findings(id, 'pg_log_resource_faults')).toEqual([])
    })

    test('versions: a minor update is info, a new major a warning naming the first version and the last', async () => {
      const t = Date.now()
      const id = await s.ingest(pgBatch(`version-${kind}`, t - 30 * MINUTE, {}, '17.2'))
      expect(await findings(id, 'server_version_changed')).toEqual([])
      await s.ingest(pgBatch(`version-${kind}`, t - 20 * MINUTE, {}, '17.3'))
      const [minor] = await findings(id, 'server_version_changed')
      expect(minor).toMatchObject({
        severity: 'info',
        title: 'PostgreSQL updated: 17.2 → 17.3',
        metrics: { version_before: '17.2', version_now: '17.3', changed_at: iso(t - 20 * MINUTE), version_changes: 1 },
      })
      expect(minor.how_to_fix).toEqual([])
      await s.ingest(pgBatch(`version-${kind}`, t - 10 * MINUTE, {}, '16.4'))
      const [down] = await findings(id, 'server_version_changed')
      expect(down).toMatchObject({
        severity: 'warning',
        title: 'PostgreSQL downgraded: 17.2 → 16.4',
        metrics: { version_before: '17.2', version_now: '16.4', version_changes: 2 },
      })
      await s.ingest(pgBatch(`version-${kind}`, t - 5 * MINUTE, {}, '18.1'))
      const [major] = await findings(id, 'server_version_changed')
      expect(major).toMatchObject({
        severity: 'warning',
        title: 'PostgreSQL upgraded to a new major version: 17.2 → 18.1',
        metrics: { version_changes: 3 },
      })
      expect(major.detail).toContain('statement ids (queryid) change with a major version')
      expect(major.how_to_investigate[0]).toContain('pg_available_extensions')
      // 24 hours after the first change: still the last two; after the last: none
      s.server.advance(DAY - 15 * MINUTE)
      expect((await findings(id, 'server_version_changed'))[0].metrics).toMatchObject({
        version_before: '17.3',
        version_now: '18.1',
        version_changes: 2,
      })
      s.server.advance(15 * MINUTE)
      expect(await findings(id, 'server_version_changed')).toEqual([])
      s.server.advance(-DAY)
    })

    test('risky settings changed: old → new with the command that puts it back; fsync off left to pg_risky_settings; changed back: none', async () => {
      const t = Date.now()
      const name = `settings-${kind}`
      const before = {
        fsync: 'on',
        synchronous_commit: 'on',
        max_connections: '100',
        statement_timeout: '30s',
        work_mem: '4MB',
        archive_library: HOSTILE,
        ssl: 'on',
      }
      const id = await s.ingest(
        pgBatch(name, t - 30 * MINUTE, { server_state: { started_at: t - DAY, settings: before } }),
      )
      await s.ingest(
        pgBatch(name, t - 20 * MINUTE, {
          server_state: {
            started_at: t - DAY,
            settings: {
              ...before,
              fsync: 'off',
              synchronous_commit: 'off',
              max_connections: '50',
              statement_timeout: '0',
              work_mem: '64MB',
              archive_library: '',
              ssl: 'off',
            },
          },
          database_stats: { fsync_on: 0 },
        }),
      )
      await s.ingest(
        pgBatch(name, t - 10 * MINUTE, {
          server_state: {
            started_at: t - DAY,
            settings: {
              ...before,
              fsync: 'off',
              synchronous_commit: 'off',
              max_connections: '50',
              statement_timeout: '0',
              work_mem: '64MB',
              archive_library: '',
              ssl: 'on',
            },
          },
          database_stats: { fsync_on: 0 },
        }),
      )
      const found = await findings(id, 'setting_changed')
      const byName = Object.fromEntries(found.map((f: any) => [f.metrics.setting, f]))
      // work_mem is not in the risky table; ssl went off and back on; fsync off is pg_risky_settings' finding
      expect(Object.keys(byName).sort()).toEqual([
        'archive_library',
        'max_connections',
        'statement_timeout',
        'synchronous_commit',
      ])
      expect((await findings(id, 'pg_risky_settings')).map((f: any) => f.key)).toEqual(['pg_risky_settings:fsync'])
      expect(byName.synchronous_commit).toMatchObject({
        severity: 'warning',
        key: 'setting_changed:synchronous_commit',
        title: 'synchronous_commit changed: on → off',
        metrics: { value_before: 'on', value_now: 'off', changed_at: iso(t - 20 * MINUTE), changes: 1 },
        how_to_fix: [
          "ALTER SYSTEM SET synchronous_commit = 'on'; SELECT pg_reload_conf();   -- only if the change was not meant",
        ],
      })
      expect(byName.synchronous_commit.detail).toStartWith(
        `synchronous_commit changed from 'on' to 'off' at ${iso(t - 20 * MINUTE)}. Why it matters: weaker (off, local)`,
      )
      expect(byName.max_connections).toMatchObject({
        severity: 'warning',
        metrics: { value_before: '100', value_now: '50' },
      })
      expect(byName.max_connections.how_to_fix[0]).toBe(
        "ALTER SYSTEM SET max_connections = '100';   -- only if the change was not meant; then restart the server (it applies at a start only)",
      )
      expect(byName.statement_timeout).toMatchObject({
        severity: 'warning',
        metrics: { value_before: '30s', value_now: '0' },
      })
      // the hostile value: an escaped constant in the detail and the command, one line, in the metrics as it was
      const lib = byName.archive_library
      expect(lib).toMatchObject({ severity: 'warning', metrics: { value_before: HOSTILE, value_now: '' } })
      expect(lib.detail).toContain(
        `archive_library changed from E'we''ird\\\\"; DROP TABLE x; */ --\\n\\u202Ename' to '' at`,
      )
      expect(lib.how_to_fix).toEqual([
        `ALTER SYSTEM SET archive_library = E'we''ird\\\\"; DROP TABLE x; */ --\\n\\u202Ename'; SELECT pg_reload_conf();   -- only if the change was not meant`,
      ])
      expect(lib.title).not.toContain('\n')
      expect(lib.title).not.toContain('\u202e')

      // turned back on: fsync's return is an info finding of this rule (pg_risky_settings has nothing to say)
      await s.ingest(
        pgBatch(name, t - 5 * MINUTE, {
          server_state: {
            started_at: t - DAY,
            settings: {
              ...before,
              synchronous_commit: 'off',
              max_connections: '50',
              statement_timeout: '0',
              work_mem: '64MB',
              archive_library: '',
            },
          },
          database_stats: { fsync_on: 1 },
        }),
      )
      const again = Object.fromEntries((await findings(id, 'setting_changed')).map((f: any) => [f.metrics.setting, f]))
      expect(again.fsync).toBeUndefined() // off → on within the window: the value is back, nothing changed
      expect(await findings(id, 'pg_risky_settings')).toEqual([])
      // after 24 hours the findings go
      s.server.advance(DAY)
      expect(await findings(id, 'setting_changed')).toEqual([])
      s.server.advance(-DAY)
    })

    test('ClickHouse: a restart from its uptime, a new release, risky profile settings', async () => {
      s.server.freeze(true)
      try {
        const t = s.server.deps.clock()
        const name = `ch-${kind}`
        const batch = (at: number, uptime: number, version: string, settings: Record<string, string>, extra = {}) => {
          const b = chBatch(name, at, { server_metrics: { uptime_s: uptime }, server_state: { settings }, ...extra })
          b.database.engine_version = version
          return b
        }
        const id = await s.ingest(
          batch(t - 30 * MINUTE, 86_400, '25.8.2.29', { max_memory_usage: '10000000000', max_threads: '8' }),
        )
        await s.ingest(
          batch(
            t - 3 * MINUTE,
            120,
            '26.1.2.1',
            { max_memory_usage: '0', max_threads: '16', readonly: '1' },
            {
              log_events: logSection([
                logEntry('server_crash', t - 6 * MINUTE, {
                  severity: 'panic',
                  message: 'Signal 11',
                  fields: { signal: 11, process: 'thread 12345', version: '25.8.2.29' },
                }),
              ]),
            },
          ),
        )
        const [restart] = await findings(id, 'server_restarted')
        expect(restart).toMatchObject({
          severity: 'critical',
          title: 'ClickHouse restarted after a crash 5.0 min ago',
          metrics: {
            restarted_at: iso(t - 5 * MINUTE),
            uptime_s: 300,
            crash_signal: 11,
            crash_process: 'thread 12345',
          },
        })
        expect(restart.how_to_investigate[1]).toContain('system.crash_log')
        expect((await s.ok(id, '/overview')).uptime_s).toBe(300)

        const [version] = await findings(id, 'server_version_changed')
        expect(version).toMatchObject({
          severity: 'warning',
          title: 'ClickHouse upgraded to a new major version: 25.8.2.29 → 26.1.2.1',
        })
        expect(version.detail).toContain('Backward Incompatible Change')

        const byName = Object.fromEntries(
          (await findings(id, 'setting_changed')).map((f: any) => [f.metrics.setting, f]),
        )
        expect(Object.keys(byName).sort()).toEqual(['max_memory_usage', 'max_threads', 'readonly'])
        expect(byName.max_memory_usage).toMatchObject({
          severity: 'warning',
          metrics: { value_before: '10000000000', value_now: '0' },
          how_to_fix: [],
        })
        expect(byName.readonly).toMatchObject({
          severity: 'warning',
          title: 'readonly changed: default → 1',
          metrics: { value_before: null, value_now: '1' },
        })
        expect(byName.readonly.detail).toStartWith("readonly changed from not set (the default) to '1' at")
        expect(byName.readonly.how_to_investigate[0]).toBe(
          "SELECT name, value, changed, description FROM system.settings WHERE name = 'readonly';",
        )
        expect(byName.max_threads).toMatchObject({ severity: 'info', metrics: { value_before: '8', value_now: '16' } })
      } finally {
        s.server.freeze(false)
      }
    })
  })
}
