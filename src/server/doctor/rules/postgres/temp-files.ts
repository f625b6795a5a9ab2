// Temporary files written over the last hour (pg_stat_database temp_files / temp_bytes deltas): sorts
// and hashes that outgrew work_mem spill to disk, which is slow and, in bulk, fills it. The statements
// that spill are named from pg_stat_statements (temp_blks_written over the same hour). No tool agrees
// on a number; dbm's scale: 100 MB an hour is worth a look (info), 1 GB an hour is the "disk climbing by
// gigabytes per hour" spill of netdata's temp-file guide (warning), 20 GB an hour endangers the disk
// (critical).
// With log_events (log_temp_files on), the log's temp_file entries name each spill with its size and
// statement: the statement whose single temporary file was the largest is named too. Each statement named
// gets the memory one execution of it needs (work-mem.ts: from its stored plan's sort and hash figures,
// else its temp bytes per call, else the log's largest file), as work_mem for that statement alone, or
// maintenance_work_mem for an index build. Every figure is bytes over the one window the title states.
// Logged spills also count when pg_stat_database's counters are not collected. When one statement wrote at
// least half of the window's bytes (by pg_stat_statements, else by the log), the finding names it in its
// metric `statement`: its spills are then that statement's issue, grouped with its other findings.
import type { StoredLogEntry } from '../../../store/logs/types.ts'
import { type Rule, bytes, severityAbove } from '../../types.ts'
import { commentText, pgNumber } from '../../sql-text.ts'
import { type MemoryAdvice, memoryAdvice, memoryCommand, memoryNeedText, memoryReason } from '../../work-mem.ts'
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

