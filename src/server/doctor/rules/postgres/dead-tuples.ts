// Tables carrying many dead rows (pg_stat_user_tables n_dead_tup against n_live_tup): autovacuum is
// behind on them, turned off for them, or held back by an old snapshot. Autovacuum's default trigger is
// 50 + 20 % of the live rows (autovacuum_vacuum_scale_factor 0.2), so a table past 20 % dead of all
// its rows is past that trigger; PgHero and pganalyze flag dead rows in that 10-20 % band. Tables with
// few dead rows are left alone whatever their ratio. When the agent reports autovacuum turned off for
// the table, the finding says so and its fix turns it back on (pg_autovacuum_disabled then leaves the
// table to this finding). When the table's last VACUUM finished while something already held the xmin
// horizon (a session's transaction or snapshot, a replication slot, a prepared transaction, a standby's
// feedback: xmin-holders.ts), that VACUUM could not remove the rows deleted since, and no VACUUM will
// until the holder goes: the finding then names the holder and leads with what ends it instead of
// "vacuum the table". Its severity stays that of the dead rows (the harm, which grows while the holder
// stays); pg_xmin_horizon raises the holder itself to the same severity.
// When no VACUUM has run since the holder began (a table never vacuumed, say), the holder is named as
// a cause only of the dead rows that arose after it began: the table's n_dead_tup series says how many
// it had before (its last bucket that ended before the holder began). Rows that were there before are
// not the holder's doing: the finding then says why they stay (autovacuum off, below autovacuum's
// trigger, never reached by autovacuum). When the series does not reach back that far, the finding says
// only what the holder keeps from now on, and that the rows' origin is not known.
import { type FindingDraft, type Rule, type Severity, duration, pct, severityAbove } from '../../types.ts'
import { tableSizeMetrics, tableSizeText } from '../../table-size-text.ts'
import { pgQualified, pgRegclass, pgObject } from '../../sql-text.ts'
import type { TableRow } from '../../../store/objects/types.ts'
import { type Holder, heldBy, oldestDataHolder } from '../../xmin-holders.ts'
import { minuteFloor } from '../../../store/window.ts'
import { settings, settingNumber } from './log-evidence.ts'

const defaults = {
  /** Dead rows as a share of live + dead. */
  warning_ratio: 0.2,
  critical_ratio: 0.5,
  /** Fewer dead rows than this are not worth a finding. */
  min_dead_rows: 10_000,
  /** Tables named one finding each, the most dead rows first; the rest are counted in one more. */
  max_findings: 10,
}

const n = (v: number) => v.toLocaleString('en-US')

/** The severity of the table's dead rows under the thresholds, undefined below them. */
export function deadRowsSeverity(
  table: TableRow,
  t: typeof defaults,
): { ratio: number; severity: Severity } | undefined {
  const dead = table.n_dead_tup ?? 0
  const live = table.n_live_tup ?? 0
  if (dead < t.min_dead_rows) return undefined
  const ratio = dead / (live + dead)
  const severity = severityAbove(ratio, t.warning_ratio, t.critical_ratio)
  return severity ? { ratio, severity } : undefined
}

/** The latest VACUUM of the table (manual or autovacuum), null when none is known. */
export const lastVacuumAt = (table: TableRow) =>
  table.last_vacuum === null && table.last_autovacuum === null
    ? null
    : Math.max(table.last_vacuum ?? 0, table.last_autovacuum ?? 0)

/** The tables past the thresholds, each with the holder that keeps VACUUM from cleaning it (if any), the worst first. */
export function flaggedTables(ctx: Parameters<Rule['check']>[0], t: typeof defaults) {
  return ctx.once(`dead_tuples:flagged:${JSON.stringify(t)}`, async () => {
    const flagged: { table: TableRow; ratio: number; severity: Severity; holder: Holder | undefined }[] = []
    for (const table of await ctx.tables()) {
      const found = deadRowsSeverity(table, t)
      if (found) flagged.push({ table, ...found, holder: await heldBy(ctx, lastVacuumAt(table)) })
    }
    return flagged.sort(
      (a, b) =>
        (a.severity === b.severity ? 0 : a.severity === 'critical' ? -1 : 1) ||
        b.table.n_dead_tup! - a.table.n_dead_tup!,
    )
  })
}

/**
 * The table's dead rows when `since` began, from its n_dead_tup series: the last bucket that ended by
 * then (a bucket keeps the last value sampled in it, so one still open at `since` may hold a later
 * sample). Null when the series has no bucket from before then (the table was not sampled yet, or was
 * sampled in that same minute only).
 */
