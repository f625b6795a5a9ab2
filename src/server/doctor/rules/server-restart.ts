// The database server restarted in the last minutes (Altinity's ServerRestartRecently): a warning
// naming when and the uptime since, from the restarts ingest derives (events/events.ts: PostgreSQL's
// pg_postmaster_start_time(), ClickHouse's start computed from uptime()). When the server's log says it
// crashed (a server_crash entry: PostgreSQL's "terminated by signal", ClickHouse's system.crash_log) or
// ran crash recovery around that start, it is critical and names what the log says. PostgreSQL also
// restarts in place after a crash (restart_after_crash: every session is reset, crash recovery runs)
// without a new pg_postmaster_start_time(); a recovery entry in the last minutes counts as such a
// restart. One finding per cause: pg_log_resource_faults leaves out the crash this finding carries.
import type { StoredLogEntry } from '../../store/logs/types.ts'
import type { DoctorContext } from '../context.ts'
import { type Rule, duration } from '../types.ts'
import { logEntries, logExcerpt, numberField, textField } from './postgres/log-evidence.ts'

const defaults = {
  /** A restart this recent is a finding. */
  recent_minutes: 15,
  /** Crash lines of the log this long before the start belong to it. */
  crash_lookback_minutes: 15,
}

const MINUTE = 60_000
const iso = (ms: number) => new Date(ms).toISOString()

/** What the store and the log say of the latest restart within the recent minutes. */
export interface RecentRestart {
  /** A new server start (restart), or a PostgreSQL reinitialization in place after a crash (reinit). */
  how: 'restart' | 'reinit'
  /** When the server (or, reinit, its sessions) started again. */
  at: number
  /** The start before it (restart only, when known). */
  previous: number | null
  /** The postmaster's start as the baseline keeps it (reinit: unchanged by the crash). */
  started_at: number | null
  /** The log's crash entry around it (the latest), and its recovery entries. */
  crash: StoredLogEntry | undefined
  recovery: StoredLogEntry[]
}

/** The latest restart in the last `recent_minutes`, with its log evidence; null when none (memoised per diagnosis). */
export function recentRestart(ctx: DoctorContext): Promise<RecentRestart | null> {
  return ctx.once('recent-restart', async () => {
    const t = ctx.thresholds(serverRestarted)
    const recentMs = t.recent_minutes * MINUTE
    const lookbackMs = t.crash_lookback_minutes * MINUTE
    const [restarts, startedAt, log] = await Promise.all([
      ctx.store.serverChanges.serverChanges(
        ctx.db.id,
        ['restart'],
        { since: ctx.now - recentMs, until: ctx.now + 1 },
        1,
      ),
      ctx.store.serverChanges.serverStartedAt(ctx.db.id),
      logEntries(ctx, ['server_crash', 'recovery'], recentMs + lookbackMs),
    ])
    const restart = restarts[0]
    let how: RecentRestart['how']
    let at: number
    let previous: number | null = null
    if (restart) {
      how = 'restart'
      at = restart.ts
      const m = /previous start (\d{4}-\d\d-\d\dT[\d:.]+Z)/.exec(restart.detail ?? '')
      previous = m ? Date.parse(m[1]!) : null
    } else {
      // PostgreSQL's restart in place: crash recovery started in the recent minutes, the postmaster's start unchanged.
      const started = log.filter(
        (e) => e.kind === 'recovery' && e.ts >= ctx.now - recentMs && textField(e, 'phase') !== 'redo_done',
      )
      if (started.length === 0) return null
      how = 'reinit'
      at = Math.min(...started.map((e) => e.ts))
    }
    const around = log.filter((e) => e.ts >= at - lookbackMs)
    // Entries come newest first: the latest crash before (or at) the start, and the recovery after it.
    const crash = around.find((e) => e.kind === 'server_crash' && e.ts <= at + MINUTE)
    const recovery = around.filter((e) => e.kind === 'recovery' && e.ts >= at - MINUTE).reverse()
    return { how, at, previous, started_at: startedAt, crash, recovery }
  })
}

/** True when the restart finding names a crash of the log (pg_log_resource_faults then leaves server_crash out). */
export async function restartCarriesCrash(ctx: DoctorContext): Promise<boolean> {
  const r = await recentRestart(ctx)
  return r !== null && (r.crash !== undefined || r.recovery.length > 0)
}

