// The xmin horizon held back: VACUUM can neither remove the rows deleted or updated after the oldest
// transaction still needing them nor freeze past it, so tables bloat and wraparound creeps closer.
// Three kinds of holders, from the database_stats gauges: a backend's transaction or snapshot (named
// by pid, with the session from the activity snapshot), replication slots' xmin/catalog_xmin (an
// abandoned slot or hot_standby_feedback), and prepared transactions. Thresholds: a transaction open
// over an hour is postgres-checkup's P1 (G002) → warning, a day → critical; in XIDs, 10 million
// (a fifth of vacuum_freeze_min_age's 50 million default) → warning, and 100 million, half of
// autovacuum_freeze_max_age's default, where freezing starts to fail → critical.
import type { FindingDraft, Rule, Severity } from '../../types.ts'
import { duration, severityAbove } from '../../types.ts'
import { pgString } from '../../sql-text.ts'

const defaults = {
  warning_xids: 10_000_000,
  critical_xids: 100_000_000,
  warning_s: 3600,
  critical_s: 86_400,
}

const n = (v: number) => v.toLocaleString('en-US')
const short = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

const RANK: Record<Severity, number> = { critical: 2, warning: 1, info: 0 }
function worst(...severities: (Severity | undefined)[]): Severity | undefined {
  return severities.reduce<Severity | undefined>((w, s) => (s && (!w || RANK[s] > RANK[w]) ? s : w), undefined)
}

const CLEANUP =
  'Until it goes, VACUUM keeps every row version deleted or updated since it began (tables and indexes bloat) and cannot freeze past it.'