export function deadRowsBefore(
  ctx: Parameters<Rule['check']>[0],
  table: TableRow,
  since: number,
): Promise<number | null> {
  return ctx.once(`dead_tuples:before:${table.schema_name}.${table.table_name}:${since}`, async () => {
    // An hour before is enough: every sampled hour has a row of each table (its first report of the hour).
    const window = {
      since: since - 3_600_000,
      until: Math.max(since, Math.min(ctx.now, since + 60_000)),
      minuteFloor: minuteFloor(ctx.now),
    }
    const series = await ctx.store.objects.tableSeries(ctx.db.id, table.schema_name, table.table_name, window)
    let before: number | null = null
    for (const p of series.points)
      if (p.ts + series.resolution * 1000 <= since && p.n_dead_tup !== null) before = p.n_dead_tup
    return before
  })
}

/** Autovacuum's trigger for the table: autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor × its rows (server-wide values). */
export function vacuumTrigger(
  table: TableRow,
  s: Record<string, string> | null,
): { threshold: number; base: number; factor: number } {
  const base = settingNumber(s?.autovacuum_vacuum_threshold) ?? 50
  const factor = settingNumber(s?.autovacuum_vacuum_scale_factor) ?? 0.2
  return { base, factor, threshold: Math.round(base + factor * (table.n_live_tup ?? 0)) }
}

/** Why a table's dead rows stay when no holder of the horizon is their cause: autovacuum off, below its trigger, not reached yet. */
export function whyTheyStay(table: TableRow, s: Record<string, string> | null): string {
  if (table.autovacuum_enabled === false)
    return 'autovacuum is turned off for the table, and no manual VACUUM has removed them'
  if (s?.autovacuum === 'off')
    return 'autovacuum is off for the whole server (autovacuum = off), and no manual VACUUM has removed them'
  const { threshold, base, factor } = vacuumTrigger(table, s)
  const dead = table.n_dead_tup ?? 0
  const trigger = `autovacuum_vacuum_threshold ${n(base)} + autovacuum_vacuum_scale_factor ${factor} × ${n(table.n_live_tup ?? 0)} rows = ${n(threshold)} dead rows`
  if (dead < threshold)
    return `they are below autovacuum's trigger for the table (${trigger}), so autovacuum leaves them`
  const never = table.last_vacuum === null && table.last_autovacuum === null
  return `${never ? 'the table has never been vacuumed: ' : ''}autovacuum has not reached it since they passed its trigger (${trigger}; a per-table setting may raise it): its workers may be busy with other tables or throttled (autovacuum_vacuum_cost_limit)`
}

/** Turns autovacuum back on for a table whose storage parameters turned it off (for the table or its TOAST table). */
export const resetAutovacuum = (name: string) =>
  `ALTER TABLE ${name} RESET (autovacuum_enabled, toast.autovacuum_enabled);`

