// Large tables read mostly by sequential scans over the last hour (pg_stat_user_tables seq_scan,
// idx_scan and seq_tup_read, summed from the per-cycle deltas): the mark of a filter or join without a
// fitting index. PgHero's missing_indexes looks at tables of 10,000 rows or more; here more than half
// of their scans sequential is a note, and a warning on tables of 100 MB or more, where each scan
// reads that much.
import type { TableRow } from '../../../store/sql-objects.ts'
import { type FindingDraft, type Rule, bytes, literal, pct, qualified } from '../../types.ts'

const defaults = {
  /** Tables with fewer live rows are left out. */
  min_live_rows: 10_000,
  /** Share of the window's scans that were sequential. */
  min_seq_share: 0.5,
  /** Fewer sequential scans than this in the window are left out. */
  min_seq_scans: 100,
  /** From this table size a warning, below it a note. */
  warning_table_bytes: 100 * 1024 * 1024,
  window_s: 3600,
  /** Largest tables examined. */
  max_tables: 200,
  /** Tables named one finding each, the most rows read first; the rest are counted in one more. */
  max_findings: 10,
}

const n = (v: number) => v.toLocaleString('en-US')

interface Scanned {
  table: TableRow
  seq: number
  idx: number
  rows: number
  share: number
}

export const sequentialScans: Rule<typeof defaults> = {
  id: 'pg_sequential_scans',
  engine: 'postgres',
  category: 'performance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(sequentialScans)
    const window = { since: ctx.now - t.window_s * 1000, until: ctx.now }
    // A table counts at least as many scans since the statistics reset as in the window (barring a reset
    // within it), so fewer rule it out without reading its timeseries.
    const candidates = (await ctx.tables())
      .filter((table) => (table.n_live_tup ?? 0) >= t.min_live_rows && (table.seq_scan ?? 0) >= t.min_seq_scans)
      .slice(0, t.max_tables)
    const scanned: Scanned[] = []
    for (const table of candidates) {
      const { points } = await ctx.store.objects.tableSeries(ctx.db.id, table.schema_name, table.table_name, window)
      let seq = 0
      let idx = 0
      let rows = 0
      for (const p of points) {
        seq += p.seq_scan ?? 0
        idx += p.idx_scan ?? 0
        rows += p.seq_tup_read ?? 0
      }
      const share = seq + idx > 0 ? seq / (seq + idx) : 0
      if (seq >= t.min_seq_scans && share >= t.min_seq_share) scanned.push({ table, seq, idx, rows, share })
    }
    const severityOf = (s: Scanned) => ((s.table.table_size_bytes ?? 0) >= t.warning_table_bytes ? 'warning' : 'info')
    scanned.sort((a, b) => (severityOf(a) === severityOf(b) ? 0 : severityOf(a) === 'warning' ? -1 : 1) || b.rows - a.rows)
    const span = t.window_s % 3600 === 0 ? `${t.window_s / 3600 === 1 ? 'hour' : `${t.window_s / 3600} hours`}` : `${t.window_s} s`

    const findings: FindingDraft[] = scanned.slice(0, t.max_findings).map((s) => {
      const name = qualified(s.table.schema_name, s.table.table_name)
      const size = s.table.table_size_bytes === null ? '' : `, ${bytes(s.table.table_size_bytes)}`
      return {
        severity: severityOf(s),
        object: `${s.table.schema_name}.${s.table.table_name}`,
        title: `Sequential scans on ${name}`,
        detail: `In the last ${span} ${name} (${n(s.table.n_live_tup ?? 0)} rows${size}) was read by ${n(s.seq)} sequential scans against ${n(s.idx)} index scans (${pct(s.share)} sequential); they read ${n(s.rows)} rows (seq_tup_read), ${n(Math.round(s.rows / s.seq))} per scan.`,
        recommendation: `Find the statements that scan ${name} in pg_stat_statements and index the columns they filter or join on; scans that need the whole table anyway (reports, exports) are expected.`,
        how_to_investigate: [
          `SELECT seq_scan, seq_tup_read, idx_scan, n_live_tup FROM pg_stat_user_tables WHERE relid = ${literal(name)}::regclass;`,
          `SELECT queryid, calls, rows, round(mean_exec_time::numeric, 2) AS mean_ms, query FROM pg_stat_statements WHERE query ILIKE ${literal(`%${s.table.table_name}%`)} ORDER BY total_exec_time DESC LIMIT 10;`,
          `EXPLAIN (ANALYZE, BUFFERS) <one of those statements>;   -- a Seq Scan on ${name} with a Filter names the columns to index`,
        ],
        how_to_fix: [`CREATE INDEX CONCURRENTLY ON ${name} (<filtered columns>);`],
        metrics: {
          seq_scan: s.seq,
          idx_scan: s.idx,
          seq_share: Number(s.share.toFixed(4)),
          seq_tup_read: s.rows,
          n_live_tup: s.table.n_live_tup,
          table_size_bytes: s.table.table_size_bytes,
        },
      }
    })

    const rest = scanned.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((s) => severityOf(s) === 'warning') ? 'warning' : 'info',
        title: `${rest.length} more tables read mostly by sequential scans`,
        detail: `Besides the tables named above, ${rest.length} more tables of ${n(t.min_live_rows)} rows or more were read mostly by sequential scans in the last ${span}: ${rest
          .slice(0, 20)
          .map((s) => `${s.table.schema_name}.${s.table.table_name} (${n(s.seq)} scans)`)
          .join(', ')}${rest.length > 20 ? ', ...' : ''}.`,
        recommendation: 'Index the columns their statements filter on, the busiest first.',
        how_to_investigate: [
          `SELECT relid::regclass, seq_scan, seq_tup_read, idx_scan, n_live_tup FROM pg_stat_user_tables WHERE n_live_tup >= ${t.min_live_rows} ORDER BY seq_tup_read DESC LIMIT 20;`,
        ],
        how_to_fix: ['CREATE INDEX CONCURRENTLY ON <schema>.<table> (<filtered columns>);'],
        objects: rest.slice(0, 100).map((s) => `${s.table.schema_name}.${s.table.table_name}`),
        metrics: { tables: rest.length },
      })
    }
    return findings
  },
}
