// The server ran out of something in the last hour, from its log: out of memory, could not fork a
// process, no space left on device, or a server process that crashed (terminated by a signal, which
// makes PostgreSQL restart every session and recover). Each means failed statements or a restart;
// critical at the first entry, naming the first one in the hour, with the counts of each kind (exact,
// from the log's counts). One finding per cause: out of memory while the host swaps is
// host_memory_pressure's evidence, so this rule leaves it out then; a crash that restarted the server in
// the last minutes is server_restarted's, so this rule leaves server_crash out then.
import type { StoredLogEntry } from '../../../store/logs/types.ts'
import { LOG_KINDS, type LogKind } from '../../../../shared/log-kinds.ts'
import type { Rule } from '../../types.ts'
import { memoryPressure } from '../host-memory.ts'
import { restartCarriesCrash } from '../server-restart.ts'
import { countOf, logCounts, logEntries, logExcerpt } from './log-evidence.ts'

const defaults = {
  window_minutes: 60,
  critical_count: 1,
}

const KINDS = ['out_of_memory', 'could_not_fork', 'disk_full', 'server_crash'] as const satisfies readonly LogKind[]
const MINUTE = 60_000

const ADVICE: Record<(typeof KINDS)[number], string> = {
  out_of_memory:
    'out of memory: lower work_mem × connections (and maintenance_work_mem), use a connection pooler, check the host for other memory users and for swap',
  could_not_fork:
    'could not fork: the host is out of processes or memory (ulimit -u, vm.overcommit, cgroup limits); fewer connections help',
  disk_full:
    'disk full: free space on the volume named (WAL held by a slot or a failing archiver, temp files, logs) before the server stops',
  server_crash:
    'a process crashed: the log lines before it say why (a signal 9 is usually the kernel OOM killer; dmesg shows it); every session was reset',
}

const iso = (ms: number) => new Date(ms).toISOString()

export const logResourceFaults: Rule<typeof defaults> = {
  id: 'pg_log_resource_faults',
  summary: 'The server ran out of something (memory, processes, disk) or a server process crashed, from its log.',
  collectors: ['log_events'],
  engine: 'postgres',
  category: 'availability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(logResourceFaults)
    const windowMs = t.window_minutes * MINUTE
    const end = Math.floor(ctx.now / MINUTE) * MINUTE + MINUTE
    const counts = await logCounts(ctx, end - windowMs, end)
    // Kinds another finding carries now.
    const elsewhere = new Set<string>((await memoryPressure(ctx)) ? ['out_of_memory'] : [])
    if (await restartCarriesCrash(ctx)) elsewhere.add('server_crash')
    const kinds = KINDS.filter((k) => !elsewhere.has(k))
    const byKind = kinds.map((kind) => ({ kind, count: countOf(counts, kind) })).filter((k) => k.count > 0)
    const total = byKind.reduce((n, k) => n + k.count, 0)
    if (total < t.critical_count) return []
    const entries = (await logEntries(ctx, KINDS, windowMs)).filter((e) => !elsewhere.has(e.kind))
    const first: StoredLogEntry | undefined = entries.reduce<StoredLogEntry | undefined>(
      (a, e) => (a === undefined || e.ts < a.ts ? e : a),
      undefined,
    )
    const summary = byKind.map((k) => `${k.count} × ${LOG_KINDS[k.kind].label.toLowerCase()}`).join(', ')
    return [
      {
        severity: 'critical',
        title: `${first ? (LOG_KINDS[first.kind as LogKind]?.label ?? 'Resource fault') : 'Resource faults'} in the server log in the last ${t.window_minutes} minutes`,
        detail:
          `The server logged ${summary} in the last ${t.window_minutes} minutes.` +
          (first
            ? ` The first, at ${iso(first.ts)}${first.pid !== null ? ` (pid ${first.pid})` : ''}: "${logExcerpt(first.message)}"` +
              (first.detail ? ` ${logExcerpt(first.detail)}` : '') +
              (first.statement ? `, while running: ${logExcerpt(first.statement)}` : '') +
              '.'
            : ''),
        recommendation: `${byKind.map((k) => ADVICE[k.kind]).join('. ')}.`,
        how_to_investigate: [
          "SELECT name, setting, unit FROM pg_settings WHERE name IN ('max_connections', 'work_mem', 'maintenance_work_mem', 'shared_buffers', 'temp_file_limit');",
          'SELECT pg_postmaster_start_time();   -- a recent start follows a crash',
          "SELECT current_setting('data_directory') AS data_directory;   -- its volume's free space (df -h on the host)",
          'grep -i -E "out of memory|killed process" /var/log/kern.log   # on the host: the kernel OOM killer (or dmesg -T)',
        ],
        how_to_fix: [],
        metrics: Object.fromEntries([
          ...byKind.map((k) => [k.kind, k.count]),
          ['first_at', first ? iso(first.ts) : null],
        ]),
      },
    ]
  },
}