export const deadTuples: Rule<typeof defaults> = {
  id: 'pg_dead_tuples',
  summary:
    'Tables carrying many dead rows: autovacuum is behind, off for them, or held back by whatever holds the xmin horizon (named).',
  collectors: ['tables', 'database_stats'],
  engine: 'postgres',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(deadTuples)
    const flagged = await flaggedTables(ctx, t)
    // A holder of the horizon that no VACUUM of the table has run into yet: named as a likely cause (the
    // rows deleted after it began are beyond VACUUM's reach), with its commands among the investigation.
    // It is named as the cause only of the dead rows that arose after it began (deadRowsBefore); rows
    // that were there before stay for reasons of their own (whyTheyStay).
    const standing = await oldestDataHolder(ctx)
    const serverSettings = standing ? await settings(ctx) : null
    const standingHolds = new Map<TableRow, { text: string; blamed: boolean; before: number | null }>()
    for (const { table, holder } of flagged.slice(0, t.max_findings)) {
      if (
        holder ||
        !standing ||
        standing.since === null ||
        (lastVacuumAt(table) ?? Number.NEGATIVE_INFINITY) >= standing.since
      )
        continue
      const since = standing.since
      const ago = duration(Math.max(0, ctx.now - since))
      const keeps = `no VACUUM can remove the rows deleted or updated after that until ${standing.ends}`
      const before = await deadRowsBefore(ctx, table, since)
      const dead = table.n_dead_tup ?? 0
      const arose = before === null ? null : Math.max(0, dead - before)
      if (arose === null) {
        standingHolds.set(table, {
          blamed: false,
          before,
          text: ` ${standing.about} has held back the xmin horizon since ${ago} ago: ${keeps}. Whether these dead rows arose before or after it began is not known (the table has no sample from before then).`,
        })
      } else if (arose >= t.min_dead_rows) {
        standingHolds.set(table, {
          blamed: true,
          before,
          text: ` ${n(arose)} of them arose after ${standing.about} began holding back the xmin horizon, ${ago} ago (the table had ${n(before!)} then): ${keeps}.`,
        })
      } else {
        standingHolds.set(table, {
          blamed: false,
          before,
          text: ` They were there before ${standing.name} began holding back the xmin horizon ${ago} ago (the table had ${n(before!)} dead rows then), so it is not their cause: ${whyTheyStay(table, serverSettings)}.`,
        })
      }
    }
    const mayHold = (table: TableRow) => standingHolds.get(table)?.text ?? ''

    const lastVacuum = (table: TableRow) => {
      const auto = table.last_autovacuum
      const manual = table.last_vacuum
      if (auto === null && manual === null) return 'it has never been vacuumed since the statistics were reset'
      const [at, by] = (auto ?? 0) >= (manual ?? 0) ? [auto!, 'autovacuum'] : [manual!, 'a manual VACUUM']
      return `it was last vacuumed ${duration(Math.max(0, ctx.now - at))} ago by ${by}${auto === null ? ' (autovacuum never ran on it)' : ''}`
    }

    const findings: FindingDraft[] = flagged.slice(0, t.max_findings).map(({ table, ratio, severity, holder }) => {
      const name = pgQualified(table.schema_name, table.table_name)
      const rel = pgRegclass(table.schema_name, table.table_name)
      // Labelled as the Tables page labels them (table-size-text.ts).
      const sizes = tableSizeText(table)
      const size = sizes === '' ? '' : `; ${sizes}`
      const off = table.autovacuum_enabled === false
      const metrics = {
        n_dead_tup: table.n_dead_tup,
        n_live_tup: table.n_live_tup,
        dead_ratio: Number(ratio.toFixed(4)),
        table_size_bytes: table.table_size_bytes,
        ...tableSizeMetrics(table),
        last_vacuum: table.last_vacuum,
        last_autovacuum: table.last_autovacuum,
      }
      const object = pgObject(table.schema_name, table.table_name)
      if (holder) {
        return {
          severity,
          object,
          objects: [object, holder.object],
          title: `Vacuum cannot clean ${name} until ${holder.ends}`,
          detail:
            `${name} has ${n(table.n_dead_tup!)} dead rows against ${n(table.n_live_tup ?? 0)} live ones (${pct(ratio)} dead)${size}; ${lastVacuum(table)}, ` +
            `when ${holder.name} already held back the xmin horizon, so that VACUUM could not remove them and none will until ${holder.ends}. ` +
            `The holder: ${holder.about}. Meanwhile every update and delete adds dead rows that stay, and the table and its indexes grow.`,
          recommendation: `${holder.advice} Then let autovacuum clean the table (or VACUUM it): vacuuming it before then only repeats the work.`,
          how_to_investigate: [
            `SELECT n_live_tup, n_dead_tup, last_vacuum, last_autovacuum, autovacuum_count FROM pg_stat_user_tables WHERE relid = ${rel};`,
            ...holder.investigate,
            `VACUUM (VERBOSE) ${name};   -- its output says how many dead row versions "cannot be removed yet" and the oldest xmin`,
          ],
          how_to_fix: [...holder.fix, `VACUUM (ANALYZE, VERBOSE) ${name};   -- once the holder has gone`],
          metrics: { ...metrics, ...holder.metrics },
        }
      }
      return {
        severity,
        object,
        title: `Many dead rows in ${name}`,
        detail: `${name} has ${n(table.n_dead_tup!)} dead rows against ${n(table.n_live_tup ?? 0)} live ones (${pct(ratio)} dead)${size}; ${lastVacuum(table)}.${
          off
            ? ' Autovacuum is turned off for this table (autovacuum_enabled or toast.autovacuum_enabled = false in its storage parameters), so only a manual VACUUM removes them.'
            : ''
        } Dead rows bloat the table and its indexes and slow every scan of them.${mayHold(table)}`,
        recommendation: off
          ? 'Vacuum the table now and turn autovacuum back on for it (RESET falls back to the server-wide autovacuum settings); if it was turned off to keep vacuum out of bulk loads, vacuum the table after each load or on a schedule instead.'
          : 'Vacuum the table now, then find why autovacuum fell behind: autovacuum turned off for the table, a long-running transaction or an abandoned replication slot holding back the cleanup horizon, or a scale factor too large for a table this size (lower autovacuum_vacuum_scale_factor for it).',
        how_to_investigate: [
          `SELECT n_live_tup, n_dead_tup, last_vacuum, last_autovacuum, autovacuum_count FROM pg_stat_user_tables WHERE relid = ${rel};`,
          `SELECT c.reloptions, toast.reloptions AS toast_reloptions FROM pg_class c LEFT JOIN pg_class toast ON toast.oid = c.reltoastrelid WHERE c.oid = ${rel};   -- autovacuum_enabled=false, or a large scale factor?`,
          'SELECT pid, state, xact_start, backend_xmin, left(query, 80) AS query FROM pg_stat_activity WHERE backend_xmin IS NOT NULL ORDER BY age(backend_xmin) DESC LIMIT 5;   -- old snapshots keep dead rows alive',
          'SELECT slot_name, active, xmin, catalog_xmin FROM pg_replication_slots ORDER BY age(xmin) DESC NULLS LAST;',
          'SELECT * FROM pg_stat_progress_vacuum;',
          ...(standingHolds.get(table)?.blamed === false && standingHolds.get(table)?.before !== null
            ? []
            : mayHold(table)
              ? standing!.investigate.slice(0, 1)
              : []),
        ],
        how_to_fix: [
          `VACUUM (ANALYZE, VERBOSE) ${name};`,
          // Known on (from the agent): nothing to turn back on; unknown (an older agent): the conditional reset.
          ...(off
            ? [`${resetAutovacuum(name)}   -- autovacuum is turned off for it`]
            : table.autovacuum_enabled === null
              ? [`${resetAutovacuum(name)}   -- if autovacuum was turned off for it`]
              : []),
          `ALTER TABLE ${name} SET (autovacuum_vacuum_scale_factor = 0.05);   -- vacuum after 5 % of the rows changed instead of 20 %`,
        ],
        metrics: standingHolds.has(table)
          ? {
              ...metrics,
              standing_holder: standing!.object,
              standing_holder_since: standing!.since,
              dead_rows_before_holder: standingHolds.get(table)!.before,
              holder_blamed: standingHolds.get(table)!.blamed ? 1 : 0,
            }
          : metrics,
      }
    })

    const rest = flagged.slice(t.max_findings)
    if (rest.length > 0) {
      const dead = rest.reduce((sum, r) => sum + r.table.n_dead_tup!, 0)
      const off = rest
        .filter((r) => r.table.autovacuum_enabled === false)
        .map((r) => pgQualified(r.table.schema_name, r.table.table_name))
      const held = rest.filter((r) => r.holder)
      const holder = held[0]?.holder
      findings.push({
        severity: rest.some((r) => r.severity === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more tables with many dead rows`,
        detail: `Besides the tables named above, ${rest.length} more tables are past ${pct(t.warning_ratio, 0)} dead rows, ${n(dead)} dead rows in all.${
          off.length > 0
            ? ` Autovacuum is turned off for ${off.length} of them: ${off.slice(0, 20).join(', ')}${off.length > 20 ? ', ...' : ''}.`
            : ''
        }${holder ? ` VACUUM cannot clean ${held.length} of them until ${holder.ends}: ${holder.about}.` : ''}`,
        recommendation:
          'Autovacuum is behind across many tables: check for long transactions and abandoned replication slots, then consider more autovacuum workers (autovacuum_max_workers) and a higher autovacuum_vacuum_cost_limit.',
        how_to_investigate: [
          `SELECT relid::regclass, n_live_tup, n_dead_tup, last_autovacuum FROM pg_stat_user_tables WHERE n_dead_tup >= ${t.min_dead_rows} ORDER BY n_dead_tup DESC;`,
        ],
        how_to_fix: [
          ...(holder?.fix ?? []),
          'VACUUM (ANALYZE);   -- the whole database',
          ...off.slice(0, 100).map(resetAutovacuum),
        ],
        objects: [
          ...rest.slice(0, 100).map((r) => pgObject(r.table.schema_name, r.table.table_name)),
          ...(holder ? [holder.object] : []),
        ],
        metrics: {
          tables: rest.length,
          n_dead_tup: dead,
          ...(holder ? { held_tables: held.length, ...holder.metrics } : {}),
        },
      })
    }
    return findings
  },
}
