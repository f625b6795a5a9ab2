// Temporary files written over the last hour (pg_stat_database temp_files / temp_bytes deltas): sorts
// and hashes that outgrew work_mem spill to disk, which is slow and, in bulk, fills it. The statements
// that spill are named from pg_stat_statements (temp_blks_written over the same hour). No tool agrees
// on a number; dbm's scale: 100 MB an hour is worth a look (info), 1 GB an hour is the "disk climbing by
// gigabytes per hour" spill of netdata's temp-file guide (warning), 20 GB an hour endangers the disk
// (critical).
// With log_events (log_temp_files on), the log's temp_file entries name each spill with its size and
// statement: the statement whose single temporary file was the largest is named, with the work_mem that
// would keep one execution in memory, for that statement alone (SET LOCAL in its transaction): sized from
// its largest single file, not a sum, and doubled (a sort or hash in memory takes more room than the
// compact file it spills). That is the one work_mem offered; pg_stat_statements' spills per call size it
// only when the log names no statement. Logged spills also count when pg_stat_database's counters are not collected.
import type { StoredLogEntry } from '../../../store/sql-log-events.ts'
import type { QueryStatsRow } from '../../../store/sql-statement-reads.ts'
import { type Rule, bytes, severityAbove } from '../../types.ts'
import { commentText, pgNumber } from '../../sql-text.ts'
import { logEntries, logExcerpt, numberField, settings } from './log-evidence.ts'

const MB = 1024 * 1024

const defaults = {
  info_bytes: 100 * MB,
  warning_bytes: 1024 * MB,
  critical_bytes: 20 * 1024 * MB,
  window_s: 3600,
  /** Statements named in the finding. */
  max_statements: 5,
}

const BLOCK = 8192
const short = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

/** work_mem that would hold one call's spill in memory: about twice the spilled bytes, in whole MB (at least 8). */
const workMemFor = (q: QueryStatsRow) => Math.max(8, Math.ceil((2 * q.temp_blks_written * BLOCK) / Math.max(1, q.total_calls) / MB))

/** work_mem for one statement whose largest single temp file was `largest` bytes: twice it, in whole MB (at least 8). */
export const workMemForFile = (largest: number) => Math.max(8, Math.ceil((2 * largest) / MB))

interface LoggedSpill {
  /** query id, or the statement's text, or the message's fingerprint: what groups the entries. */
  key: string
  statement: string | null
  queryId: string | null
  largest: number
  files: number
  bytes: number
}

/** The logged temp files grouped by statement, the largest single file first. */
function loggedSpills(entries: StoredLogEntry[]): LoggedSpill[] {
  const byKey = new Map<string, LoggedSpill>()
  for (const e of entries) {
    const size = numberField(e, 'size_bytes')
    if (size === null) continue
    const key = e.query_id ?? e.statement ?? e.fingerprint
    const s = byKey.get(key) ?? { key, statement: e.statement, queryId: e.query_id, largest: 0, files: 0, bytes: 0 }
    s.largest = Math.max(s.largest, size)
    s.files += e.count
    s.bytes += size * e.count
    s.statement ??= e.statement
    byKey.set(key, s)
  }
  return [...byKey.values()].sort((a, b) => b.largest - a.largest)
}

