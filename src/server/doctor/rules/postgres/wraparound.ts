// Transaction ID and multixact ID wraparound: the age of the database's oldest unfrozen XID
// (age(datfrozenxid)) and multixact (mxid_age(datminmxid)) against the 2^31 PostgreSQL can tell
// apart; it stops assigning new IDs 3 million short of that, and the database goes read-only until a
// VACUUM freezes the old rows. Anti-wraparound autovacuum should start at autovacuum_freeze_max_age
// (default 200 million), so an age far past it means freezing is failing or held back. Thresholds:
// warning at 500 million (PgHero's transaction_id_danger default, as the Aiven and Timescale notes
// describe it), critical at 1.5 billion (AWS's early-warning guidance for RDS escalates between 1 and
// 1.5 billion, leaving ~600 million to freeze in).
// VACUUM (FREEZE) cannot freeze past the xmin horizon: when what holds it (xmin-holders.ts) is itself
// past the warning age, freezing cannot bring the database below it, so the finding names the holder
// and puts ending it first.
import { type FindingDraft, type Rule, pct, severityAbove } from '../../types.ts'
import { xminHolders } from '../../xmin-holders.ts'

const defaults = {
  warning_age: 500_000_000,
  critical_age: 1_500_000_000,
  /** Multixact IDs run out the same way, against the same 2^31. */
  warning_mxid_age: 500_000_000,
  critical_mxid_age: 1_500_000_000,
}

const LIMIT = 2 ** 31
const n = (v: number) => v.toLocaleString('en-US')

export const wraparound: Rule<typeof defaults> = {
  id: 'pg_wraparound',
  summary:
    'Transaction ID or multixact ID age near wraparound, past which the database goes read-only until VACUUM freezes old rows.',
  collectors: ['database_stats'],
  engine: 'postgres',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(wraparound)
    const stats = (await ctx.databaseStats())?.payload
    if (!stats) return []
    const kinds = [
      {
        object: 'xid',
        age: stats.xid_age,
        freezeMaxAge: stats.autovacuum_freeze_max_age,
        setting: 'autovacuum_freeze_max_age',
        what: 'transaction ID',
        warning: t.warning_age,
        critical: t.critical_age,
        ageOf: 'greatest(age(c.relfrozenxid), age(t.relfrozenxid))',
        vacuumdb: `vacuumdb --all --freeze --min-xid-age=${t.warning_age} --jobs=4`,
      },
      {
        object: 'mxid',
        age: stats.mxid_age,
        freezeMaxAge: stats.autovacuum_multixact_freeze_max_age,
        setting: 'autovacuum_multixact_freeze_max_age',
        what: 'multixact ID',
        warning: t.warning_mxid_age,
        critical: t.critical_mxid_age,
        ageOf: 'greatest(mxid_age(c.relminmxid), mxid_age(t.relminmxid))',
        vacuumdb: `vacuumdb --all --freeze --min-mxid-age=${t.warning_mxid_age} --jobs=4`,
      },
    ]
    const findings: FindingDraft[] = []
    for (const k of kinds) {
      if (typeof k.age !== 'number') continue
      const severity = severityAbove(k.age, k.warning, k.critical)
      if (!severity) continue
      // Transaction IDs only: what holds multixacts back is not reported.
      const oldestHolder = k.object === 'xid' ? (await xminHolders(ctx))[0] : undefined
      const holder = oldestHolder && oldestHolder.freezeAge >= k.warning ? oldestHolder : undefined
      const held = holder
        ? ` VACUUM (FREEZE) cannot freeze past the xmin horizon, which ${holder.about} holds ${n(holder.freezeAge)} transaction IDs back: until ${holder.ends}, no VACUUM can bring the age below that.`
        : ''
      const freeze =
        typeof k.freezeMaxAge === 'number'
          ? ` ${k.setting} is ${n(k.freezeMaxAge)}: ${k.age > k.freezeMaxAge ? `anti-wraparound autovacuum should have frozen the oldest tables ${n(k.age - k.freezeMaxAge)} ${k.what}s ago, so it is failing, too slow, or held back by an old transaction, replication slot or prepared transaction` : 'anti-wraparound autovacuum has not started yet'}.`
          : ''
      const oldest = `SELECT c.oid::regclass AS table_name, ${k.ageOf} AS age, pg_size_pretty(pg_total_relation_size(c.oid)) AS size FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid WHERE c.relkind IN ('r', 'm') ORDER BY 2 DESC LIMIT 20;`
      findings.push({
        severity,
        object: k.object,
        title: `${k.what[0]!.toUpperCase()}${k.what.slice(1)} wraparound: ${pct(k.age / LIMIT, 0)} of the ID space used`,
        detail:
          `The oldest unfrozen ${k.what} in this database is ${n(k.age)} ${k.what}s old, ${pct(k.age / LIMIT)} of the 2^31 (${n(LIMIT)}) ` +
          `PostgreSQL can tell apart; ${n(Math.max(0, LIMIT - 3_000_000 - k.age))} remain before it stops assigning new ones and the database goes read-only.${freeze}${held}`,
        recommendation:
          (holder ? `First end what holds the horizon: ${holder.advice} ` : '') +
          'Freeze the oldest tables now with a manual VACUUM (FREEZE), largest age first, and watch it progress. First end whatever holds back the xmin horizon ' +
          '(see the pg_xmin_horizon finding: long transactions, stale replication slots, forgotten prepared transactions), or VACUUM cannot freeze past it. ' +
          'Then make autovacuum keep up: more autovacuum_max_workers, a higher autovacuum_vacuum_cost_limit.',
        how_to_investigate: [
          'SELECT datname, age(datfrozenxid) AS xid_age, mxid_age(datminmxid) AS mxid_age FROM pg_database ORDER BY 2 DESC;',
          oldest,
          'SELECT p.pid, p.datname, p.relid::regclass, p.phase, p.heap_blks_scanned, p.heap_blks_total, a.query FROM pg_stat_progress_vacuum p JOIN pg_stat_activity a USING (pid);',
          `SHOW ${k.setting};`,
          ...(holder?.investigate ?? []),
        ],
        how_to_fix: [
          ...(holder?.fix ?? []),
          `SELECT format('VACUUM (FREEZE, VERBOSE) %s;', c.oid::regclass) FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid WHERE c.relkind IN ('r', 'm') ORDER BY ${k.ageOf} DESC LIMIT 10 \\gexec`,
          `${k.vacuumdb}   # every database, the tables past ${n(k.warning)}`,
        ],
        ...(holder ? { objects: [k.object, holder.object] } : {}),
        metrics: {
          age: k.age,
          used_ratio: Number((k.age / LIMIT).toFixed(4)),
          [k.setting]: typeof k.freezeMaxAge === 'number' ? k.freezeMaxAge : null,
          ...(holder?.metrics ?? {}),
        },
      })
    }
    return findings
  },
}