/** Plans of a statement read for its sizing: auto_explain's, which carry actual sort and hash figures. */
const PLANS = 20
const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`

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
  summary:
    'Temporary files written over the last hour by sorts and hashes that outgrew work_mem, with the statements that spill and the memory they need.',
  collectors: ['database_stats', 'query_stats', 'explain_plans', 'log_events'],
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
    const severity =
      severityAbove(written, t.warning_bytes, t.critical_bytes) ?? (written >= t.info_bytes ? 'info' : undefined)
    if (!severity) return []
    const spilling = (await ctx.queries(windowMs, 'total_time', 1000))
      .filter((q) => q.temp_blks_written > 0)
      .sort((a, b) => b.temp_blks_written - a.temp_blks_written)
      .slice(0, t.max_statements)
    const top = spills[0]
    const known = await settings(ctx)
    // log_temp_files is on unless -1 (off) or not reported.
    const logTempFiles = known?.log_temp_files
    const logTempFilesOn = spills.length > 0 || (logTempFiles !== undefined && logTempFiles.trim() !== '-1')
    const window = `${t.window_s / 60} minutes`
    // Each statement's memory for one execution: its auto_explain plans first, else its temp bytes per call.
    const advised: { label: string; advice: MemoryAdvice }[] = []
    const statementLines: string[] = []
    for (const q of spilling) {
      // auto_explain's plans carry the actual figures that size it; a sampled one still says whether it runs in parallel.
      const plans = (await ctx.plans(q.query_hash, windowMs, PLANS)).map((p) => p.plan_json)
      const written = q.temp_blks_written * BLOCK
      const advice = memoryAdvice({
        text: q.query_text,
        plans,
        tempBytes: written,
        calls: q.total_calls,
        settings: known,
      })
      if (advice && advised.length < 3) advised.push({ label: `statement ${q.query_hash}`, advice })
      statementLines.push(
        `statement ${q.query_hash}, ${bytes(written)} written to temporary files in ${plural(q.total_calls, 'call')} (${bytes(written / Math.max(1, q.total_calls))} per call)` +
          `${advice ? `, ${memoryNeedText(advice)}` : ''}: ${short(q.query_text)}`,
      )
    }
    // The log's largest spill, when pg_stat_statements does not already name its statement.
    const topAdvice =
      top && !spilling.some((q) => top.queryId !== null && q.query_hash === top.queryId)
        ? memoryAdvice({ text: top.statement, largestFile: top.largest, settings: known })
        : undefined
    const topLabel = top
      ? top.statement
        ? `the statement ${commentText(logExcerpt(top.statement, 120), 140)}`
        : `statement ${commentText(top.queryId ?? top.key, 64)}`
      : ''
    if (topAdvice) advised.unshift({ label: topLabel, advice: topAdvice })
    const fromLog = top
      ? ` The server log shows ${plural(loggedFiles, 'temporary file')} (${bytes(loggedBytes)}) in the same ${window}; the largest single file, ${bytes(top.largest)}, came from ` +
        `${top.statement ? `this statement: ${short(top.statement)}` : top.queryId ? `statement ${top.queryId}` : 'a statement the log does not show'}` +
        ` (${plural(top.files, 'file')}, ${bytes(top.bytes)} in all).` +
        (topAdvice
          ? topAdvice.raise
            ? ` ${topAdvice.setting} of about ${topAdvice.mb} MB would keep one execution of it in memory.`
            : ` It is ${memoryNeedText(topAdvice)}.`
          : '')
      : ''
    const first = spilling[0]
    const leading =
      first && first.temp_blks_written * BLOCK * 2 >= written
        ? first.query_hash
        : top?.queryId && top.bytes * 2 >= written
          ? top.queryId
          : null
    return [
      {
        severity,
        title: `${bytes(written)} of temporary files in the last ${window}`,
        detail:
          `Statements wrote ${plural(files, 'temporary file')} totalling ${bytes(written)} in the last ${window}: sorts and hashes that did not fit in work_mem (or, for index builds, maintenance_work_mem). ` +
          (statementLines.length > 0
            ? `The statements that spilled most in the same ${window} (pg_stat_statements' temp blocks, in bytes): ${statementLines.map((s, i) => `(${i + 1}) ${s}`).join('; ')}.`
            : 'pg_stat_statements names no statement for them (not installed, or the statements were evicted).') +
          fromLog,
        recommendation:
          'Give each statement that spills the memory one execution of it needs, for that statement alone (SET LOCAL in its transaction; index builds take maintenance_work_mem), not server-wide: work_mem is per sort or hash node, per connection. ' +
          'Or make them spill less: an index that returns rows in the needed order, fewer rows sorted, no SELECT DISTINCT over wide rows. log_temp_files shows each spill in the log.',
        how_to_investigate: [
          'SELECT queryid, calls, pg_size_pretty(temp_blks_written * 8192) AS temp_written, pg_size_pretty(temp_blks_written * 8192 / calls) AS per_call, left(query, 200) FROM pg_stat_statements WHERE temp_blks_written > 0 ORDER BY temp_blks_written DESC LIMIT 10;',
          'SELECT temp_files, pg_size_pretty(temp_bytes), stats_reset FROM pg_stat_database WHERE datname = current_database();',
          'EXPLAIN (ANALYZE, BUFFERS) <the statement>;   -- "Sort Method: external merge  Disk: ..." or "Batches: N" on a hash node shows the spill',
          'SHOW work_mem;',
          ...spilling
            .slice(0, 3)
            .map(
              (q) =>
                `SELECT query FROM pg_stat_statements WHERE queryid = ${pgNumber(q.query_hash)};   -- the text of statement ${commentText(q.query_hash, 64)}`,
            ),
        ],
        how_to_fix: [
          // One setting per statement, sized for one execution of it (work-mem.ts).
          ...advised.map(
            ({ label, advice }) =>
              `${memoryCommand(advice)}   -- for ${commentText(label, 160)} alone: ${commentText(memoryReason(advice), 300)}`,
          ),
          ...(logTempFilesOn
            ? []
            : [
                "ALTER SYSTEM SET log_temp_files = '10MB'; SELECT pg_reload_conf();   -- log every spill over 10 MB with its statement",
              ]),
        ],
        objects: [...new Set([...spilling.map((q) => q.query_hash), ...(top?.queryId ? [top.queryId] : [])])],
        metrics: {
          /** The statement that wrote at least half of the bytes, or null: the finding's cause (grouping.ts). */
          statement: leading,
          temp_files: files,
          temp_bytes: written,
          statements_spilling: spilling.length,
          log_temp_files: loggedFiles,
          log_largest_file_bytes: top?.largest ?? null,
          work_mem_for_largest_mb: topAdvice?.mb ?? null,
          memory_setting: advised[0]?.advice.setting ?? null,
          memory_mb: advised[0]?.advice.mb ?? null,
          /** 0 when the setting in effect already covers the first statement's need (no SET offered), 1 when it is raised. */
          memory_raise: advised[0] ? Number(advised[0].advice.raise) : null,
        },
      },
    ]
  },
}
