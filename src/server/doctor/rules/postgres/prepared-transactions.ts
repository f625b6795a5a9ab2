// Prepared transactions (PREPARE TRANSACTION, two-phase commit) left pending: outside a system whose
// transaction manager commits them within seconds, one pending for minutes is an orphan. It survives
// restarts, keeps its locks (others wait on them) and holds back the xmin horizon (VACUUM cannot remove
// what it may still see). One finding per prepared transaction, named by its gid with its owner,
// database, age and what it holds: its locks (pg_locks rows without a pid of the virtual transaction
// holding its XID, counted by the agent) and its xmin's age in XIDs. From the agent's xmin_holders section (database_stats).
// Thresholds: 5 minutes → warning (check_postgres' txn_prepared and pgwatch flag far sooner than the
// hour pg_xmin_horizon waits for), an hour → critical; set warning_s higher on a database whose
// transaction manager keeps them longer on purpose (the database's thresholds: API or Settings page).
// The gid, owner and database are the monitored server's text: the title and detail quote the gid as a
// string constant and the names as identifiers (sql-text.ts), so no gid can forge an age or an object, or
// carry a line break or a bidirectional mark into them. The object keeps the raw gid: it is the key that
// xmin-holders.ts's findings name the same transaction by.
import { commentText, pgIdent, pgString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, duration, severityAbove } from '../../types.ts'

const defaults = {
  /** Seconds a prepared transaction may stay open before a warning (5 minutes). */
  warning_s: 300,
  /** Seconds before the finding is critical (an hour). */
  critical_s: 3600,
}

const n = (v: number) => v.toLocaleString('en-US')

export const preparedTransactions: Rule<typeof defaults> = {
  id: 'pg_prepared_transactions',
  engine: 'postgres',
  category: 'reliability',
  summary:
    'Prepared transactions (PREPARE TRANSACTION) left open past 5 minutes (warning_s): orphans outside a two-phase-commit system, holding their locks and the xmin horizon (named by gid, owner and database).',
  collectors: ['database_stats'],
  thresholds: defaults,
  // From any prepared transaction at all (0) to a month.
  ranges: { warning_s: { min: 0, max: 2_592_000 }, critical_s: { min: 0, max: 2_592_000 } },
  async check(ctx) {
    const t = ctx.thresholds(preparedTransactions)
    const named = await ctx.xminHolders()
    if (!named) return []
    const findings: FindingDraft[] = []
    for (const h of named.entries) {
      if (h.kind !== 'prepared' || typeof h.gid !== 'string' || typeof h.prepared_at !== 'number') continue
      const ageS = Math.max(0, (named.ts - h.prepared_at) / 1000)
      const severity = severityAbove(ageS, t.warning_s, t.critical_s)
      if (!severity) continue
      const gid = h.gid
      const locks = typeof h.locks === 'number' ? h.locks : null
      const xids = typeof h.xmin_age === 'number' ? h.xmin_age : null
      const holds = [
        locks === null ? 'its locks' : `${n(locks)} lock${locks === 1 ? '' : 's'}`,
        xids === null ? 'the xmin horizon' : `the xmin horizon ${n(xids)} transactions back`,
      ].join(' and ')
      const inDatabase = h.database ? ` in database ${pgIdent(h.database)}` : ''
      const quoted = pgString(gid)
      findings.push({
        severity,
        object: `prepared transaction ${gid}`,
        title: `Prepared transaction ${quoted} pending for ${duration(ageS * 1000)}`,
        detail:
          `Prepared transaction ${quoted}${h.owner ? ` (owner ${pgIdent(h.owner)}${inDatabase})` : inDatabase} was prepared ${duration(ageS * 1000)} ago and is neither committed nor rolled back. ` +
          `It holds ${holds}: sessions that need its rows or tables wait, VACUUM cannot remove rows deleted since it began, and it survives restarts until someone ends it.`,
        recommendation:
          'Ask its transaction manager (the application or coordinator that prepared it) whether it will still commit it. If that manager has forgotten it, decide with its owner whether to COMMIT PREPARED or ROLLBACK PREPARED it; outside two-phase commit, set max_prepared_transactions = 0 so none can be left again.',
        how_to_investigate: [
          `SELECT gid, prepared, now() - prepared AS pending_for, owner, database, age(transaction) AS xid_age FROM pg_prepared_xacts WHERE gid = ${quoted};`,
          `SELECT l.locktype, l.mode, l.relation::regclass AS relation FROM pg_prepared_xacts p JOIN pg_locks x ON x.locktype = 'transactionid' AND x.transactionid = p.transaction AND x.pid IS NULL JOIN pg_locks l ON l.pid IS NULL AND l.virtualtransaction = x.virtualtransaction WHERE p.gid = ${quoted};   -- what it holds`,
          "SELECT pid, wait_event_type, wait_event, now() - query_start AS waiting_for, left(query, 80) AS query FROM pg_stat_activity WHERE wait_event_type = 'Lock';   -- who waits",
        ],
        how_to_fix: [
          `ROLLBACK PREPARED ${quoted};   -- in database ${commentText(h.database ?? 'of the transaction', 60)}; write COMMIT PREPARED instead to keep its changes`,
        ],
        metrics: {
          gid,
          owner: h.owner ?? null,
          database: h.database ?? null,
          prepared_age_s: Math.round(ageS),
          locks,
          xmin_age_xids: xids,
        },
        as_of: named.ts,
      })
    }
    return findings
  },
}