export const xminHorizon: Rule<typeof defaults> = {
  id: 'pg_xmin_horizon',
  engine: 'postgres',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(xminHorizon)
    const s = (await ctx.databaseStats())?.payload
    if (!s) return []
    const num = (v: number | null | undefined) => (typeof v === 'number' ? v : null)
    const byXids = (age: number) => severityAbove(age, t.warning_xids, t.critical_xids)
    const byTime = (seconds: number | null) => (seconds === null ? undefined : severityAbove(seconds, t.warning_s, t.critical_s))
    const findings: FindingDraft[] = []

    const backendAge = num(s.xmin_backend_age)
    const pid = num(s.xmin_backend_pid)
    const preparedAge = num(s.xmin_prepared_age)
    // A snapshot taken while a prepared transaction is pending has its XID as xmin: a backend no older
    // than the oldest prepared transaction is its bystander, not a holder of its own.
    if (backendAge !== null && pid !== null && (preparedAge === null || backendAge > preparedAge)) {
      const xactAge = num(s.xmin_backend_xact_age_s)
      const severity = worst(byXids(backendAge), byTime(xactAge))
      if (severity) {
        const session = (await ctx.activity()).entries.find((a) => Number(a.pid) === pid)
        const about = session
          ? `pid ${pid} (${[session.user && `user ${session.user}`, session.application_name && `application "${session.application_name}"`].filter(Boolean).join(', ') || 'unknown session'}, ${session.state}; ${session.state === 'active' ? 'running' : 'last statement'}: ${short(session.query_text)})`
          : `pid ${pid} (not a client session: a WAL sender relaying a standby's hot_standby_feedback, or a background worker)`
        findings.push({
          severity,
          object: `pid ${pid}`,
          title: `A transaction holds back cleanup: ${n(backendAge)} transactions${xactAge !== null ? `, ${duration(xactAge * 1000)}` : ''}`,
          detail: `The oldest transaction or snapshot of this database belongs to ${about}: ${n(backendAge)} transactions old${xactAge !== null ? `, open for ${duration(xactAge * 1000)}` : ''}. ${CLEANUP}`,
          recommendation:
            'Finish or end that transaction. If it is a report or an export, run it on a replica; if it is a standby\'s feedback, look at the standby\'s long queries. ' +
            'idle_in_transaction_session_timeout and statement_timeout stop the next one.',
          how_to_investigate: [
            `SELECT pid, datname, usename, application_name, backend_type, state, now() - xact_start AS transaction_age, age(backend_xid) AS xid_age, age(backend_xmin) AS xmin_age, query FROM pg_stat_activity WHERE backend_xid IS NOT NULL OR backend_xmin IS NOT NULL ORDER BY greatest(age(backend_xid), age(backend_xmin)) DESC LIMIT 10;`,
            'SELECT pid, application_name, client_addr, backend_xmin, age(backend_xmin) FROM pg_stat_replication;',
          ],
          how_to_fix: [`SELECT pg_terminate_backend(${pid});   -- rolls back its transaction; the horizon moves on at once`],
          metrics: { pid, xmin_age_xids: backendAge, transaction_age_s: xactAge === null ? null : Math.round(xactAge) },
        })
      }
    }

    const slotAge = num(s.xmin_slot_age)
    const slotSeverity = slotAge === null ? undefined : byXids(slotAge)
    if (slotAge !== null && slotSeverity) {
      const slots = (await ctx.replication())?.payload.slots ?? []
      const inactive = slots.filter((sl) => !sl.active)
      const names = (inactive.length > 0 ? inactive : slots).map((sl) => sl.slot_name)
      const listed = slots.map((sl) => `${sl.slot_name} (${sl.slot_type}, ${sl.active ? 'active' : 'inactive'})`).join(', ')
      findings.push({
        severity: slotSeverity,
        object: 'replication slots',
        objects: names.map((name) => `slot ${name}`),
        title: `A replication slot holds back cleanup: ${n(slotAge)} transactions`,
        detail:
          `The oldest xmin or catalog_xmin of the server's replication slots is ${n(slotAge)} transactions old` +
          `${listed ? `; the slots: ${listed}${inactive.length > 0 ? ` — an inactive slot is the usual holder` : ''}` : ''}. ${CLEANUP}`,
        recommendation:
          'A slot whose consumer is gone (a decommissioned replica, a stopped CDC connector) holds the horizon forever: drop it, or bring its consumer back. ' +
          'A physical slot of a standby with hot_standby_feedback holds it for the standby\'s longest query.',
        how_to_investigate: [
          'SELECT slot_name, slot_type, database, active, active_pid, xmin, age(xmin) AS xmin_age, catalog_xmin, age(catalog_xmin) AS catalog_xmin_age FROM pg_replication_slots ORDER BY greatest(age(xmin), age(catalog_xmin)) DESC NULLS LAST;',
        ],
        how_to_fix: names.map((name) => `SELECT pg_drop_replication_slot(${pgString(name)});   -- only once its consumer is gone for good`),
        metrics: { xmin_age_xids: slotAge, slots: slots.length, inactive_slots: inactive.length },
      })
    }

    if (preparedAge !== null) {
      const preparedFor = num(s.xmin_prepared_age_s)
      const severity = worst(byXids(preparedAge), byTime(preparedFor))
      const count = num(s.prepared_xacts) ?? 1
      if (severity) {
        findings.push({
          severity,
          object: 'prepared transactions',
          title: `A prepared transaction holds back cleanup: ${n(preparedAge)} transactions${preparedFor !== null ? `, ${duration(preparedFor * 1000)}` : ''}`,
          detail:
            `${count} prepared transaction${count === 1 ? '' : 's'} (PREPARE TRANSACTION, two-phase commit) ${count === 1 ? 'is' : 'are'} pending in this database; the oldest is ${n(preparedAge)} transactions old` +
            `${preparedFor !== null ? `, prepared ${duration(preparedFor * 1000)} ago` : ''}. It survives restarts and keeps its locks. ${CLEANUP}`,
          recommendation:
            'A prepared transaction waits for its transaction manager to COMMIT PREPARED or ROLLBACK PREPARED it. If that manager has forgotten it, decide with its owner which of the two to run (the command below rolls the oldest back; write COMMIT PREPARED in it to commit instead).',
          how_to_investigate: ['SELECT gid, prepared, owner, database, age(transaction) AS xid_age FROM pg_prepared_xacts ORDER BY prepared;'],
          how_to_fix: [
            "SELECT format('ROLLBACK PREPARED %L;', gid) FROM pg_prepared_xacts WHERE database = current_database() ORDER BY prepared LIMIT 1 \\gexec",
          ],
          metrics: { prepared_transactions: count, xmin_age_xids: preparedAge, prepared_age_s: preparedFor === null ? null : Math.round(preparedFor) },
        })
      }
    }
    return findings
  },
}
