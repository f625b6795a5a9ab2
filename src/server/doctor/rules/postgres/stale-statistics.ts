// Planner statistics gone stale (the agent's `tables` collector: pg_stat_user_tables'
// n_mod_since_analyze, n_live_tup and the last analyze times). The planner estimates rows from what the
// last ANALYZE saw; once many rows changed since, or a table with rows was never analyzed (a bulk load,
// an insert-only table with autovacuum off), its estimates are wrong and its plans may be too. Autovacuum
// analyzes a table once the rows modified since its last analyze pass autovacuum_analyze_threshold +
// autovacuum_analyze_scale_factor × its rows; a table past that line which autovacuum did not analyze
// is named with the ANALYZE to run and why autovacuum did not (turned off for the table or server-wide,
// or behind). The line is drawn with the server-wide settings and the table's live rows (n_live_tup,
// close to the reltuples autovacuum uses): the tables collector does not read a table's own
// autovacuum_analyze_* storage parameters, and the finding says so.
import type { TableRow } from '../../../store/objects/types.ts'
import { minuteFloor } from '../../../store/window.ts'
import { pgObject, pgQualified, pgRegclass } from '../../sql-text.ts'
import { type FindingDraft, type Rule, duration } from '../../types.ts'
import { resetAutovacuum } from './dead-tuples.ts'
import { settingNumber, settings } from './log-evidence.ts'

const defaults = {
  /** A never-analyzed table is named from this many live rows (the planner's guesses matter little below). */
  min_rows: 1_000,
  /** A table analyzed less than this long ago (or never analyzed, loaded less than this long ago, autovacuum on) is left to autovacuum. */
  grace_minutes: 10,
  /** Tables named one finding each, the largest first; the rest are counted in one more. */
  max_findings: 10,
}

/** PostgreSQL's defaults, used when the server's settings have not arrived. */
const DEFAULT_THRESHOLD = 50
const DEFAULT_SCALE_FACTOR = 0.1

const n = (v: number) => Math.round(v).toLocaleString('en-US')

/** Whether the table's series shows at least `rows` live rows at or before `at` (an hour's look back). */
async function hadRowsBefore(
  ctx: Parameters<Rule['check']>[0],
  table: TableRow,
  at: number,
  rows: number,
): Promise<boolean> {
  const window = { since: at - 3_600_000, until: at, minuteFloor: minuteFloor(ctx.now) }
  const series = await ctx.store.objects.tableSeries(ctx.db.id, table.schema_name, table.table_name, window)
  return series.points.some((p) => p.ts + series.resolution * 1000 <= at && (p.n_live_tup ?? 0) >= rows)
}

interface Stale {
  table: TableRow
  never: boolean
  mods: number | null
  line: number
}

