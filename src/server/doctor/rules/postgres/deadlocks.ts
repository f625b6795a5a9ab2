// Deadlocks detected in this database (pg_stat_database.deadlocks deltas) over the last hour and the
// last day. PostgreSQL breaks each one by aborting one of the transactions, so each is a failed
// request, and they come from the application taking locks in inconsistent orders. Thresholds: a few
// a day are worth fixing (info), 5 in an hour is a pattern (warning), and netdata's
// postgres_db_deadlocks_rate alarm fires at 10 a minute (600 an hour: critical). With log_events, the
// latest logged deadlock of the day names the statements of both sides (and counts when the
// pg_stat_database counters are not collected).
import type { DoctorContext } from '../../context.ts'
import { commentText } from '../../sql-text.ts'
import { type Rule, severityAbove } from '../../types.ts'
import { logEntries, logExcerpt, settings } from './log-evidence.ts'

const defaults = {
  warning_per_hour: 5,
  critical_per_hour: 600,
  info_per_day: 1,
}

const HOUR = 3_600_000

async function deadlocksOver(ctx: DoctorContext, windowMs: number): Promise<number> {
  return (await ctx.sums('database', windowMs)).deadlocks ?? 0
}

export const deadlocks: Rule<typeof defaults> = {
  id: 'pg_deadlocks',
  summary: 'Deadlocks detected in the database over the last hour and day: each one is a failed transaction.',
  collectors: ['database_stats'],
  engine: 'postgres',
  category: 'reliability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(deadlocks)
    const [counted, logged] = await Promise.all([
      Promise.all([deadlocksOver(ctx, HOUR), deadlocksOver(ctx, 24 * HOUR)]),
      logEntries(ctx, ['deadlock'], 24 * HOUR),
    ])
    const loggedHour = logged.filter((e) => e.ts >= ctx.now - HOUR).length
    const hour = Math.max(counted[0], loggedHour)
    const day = Math.max(counted[1], logged.length)
    const latest = logged[0]
    const statements = latest
      ? Array.isArray(latest.fields.statements)
        ? latest.fields.statements.filter((x): x is string => typeof x === 'string')
        : latest.statement
          ? [latest.statement]
          : []
      : []
    const fromLog = latest
      ? ` The latest in the log, at ${new Date(latest.ts).toISOString()}: ${statements.length > 0 ? statements.map((st, i) => `(${i + 1}) ${logExcerpt(st)}`).join('; ') : logExcerpt(latest.detail ?? latest.message)}.`
      : ''
    const severity =
      severityAbove(hour, t.warning_per_hour, t.critical_per_hour) ?? (day >= t.info_per_day ? 'info' : undefined)
    if (!severity) return []
    const lockWaitsOn = /^(on|true|yes|1)$/i.test((await settings(ctx))?.log_lock_waits ?? '')
    return [
      {
        severity,
        title:
          hour > 0
            ? `${hour} deadlock${hour === 1 ? '' : 's'} in the last hour`
            : `${day} deadlock${day === 1 ? '' : 's'} in the last day`,
        detail:
          `PostgreSQL detected ${hour} deadlock${hour === 1 ? '' : 's'} in this database in the last hour and ${day} in the last 24 hours. ` +
          'Each time it aborted one of the transactions involved ("deadlock detected"), so each is a failed statement the application had to retry or report.' +
          fromLog,
        recommendation:
          'The server log names both sides of every deadlock (the statements and the rows). Make the transactions involved lock rows and tables in one consistent order ' +
          '(for example SELECT ... WHERE id = ANY(...) ORDER BY id FOR UPDATE before updating several rows), keep them short, and retry on SQLSTATE 40P01.',
        how_to_investigate: [
          "grep -A 8 'deadlock detected' \"$(psql -Atc \"SELECT current_setting('data_directory') || '/' || current_setting('log_directory')\")\"/*.log | tail -50",
          'SELECT datname, deadlocks, stats_reset FROM pg_stat_database WHERE datname = current_database();',
          "SELECT name, setting FROM pg_settings WHERE name IN ('deadlock_timeout', 'log_lock_waits');",
          ...statements.slice(0, 2).map((st, i) => `-- side ${i + 1} of the latest deadlock: ${commentText(st, 300)}`),
        ],
        how_to_fix: lockWaitsOn
          ? []
          : [
              'ALTER SYSTEM SET log_lock_waits = on; SELECT pg_reload_conf();   -- also logs lock waits longer than deadlock_timeout, the near misses',
            ],
        metrics: { deadlocks_last_hour: hour, deadlocks_last_day: day },
      },
    ]
  },
}
