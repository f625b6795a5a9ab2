// Tables whose storage parameters turn autovacuum off (autovacuum_enabled or toast.autovacuum_enabled
// = false, reported by the agent's tables collector): autovacuum then neither vacuums nor analyzes
// them, except against transaction ID wraparound, so dead rows pile up and the planner's statistics
// go stale. A note, not a warning: the setting is chosen by someone running ALTER TABLE and is
// sometimes right (a staging table loaded and truncated, a table vacuumed by a scheduled job), and the
// harm it does shows as dead rows, which pg_dead_tuples rates; a table that rule flags is left to its
// finding, which names the setting and gives the same fix. The server-wide autovacuum setting is
// pg_risky_settings'.
import type { TableRow } from '../../../store/objects/types.ts'
import { type FindingDraft, type Rule, duration } from '../../types.ts'
import { tableSizeMetrics, tableSizeText } from '../../table-size-text.ts'
import { pgQualified, pgRegclass, pgObject } from '../../sql-text.ts'
import { deadRowsSeverity, deadTuples, resetAutovacuum } from './dead-tuples.ts'

const defaults = {
  /** Tables named one finding each, the largest first; the rest are counted in one more. */
  max_findings: 10,
}

const n = (v: number) => v.toLocaleString('en-US')

export const autovacuumDisabled: Rule<typeof defaults> = {
  id: 'pg_autovacuum_disabled',
  summary: 'Tables whose storage parameters turn autovacuum off, so dead rows pile up and statistics go stale.',
  collectors: ['tables'],
  engine: 'postgres',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(autovacuumDisabled)
    const dead = ctx.thresholds(deadTuples)
    // ctx.tables() is ordered by size, the largest first.
    const off = (await ctx.tables()).filter(
      (table) => table.autovacuum_enabled === false && !deadRowsSeverity(table, dead),
    )

    const ago = (at: number | null) => (at === null ? 'never' : `${duration(Math.max(0, ctx.now - at))} ago`)
    const latest = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.max(a, b))
    const findings: FindingDraft[] = off.slice(0, t.max_findings).map((table: TableRow) => {
      const name = pgQualified(table.schema_name, table.table_name)
      const rel = pgRegclass(table.schema_name, table.table_name)
      const sizes = tableSizeText(table)
      const size = sizes === '' ? '' : `; ${sizes}`
      return {
        severity: 'info',
        object: pgObject(table.schema_name, table.table_name),
        title: `Autovacuum is turned off for ${name}`,
        detail: `The storage parameters of ${name} (${n(table.n_live_tup ?? 0)} live rows, ${n(table.n_dead_tup ?? 0)} dead${size}) set autovacuum_enabled or toast.autovacuum_enabled to false: autovacuum neither vacuums nor analyzes it, except against transaction ID wraparound. Last vacuumed ${ago(latest(table.last_vacuum, table.last_autovacuum))}, last analyzed ${ago(latest(table.last_analyze, table.last_autoanalyze))}.`,
        recommendation:
          'Turn autovacuum back on for the table (RESET falls back to the server-wide autovacuum settings). If it was turned off on purpose, to keep vacuum out of bulk loads, make sure a job vacuums and analyzes the table after each load; if autovacuum was too eager on it, tune its per-table thresholds instead of turning it off.',
        how_to_investigate: [
          `SELECT c.reloptions, toast.reloptions AS toast_reloptions FROM pg_class c LEFT JOIN pg_class toast ON toast.oid = c.reltoastrelid WHERE c.oid = ${rel};`,
          `SELECT n_live_tup, n_dead_tup, n_mod_since_analyze, last_vacuum, last_autovacuum, last_analyze, last_autoanalyze FROM pg_stat_user_tables WHERE relid = ${rel};`,
        ],
        how_to_fix: [resetAutovacuum(name)],
        metrics: {
          n_live_tup: table.n_live_tup,
          n_dead_tup: table.n_dead_tup,
          table_size_bytes: table.table_size_bytes,
          ...tableSizeMetrics(table),
          last_vacuum: latest(table.last_vacuum, table.last_autovacuum),
          last_analyze: latest(table.last_analyze, table.last_autoanalyze),
        },
      }
    })

    const rest = off.slice(t.max_findings)
    if (rest.length > 0) {
      const names = rest.map((table) => pgQualified(table.schema_name, table.table_name))
      findings.push({
        severity: 'info',
        title: `Autovacuum is turned off for ${rest.length} more tables`,
        detail: `Besides the tables named above, the storage parameters of ${rest.length} more tables turn autovacuum off: ${names.slice(0, 20).join(', ')}${names.length > 20 ? ', ...' : ''}.`,
        recommendation: 'Turn autovacuum back on for them, or make sure a job vacuums and analyzes them.',
        how_to_investigate: [
          "SELECT c.oid::regclass AS table, c.reloptions, toast.reloptions AS toast_reloptions FROM pg_class c LEFT JOIN pg_class toast ON toast.oid = c.reltoastrelid WHERE c.relkind IN ('r', 'm') AND EXISTS (SELECT 1 FROM pg_options_to_table(c.reloptions || toast.reloptions) o WHERE o.option_name = 'autovacuum_enabled' AND NOT o.option_value::boolean) ORDER BY c.oid::regclass::text;",
        ],
        how_to_fix: names.slice(0, 100).map(resetAutovacuum),
        objects: rest.slice(0, 100).map((table) => pgObject(table.schema_name, table.table_name)),
        metrics: { tables: rest.length },
      })
    }
    return findings
  },
}