export const tempFiles: Rule<typeof defaults> = {
  id: 'pg_temp_files',
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(tempFiles)
    const windowMs = t.window_s * 1000
    const { temp_files: counted = 0, temp_bytes: counters = 0 } = await ctx.sums('database', windowMs)
    const spills = loggedSpills(await logEntries(ctx, ['temp_file'], windowMs))
    const loggedBytes = spills.reduce((n, s) => n + s.bytes, 0)
    const loggedFiles = spills.reduce((n, s) => n + s.files, 0)
    // The counters when collected; the log's sum when it says more (counters not collected, or a log read whole).
    const written = Math.max(counters, loggedBytes)
    const files = counters >= loggedBytes ? counted : loggedFiles
    const severity = severityAbove(written, t.warning_bytes, t.critical_bytes) ?? (written >= t.info_bytes ? 'info' : undefined)
    if (!severity) return []
    const spilling = (await ctx.queries(windowMs, 'total_time', 1000))
      .filter((q) => q.temp_blks_written > 0)
      .sort((a, b) => b.temp_blks_written - a.temp_blks_written)
      .slice(0, t.max_statements)
    const top = spills[0]
    // log_temp_files is on unless -1 (off) or not reported.
    const logTempFiles = (await settings(ctx))?.log_temp_files
    const logTempFilesOn = spills.length > 0 || (logTempFiles !== undefined && logTempFiles.trim() !== '-1')
    const fromLog = top
      ? ` The server log shows ${loggedFiles} temporary file${loggedFiles === 1 ? '' : 's'} (${bytes(loggedBytes)}); the largest single file, ${bytes(top.largest)}, came from ` +
        `${top.statement ? `this statement: ${short(top.statement)}` : top.queryId ? `statement ${top.queryId}` : 'a statement the log does not show'}` +
        ` (${top.files} file${top.files === 1 ? '' : 's'}, ${bytes(top.bytes)} in all). work_mem of about ${workMemForFile(top.largest)} MB would keep one execution of it in memory.`
      : ''
    const named = spilling.map((q) => `statement ${q.query_hash}, ${bytes(q.temp_blks_written * BLOCK)} of temp blocks written in ${q.total_calls} call${q.total_calls === 1 ? '' : 's'}: ${short(q.query_text)}`)
    return [
      {
        severity,
        title: `${bytes(written)} of temporary files in the last hour`,
        detail:
          `Statements wrote ${files.toLocaleString('en-US')} temporary file${files === 1 ? '' : 's'} totalling ${bytes(written)} in the last ${t.window_s / 60} minutes: sorts and hashes that did not fit in work_mem. ` +
          (named.length > 0 ? `The statements that spilled most: ${named.map((s, i) => `(${i + 1}) ${s}`).join('; ')}.` : 'pg_stat_statements names no statement for them (not installed, or the statements were evicted).') +
          fromLog,
        recommendation:
          'Give the statements that spill more work_mem for their own session or role rather than server-wide (work_mem is per sort or hash node, per connection), ' +
          'or make them spill less: an index that returns rows in the needed order, fewer rows sorted, no SELECT DISTINCT over wide rows. log_temp_files shows each spill in the log.',
        how_to_investigate: [
          'SELECT queryid, calls, pg_size_pretty(temp_blks_written * 8192) AS temp_written, left(query, 200) FROM pg_stat_statements ORDER BY temp_blks_written DESC LIMIT 10;',
          'SELECT temp_files, pg_size_pretty(temp_bytes), stats_reset FROM pg_stat_database WHERE datname = current_database();',
          'EXPLAIN (ANALYZE, BUFFERS) <the statement>;   -- "Sort Method: external merge  Disk: ..." or "Batches: N" on a hash node shows the spill',
          'SHOW work_mem;',
          ...spilling.slice(0, 3).map((q) => `SELECT query FROM pg_stat_statements WHERE queryid = ${pgNumber(q.query_hash)};   -- the text of statement ${commentText(q.query_hash, 64)}`),
        ],
        how_to_fix: [
          // One work_mem per statement: the log's largest single file when it has one, else pg_stat_statements' spill per call.
          ...(top
            ? [
                `BEGIN; SET LOCAL work_mem = '${workMemForFile(top.largest)}MB'; <the statement>; COMMIT;   -- for ${top.statement ? `the statement ${commentText(logExcerpt(top.statement, 120), 140)}` : `statement ${commentText(top.queryId ?? top.key, 64)}`} alone: twice its largest temp file (${bytes(top.largest)}), since a sort or hash takes more room in memory than in its file`,
              ]
            : spilling.slice(0, 3).map((q) => `SET work_mem = '${workMemFor(q)}MB';   -- in the session that runs statement ${commentText(q.query_hash, 64)} (named in the detail): twice its temp blocks per call`)),
          ...(logTempFilesOn ? [] : ["ALTER SYSTEM SET log_temp_files = '10MB'; SELECT pg_reload_conf();   -- log every spill over 10 MB with its statement"]),
        ],
        metrics: {
          temp_files: files,
          temp_bytes: written,
          statements_spilling: spilling.length,
          log_temp_files: loggedFiles,
          log_largest_file_bytes: top?.largest ?? null,
          work_mem_for_largest_mb: top ? workMemForFile(top.largest) : null,
        },
      },
    ]
  },
}