export const staleStatistics: Rule<typeof defaults> = {
  id: 'pg_stale_statistics',
  engine: 'postgres',
  category: 'maintenance',
  summary:
    'Planner statistics gone stale: rows modified since the last ANALYZE past the autovacuum analyze threshold, or a table with rows never analyzed (with the ANALYZE to run).',
  collectors: ['tables'],
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(staleStatistics)
    const s = await settings(ctx)
    const base = settingNumber(s?.autovacuum_analyze_threshold) ?? DEFAULT_THRESHOLD
    const scale = settingNumber(s?.autovacuum_analyze_scale_factor) ?? DEFAULT_SCALE_FACTOR
    const serverOff = /^(off|false|no|0)$/i.test(s?.autovacuum ?? '')

    const stale: Stale[] = []
    // ctx.tables() is ordered by size, the largest first.
    for (const table of await ctx.tables()) {
      const rows = Math.max(0, table.n_live_tup ?? 0)
      const mods = table.n_mod_since_analyze
      const analyzed = latest(table.last_analyze, table.last_autoanalyze)
      const line = base + scale * rows
      if (analyzed === null) {
        // With autovacuum on, a table just loaded is autovacuum's to analyze first (its naptime is a minute):
        // named only once it had its rows grace_minutes ago.
        const autovacuumOn = !serverOff && table.autovacuum_enabled !== false
        if (
          rows >= t.min_rows &&
          (!autovacuumOn || (await hadRowsBefore(ctx, table, ctx.now - t.grace_minutes * 60_000, t.min_rows)))
        )
          stale.push({ table, never: true, mods, line })
        continue
      }
      if (mods === null || mods <= line || ctx.now - analyzed < t.grace_minutes * 60_000) continue
      stale.push({ table, never: false, mods, line })
    }

    const lineWords = `autovacuum_analyze_threshold (${n(base)}) + autovacuum_analyze_scale_factor (${scale}) × its live rows`
    const findings: FindingDraft[] = stale.slice(0, t.max_findings).map(({ table, never, mods, line }) => {
      const name = pgQualified(table.schema_name, table.table_name)
      const rel = pgRegclass(table.schema_name, table.table_name)
      const rows = Math.max(0, table.n_live_tup ?? 0)
      const analyzed = latest(table.last_analyze, table.last_autoanalyze)
      const tableOff = table.autovacuum_enabled === false
      const why = tableOff
        ? 'Autovacuum is turned off for the table (its storage parameters), so nothing analyzes it but a manual ANALYZE.'
        : serverOff
          ? 'Autovacuum is off for the whole server (autovacuum = off), so nothing analyzes it but a manual ANALYZE.'
          : 'Autovacuum should have analyzed it: its workers may be busy elsewhere (autovacuum_max_workers), held up by locks, or the table was loaded moments ago.'
      const state = never
        ? `${name} has ${n(rows)} live rows and has never been analyzed${mods !== null ? ` (${n(mods)} rows modified)` : ''}: the planner has no statistics of its columns and guesses.`
        : `${n(mods!)} rows of ${name} were inserted, updated or deleted since it was last analyzed ${duration(Math.max(0, ctx.now - analyzed!))} ago, past the ${n(line)} at which autovacuum analyzes it (${lineWords}; ${n(rows)} live rows).`
      return {
        severity: 'warning',
        object: pgObject(table.schema_name, table.table_name),
        title: never ? `${name} has never been analyzed` : `The planner statistics of ${name} are stale`,
        detail:
          `${state} The planner's row estimates for it are off, and so may be the plans of the queries that read it. ${why}` +
          " (The line is drawn with the server's autovacuum settings; a table's own autovacuum_analyze_* storage parameters are not read.)",
        recommendation:
          'Run ANALYZE on the table now (it reads a sample, not the whole table, and takes no lock that blocks reads or writes). ' +
          (tableOff || serverOff
            ? 'Then turn autovacuum back on, or make the job that loads the table analyze it after each load.'
            : 'If it keeps falling behind, give autovacuum more workers or a lower autovacuum_analyze_scale_factor for the table.'),
        how_to_investigate: [
          `SELECT n_live_tup, n_mod_since_analyze, last_analyze, last_autoanalyze, analyze_count, autoanalyze_count FROM pg_stat_user_tables WHERE relid = ${rel};`,
          `SELECT reloptions FROM pg_class WHERE oid = ${rel};   -- a table's own autovacuum_enabled or autovacuum_analyze_* settings`,
          "SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', 'autovacuum_analyze_threshold', 'autovacuum_analyze_scale_factor', 'autovacuum_max_workers', 'autovacuum_naptime');",
        ],
        how_to_fix: [
          `ANALYZE ${name};`,
          ...(tableOff ? [`${resetAutovacuum(name)}   -- autovacuum is turned off for it`] : []),
        ],
        metrics: {
          never_analyzed: never ? 1 : 0,
          n_mod_since_analyze: mods,
          n_live_tup: table.n_live_tup,
          analyze_threshold: Math.round(line),
          last_analyze: analyzed,
          autovacuum_enabled: table.autovacuum_enabled === null ? null : table.autovacuum_enabled ? 1 : 0,
        },
        as_of: table.ts,
      }
    })

    const rest = stale.slice(t.max_findings)
    if (rest.length > 0) {
      const names = rest.map(({ table }) => pgQualified(table.schema_name, table.table_name))
      findings.push({
        severity: 'warning',
        title: `The planner statistics of ${rest.length} more tables are stale`,
        detail: `Besides the tables named above, ${rest.length} more tables were never analyzed or changed past the autovacuum analyze threshold since their last analyze: ${names.slice(0, 20).join(', ')}${names.length > 20 ? ', ...' : ''}.`,
        recommendation: 'Analyze them (ANALYZE without a table name analyzes the whole database).',
        how_to_investigate: [
          'SELECT relid::regclass, n_live_tup, n_mod_since_analyze, last_analyze, last_autoanalyze FROM pg_stat_user_tables ORDER BY n_mod_since_analyze DESC LIMIT 50;',
        ],
        how_to_fix: names.slice(0, 100).map((name) => `ANALYZE ${name};`),
        objects: rest.slice(0, 100).map(({ table }) => pgObject(table.schema_name, table.table_name)),
        metrics: { tables: rest.length },
      })
    }
    return findings
  },
}

const latest = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.max(a, b))
