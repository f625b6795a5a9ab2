// The xmin horizon held back: VACUUM can neither remove the rows deleted or updated after the oldest
// transaction still needing them nor freeze past it, so tables bloat and wraparound creeps closer.
// The kinds of holders (xmin-holders.ts, from the agent's xmin_holders section or, from older agents,
// the database_stats gauges): a backend's transaction or snapshot, or a WAL sender relaying a standby's
// hot_standby_feedback (named by pid), replication slots' xmin/catalog_xmin (an abandoned slot or
// hot_standby_feedback), and prepared transactions. Thresholds: a transaction open
// over an hour is postgres-checkup's P1 (G002) → warning, a day → critical; in XIDs, 10 million
// (a fifth of vacuum_freeze_min_age's 50 million default) → warning, and 100 million, half of
// autovacuum_freeze_max_age's default, where freezing starts to fail → critical.
// A holder is also raised as soon as it keeps VACUUM from removing the dead rows of a table
// pg_dead_tuples flags (that VACUUM finished after the holder began), at that table's severity however
// young the holder is: the dead rows are its doing, and it is the thing to end.
import type { FindingDraft, Rule, Severity } from '../../types.ts'
import { duration, severityAbove } from '../../types.ts'
import { type Holder, xminHolders } from '../../xmin-holders.ts'
import { deadTuples, flaggedTables } from './dead-tuples.ts'
import { pgObject } from '../../sql-text.ts'

const defaults = {
  warning_xids: 10_000_000,
  critical_xids: 100_000_000,
  warning_s: 3600,
  critical_s: 86_400,
}

const n = (v: number) => v.toLocaleString('en-US')

const RANK: Record<Severity, number> = { critical: 2, warning: 1, info: 0 }
function worst(...severities: (Severity | undefined)[]): Severity | undefined {
  return severities.reduce<Severity | undefined>((w, s) => (s && (!w || RANK[s] > RANK[w]) ? s : w), undefined)
}

const CLEANUP =
  'Until it goes, VACUUM keeps every row version deleted or updated since it began (tables and indexes bloat) and cannot freeze past it.'

