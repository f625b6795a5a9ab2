// Replication slots nobody consumes: an inactive slot keeps every WAL segment written since its
// restart_lsn (and a logical slot also holds back vacuum), until the disk fills. Runbooks that alert on
// slots (Crunchy pgMonitor, qonto's database-monitoring-framework) and PgHero flag any inactive slot.
// dbm warns once one retains more than 80 MB: PostgreSQL keeps min_wal_size (80 MB, five 16 MB segments,
// by default) of WAL files for recycling whatever the slots do, so below that a slot costs no disk;
// past it every byte is held for the slot alone, and a slot that its consumer has left grows without
// bound. Critical at 10 GB, or as soon as PostgreSQL says the slot's WAL is no longer safe (wal_status
// 'unreserved': past max_slot_wal_keep_size, removed at the next checkpoint) or already gone ('lost':
// the consumer cannot resume).
import { type FindingDraft, type Rule, type Severity, bytes, severityAbove } from '../../types.ts'
import { pgString } from '../../sql-text.ts'

const MB = 1024 ** 2
const GB = 1024 ** 3

const defaults = {
  /** min_wal_size's default: WAL PostgreSQL keeps for recycling anyway. */
  warning_bytes: 80 * MB,
  critical_bytes: 10 * GB,
  /** Slots named one finding each; the rest are counted in one more finding. */
  max_slots: 10,
}

const BROKEN = ['unreserved', 'lost']

export const inactiveSlots: Rule<typeof defaults> = {
  id: 'pg_inactive_replication_slot',
  summary:
    'Replication slots nobody consumes, keeping WAL (and, for logical slots, holding back vacuum) until the disk fills.',
  collectors: ['replication'],
  engine: 'postgres',
  category: 'replication',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(inactiveSlots)
    const status = (await ctx.replication())?.payload
    if (!status) return []
    const found: (FindingDraft & { retained: number })[] = []
    for (const slot of status.slots) {
      if (slot.active) continue
      const retained = slot.lag_bytes ?? 0
      const broken = slot.wal_status !== null && BROKEN.includes(slot.wal_status)
      const severity: Severity | undefined = broken
        ? 'critical'
        : severityAbove(retained, t.warning_bytes, t.critical_bytes)
      if (!severity) continue
      const name = pgString(slot.slot_name)
      found.push({
        retained,
        severity,
        object: slot.slot_name,
        title:
          slot.wal_status === 'lost'
            ? 'An inactive replication slot has lost its WAL'
            : 'An inactive replication slot retains WAL',
        detail:
          `The ${slot.slot_type} slot ${name} is not in use and holds back ${bytes(retained)} of WAL` +
          (slot.wal_status ? ` (wal_status ${slot.wal_status})` : '') +
          (slot.wal_status === 'lost'
            ? '; the WAL its consumer needs is gone, so that consumer cannot resume from it.'
            : '; PostgreSQL cannot remove that WAL until the slot is consumed or dropped.') +
          (slot.slot_type === 'logical'
            ? ' A logical slot also keeps vacuum from removing dead rows of the system catalogs.'
            : ''),
        recommendation:
          'Find the consumer of the slot (a replica, a backup tool, a logical replication or CDC client). If it is gone for good, drop the slot; if it will come back, make sure it does soon, and cap what a slot may retain with max_slot_wal_keep_size.',
        how_to_investigate: [
          'SELECT slot_name, slot_type, database, active, wal_status, pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)) AS retained_wal FROM pg_replication_slots ORDER BY pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) DESC NULLS LAST;',
          'SELECT pg_size_pretty(sum(size)) AS wal_on_disk FROM pg_ls_waldir();',
          "SELECT name, setting, unit FROM pg_settings WHERE name IN ('max_slot_wal_keep_size', 'max_wal_size');",
        ],
        how_to_fix: [
          `SELECT pg_drop_replication_slot(${name});`,
          "ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf();   -- a cap on what any slot may retain",
        ],
        metrics: { retained_bytes: retained, wal_status: slot.wal_status, slot_type: slot.slot_type },
      })
    }
    found.sort((a, b) => b.retained - a.retained)
    const named = found.slice(0, t.max_slots).map(({ retained: _r, ...f }) => f)
    const rest = found.slice(t.max_slots)
    if (rest.length > 0) {
      const total = rest.reduce((sum, f) => sum + f.retained, 0)
      named.push({
        severity: rest.some((f) => f.severity === 'critical') ? 'critical' : 'warning',
        title: 'More inactive replication slots retain WAL',
        detail: `${rest.length} more inactive slots hold back ${bytes(total)} of WAL between them: ${rest.map((f) => f.object).join(', ')}.`,
        recommendation: 'Drop the slots whose consumers are gone.',
        how_to_investigate: named[0]!.how_to_investigate,
        how_to_fix: rest.map((f) => `SELECT pg_drop_replication_slot(${pgString(f.object!)});`),
        objects: rest.map((f) => f.object!),
        metrics: { slots: rest.length, retained_bytes: total },
      })
    }
    return named
  },
}