/** What the log says of the crash, in one sentence. */
function crashText(r: RecentRestart): string {
  const parts: string[] = []
  if (r.crash) {
    const signal = numberField(r.crash, 'signal')
    const exit = numberField(r.crash, 'exit_code')
    const process = textField(r.crash, 'process')
    const what = [
      process ? logExcerpt(process, 100) : null,
      signal !== null ? `signal ${signal}` : null,
      exit !== null ? `exit code ${exit}` : null,
    ]
      .filter(Boolean)
      .join(', ')
    parts.push(`the log says at ${iso(r.crash.ts)}: "${logExcerpt(r.crash.message)}"${what ? ` (${what})` : ''}`)
  }
  const redo = r.recovery.map((e) => numberField(e, 'redo_ms')).find((v) => v !== null)
  if (r.recovery.length > 0)
    parts.push(`crash recovery ran${redo !== null && redo !== undefined ? ` (redo done in ${duration(redo)})` : ''}`)
  return parts.join('; ')
}

export const serverRestarted: Rule<typeof defaults> = {
  id: 'server_restarted',
  summary: 'The database server restarted in the last minutes; critical when its log shows a crash or crash recovery.',
  collectors: ['log_events'],
  engine: 'any',
  category: 'availability',
  thresholds: defaults,
  async check(ctx) {
    const r = await recentRestart(ctx)
    if (!r) return []
    const engine = ctx.db.engine === 'clickhouse' ? 'ClickHouse' : 'PostgreSQL'
    const crashed = r.crash !== undefined || r.recovery.length > 0
    const upMs = Math.max(0, ctx.now - r.at)
    // Up until the latest data (a batch's arrival), as the overview's Uptime: a server that stopped
    // sending, or that its agent reports down, is not known to be up now.
    const dataAt = ctx.db.last_seen_at === null ? null : Math.min(ctx.db.last_seen_at, ctx.now)
    const uptimeMs = dataAt === null ? null : Math.max(0, dataAt - r.at)
    const upText =
      uptimeMs === null
        ? 'no data since'
        : dataAt! >= ctx.now - 60_000
          ? `up for ${duration(uptimeMs)}`
          : `up for ${duration(uptimeMs)} at the latest data (${iso(dataAt!)})`
    const signal = r.crash ? numberField(r.crash, 'signal') : null
    const when =
      r.how === 'restart'
        ? `${engine} started at ${iso(r.at)}, ${upText}${r.previous !== null ? ` (previous start ${iso(r.previous)}, which ran ${duration(Math.max(0, r.at - r.previous))})` : ''}.`
        : `PostgreSQL reinitialized after a crash at ${iso(r.at)}, ${duration(upMs)} ago: every session was ended and crash recovery ran; the postmaster itself has run since ${r.started_at !== null ? iso(r.started_at) : 'an earlier start'}.`
    const postgres = ctx.db.engine === 'postgres'
    return [
      {
        severity: crashed ? 'critical' : 'warning',
        title: crashed
          ? `${engine} restarted after a crash ${duration(upMs)} ago`
          : `${engine} restarted ${duration(upMs)} ago`,
        detail:
          `${when} ` +
          (crashed
            ? `${r.crash ? 'It crashed' : 'It was not shut down cleanly (a crash, a kill or an immediate shutdown)'}: ${crashText(r)}. Sessions and transactions in flight were lost${postgres ? ', and statistics kept in memory (pg_stat_statements, pg_stat_*) start from zero after crash recovery' : ''}.`
            : 'Every session was closed and the caches start cold; if nobody planned it, find out why.'),
        recommendation: crashed
          ? `Find the crash's cause before it repeats: the log lines before it${signal === 9 ? ' (signal 9 is usually the kernel OOM killer: dmesg shows it)' : ''}, the host's kernel log and its memory. ${postgres ? 'Check that replicas reconnected and that backups still run.' : 'Check system.crash_log for the stack trace and report it upstream with the version.'}`
          : 'If the restart was not planned, read the server log and the service manager around the start (an out-of-memory kill, a host reboot, a failed health check); expect slower queries while the caches warm.',
        how_to_investigate: postgres
          ? [
              'SELECT pg_postmaster_start_time(), now() - pg_postmaster_start_time() AS uptime;',
              'SELECT stats_reset FROM pg_stat_database WHERE datname = current_database();',
              'journalctl -u postgresql --since "1 hour ago"   # on the host: the service manager and the server log',
              'grep -i -E "out of memory|killed process" /var/log/kern.log   # on the host: the kernel OOM killer (or dmesg -T)',
            ]
          : [
              'SELECT uptime(), version();',
              'SELECT event_time, signal, thread_id, query_id, version FROM system.crash_log ORDER BY event_time DESC LIMIT 5;',
              'grep -i -E "out of memory|killed process" /var/log/kern.log   # on the host: the kernel OOM killer (or dmesg -T)',
            ],
        how_to_fix: [],
        metrics: {
          restarted_at: r.at,
          uptime_s: uptimeMs === null ? null : Math.round(uptimeMs / 1000),
          previous_start_at: r.previous,
          crash_signal: signal,
          crash_process: r.crash ? textField(r.crash, 'process') : null,
          crash_logged_at: r.crash?.ts ?? null,
          recovery_entries: r.recovery.length,
        },
      },
    ]
  },
}