export const xminHorizon: Rule<typeof defaults> = {
  id: 'pg_xmin_horizon',
  summary:
    'The xmin horizon held back by a session, WAL sender, replication slot or prepared transaction (named), so VACUUM can neither clean nor freeze.',
  collectors: ['database_stats', 'replication'],
  engine: 'postgres',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(xminHorizon)
    const s = (await ctx.databaseStats())?.payload
    const holders = await xminHolders(ctx)
    if (holders.length === 0) return []
    const num = (v: number | null | undefined) => (typeof v === 'number' ? v : null)
    const byXids = (age: number) => severityAbove(age, t.warning_xids, t.critical_xids)
    const byTime = (seconds: number | null) =>
      seconds === null ? undefined : severityAbove(seconds, t.warning_s, t.critical_s)
    // The tables whose dead rows each holder keeps VACUUM from removing (pg_dead_tuples' own judgement).
    const held = new Map<Holder, { name: string; dead: number; severity: Severity }[]>()
    for (const f of await flaggedTables(ctx, ctx.thresholds(deadTuples))) {
      if (f.holder)
        held.set(f.holder, [
          ...(held.get(f.holder) ?? []),
          {
            name: pgObject(f.table.schema_name, f.table.table_name),
            dead: f.table.n_dead_tup ?? 0,
            severity: f.severity,
          },
        ])
    }
    const heldText = (tables: { name: string; dead: number }[]) =>
      tables.length === 0
        ? ''
        : ` It keeps VACUUM from removing ${n(tables.reduce((sum, x) => sum + x.dead, 0))} dead rows in ${tables.length === 1 ? '' : `${tables.length} tables: `}${tables
            .slice(0, 10)
            .map((x) => x.name)
            .join(', ')}${tables.length > 10 ? ', …' : ''}.`
    const heldSeverity = (tables: { severity: Severity }[]) => worst(...tables.map((x) => x.severity))
    const heldMetrics = (tables: { dead: number }[]) => ({
      held_tables: tables.length,
      held_dead_rows: tables.reduce((sum, x) => sum + x.dead, 0),
    })
    const findings: FindingDraft[] = []

    // The oldest session (or WAL sender): the one whose end moves the horizon.
    const backend = holders.find((h) => h.kind === 'backend' || h.kind === 'walsender')
    if (backend) {
      const age = backend.freezeAge
      const pid = Number(backend.object.slice('pid '.length))
      const xactAge = backend.ageS
      const tables = held.get(backend) ?? []
      const severity = worst(byXids(age), byTime(xactAge), heldSeverity(tables))
      if (severity) {
        findings.push({
          severity,
          object: backend.object,
          title: `${backend.kind === 'walsender' ? "A standby's feedback" : 'A transaction'} holds back cleanup: ${n(age)} transactions${xactAge !== null ? `, ${duration(xactAge * 1000)}` : ''}`,
          detail: `The oldest transaction or snapshot of this database belongs to ${backend.about}: ${n(age)} transactions old. ${CLEANUP}${heldText(tables)}`,
          recommendation: backend.advice,
          how_to_investigate: backend.investigate,
          how_to_fix: backend.fix,
          metrics: {
            pid,
            xmin_age_xids: age,
            transaction_age_s: xactAge === null ? null : Math.round(xactAge),
            ...heldMetrics(tables),
          },
        })
      }
    }

    const slots = holders.filter((h) => h.kind === 'slot')
    if (slots.length > 0) {
      const slotAge = Math.max(...slots.map((h) => h.freezeAge))
      const tables = slots.flatMap((h) => held.get(h) ?? [])
      const slotSeverity = worst(byXids(slotAge), heldSeverity(tables))
      const replication = (await ctx.replication())?.payload.slots ?? []
      const inactive = slots.filter((h) => h.fix.some((f) => f.startsWith('SELECT pg_drop_replication_slot')))
      if (slotSeverity) {
        findings.push({
          severity: slotSeverity,
          object: 'replication slots',
          objects: slots.map((h) => h.object),
          title: `A replication slot holds back cleanup: ${n(slotAge)} transactions`,
          detail:
            `The oldest xmin or catalog_xmin of the server's replication slots is ${n(slotAge)} transactions old; the slots: ${slots.map((h) => h.about).join(', ')}` +
            `${inactive.length > 0 ? ' — an inactive slot is the usual holder' : ''}. ${CLEANUP}${heldText(tables)}`,
          recommendation:
            'A slot whose consumer is gone (a decommissioned replica, a stopped CDC connector) holds the horizon forever: drop it, or bring its consumer back. ' +
            "A physical slot of a standby with hot_standby_feedback holds it for the standby's longest query.",
          how_to_investigate: slots[0]!.investigate,
          how_to_fix: [...new Set(slots.flatMap((h) => h.fix))],
          metrics: {
            xmin_age_xids: slotAge,
            slots: Math.max(replication.length, slots.length),
            inactive_slots: inactive.length,
            ...heldMetrics(tables),
          },
        })
      }
    }

    const prepared = holders.filter((h) => h.kind === 'prepared')
    if (prepared.length > 0) {
      const oldest = prepared[0]!
      const preparedAge = oldest.freezeAge
      const preparedFor = oldest.ageS
      const tables = prepared.flatMap((h) => held.get(h) ?? [])
      const severity = worst(byXids(preparedAge), byTime(preparedFor), heldSeverity(tables))
      const count = num(s?.prepared_xacts) ?? prepared.length
      if (severity) {
        findings.push({
          severity,
          object: 'prepared transactions',
          objects: prepared.map((h) => h.object),
          title: `A prepared transaction holds back cleanup: ${n(preparedAge)} transactions${preparedFor !== null ? `, ${duration(preparedFor * 1000)}` : ''}`,
          detail:
            `${count} prepared transaction${count === 1 ? '' : 's'} (PREPARE TRANSACTION, two-phase commit) ${count === 1 ? 'is' : 'are'} pending in this database; the oldest is ${oldest.about}. ` +
            `It survives restarts and keeps its locks. ${CLEANUP}${heldText(tables)}`,
          recommendation: `${oldest.advice} The command below rolls the oldest back; write COMMIT PREPARED in it to commit instead.`,
          how_to_investigate: oldest.investigate,
          how_to_fix: oldest.fix,
          metrics: {
            prepared_transactions: count,
            xmin_age_xids: preparedAge,
            prepared_age_s: preparedFor === null ? null : Math.round(preparedFor),
            ...heldMetrics(tables),
          },
        })
      }
    }
    return findings
  },
}
