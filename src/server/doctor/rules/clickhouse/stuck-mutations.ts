// Mutations (ALTER TABLE ... UPDATE / DELETE) that do not finish: the agent marks one stuck when its
// latest attempt failed or it has run over an hour (collectors/clickhouse/mutations.ts). A failing
// mutation is retried forever and holds back the mutations queued after it on its table, so it is
// critical as soon as it is seen (failing_critical_age_s 0); a slow one is a warning until it is a day
// old (critical_age_s). Altinity's clickhouse-operator alerts on
// unfinished mutations (ClickHouseTooManyMutations) and points to their errors and KILL MUTATION.
import type { MutationEntry } from '../../../../shared/wire.ts'
import { chString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, type Severity, duration } from '../../types.ts'
import { counted, short, tableFilter } from './common.ts'

const defaults = {
  /** A stuck mutation that is not failing becomes critical at this age. */
  critical_age_s: 86_400,
  /** A failing mutation (its latest attempt failed) is critical from this age: 0, at once. */
  failing_critical_age_s: 0,
  /** Mutations named one finding each, failing and oldest first; the rest are counted in one more. */
  max_findings: 10,
}

export const stuckMutations: Rule<typeof defaults> = {
  id: 'ch_stuck_mutations',
  engine: 'clickhouse',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(stuckMutations)
    const severityOf = (m: MutationEntry): Severity => (ctx.now - m.create_time >= (m.latest_fail_reason !== '' ? t.failing_critical_age_s : t.critical_age_s) * 1000 ? 'critical' : 'warning')
    const stuck = ((await ctx.mutations())?.payload ?? [])
      .filter((m) => m.stuck && !m.is_done)
      .sort((a, b) => Number(b.latest_fail_reason !== '') - Number(a.latest_fail_reason !== '') || a.create_time - b.create_time)

    const findings: FindingDraft[] = stuck.slice(0, t.max_findings).map((m) => {
      const filter = `${tableFilter(m.database, m.table)} AND mutation_id = ${chString(m.mutation_id)}`
      const age = Math.max(0, ctx.now - m.create_time)
      const failing = m.latest_fail_reason !== ''
      return {
        severity: severityOf(m),
        object: `${m.database}.${m.table}:${m.mutation_id}`,
        objects: [`${m.database}.${m.table}`, `${m.database}.${m.table}:${m.mutation_id}`],
        title: failing ? `Mutation ${m.mutation_id} on ${m.database}.${m.table} keeps failing` : `Mutation ${m.mutation_id} on ${m.database}.${m.table} is not finishing`,
        detail:
          `Mutation ${m.mutation_id} on ${m.database}.${m.table} was created ${duration(age)} ago and still has ${counted(m.parts_to_do, 'part')} to do` +
          (failing ? `; its latest attempt${m.latest_fail_time ? ` (${new Date(m.latest_fail_time).toISOString()})` : ''} failed: ${short(m.latest_fail_reason, 500)}` : '.') +
          ` The command: ${short(m.command, 300)}`,
        recommendation: failing
          ? 'ClickHouse retries a failing mutation forever, and the mutations queued after it on this table wait behind it. Fix what the error names (often an expression that throws on some rows, or a type that does not fit), or kill the mutation and issue a corrected one.'
          : 'A mutation rewrites every part it touches: on a large table that takes long, and it competes with merges for the background pool. Check its progress below; if it is not needed any more, kill it.',
        how_to_investigate: [
          `SELECT mutation_id, command, create_time, parts_to_do, is_done, latest_failed_part, latest_fail_time, latest_fail_reason FROM system.mutations WHERE ${filter};`,
          `SELECT mutation_id, command, create_time, parts_to_do FROM system.mutations WHERE ${tableFilter(m.database, m.table)} AND NOT is_done ORDER BY create_time;   -- what waits behind it`,
          `SELECT elapsed, progress, result_part_name FROM system.merges WHERE ${tableFilter(m.database, m.table)} AND is_mutation;`,
        ],
        how_to_fix: [`KILL MUTATION WHERE ${filter};   -- parts already rewritten keep the change; then issue a corrected ALTER if it is still needed`],
        metrics: { parts_to_do: m.parts_to_do, age_s: Math.round(age / 1000), failing: failing ? 1 : 0 },
      }
    })

    const rest = stuck.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((m) => severityOf(m) === 'critical') ? 'critical' : 'warning',
        title: `${rest.length} more stuck mutations`,
        detail: `Besides the mutations named above, ${rest.length} more are failing or running for over an hour: ${rest
          .slice(0, 20)
          .map((m) => `${m.database}.${m.table} ${m.mutation_id}`)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation: 'Many stuck mutations usually come from one job issuing ALTER ... UPDATE / DELETE in a loop; stop that job, then kill the mutations it left behind.',
        how_to_investigate: ['SELECT database, table, count() AS mutations, countIf(latest_fail_reason != \'\') AS failing, min(create_time) AS oldest FROM system.mutations WHERE NOT is_done GROUP BY database, table ORDER BY mutations DESC;'],
        how_to_fix: ["KILL MUTATION WHERE database = '<database>' AND table = '<table>' AND NOT is_done;   -- for each table reviewed"],
        objects: rest.slice(0, 100).map((m) => `${m.database}.${m.table}:${m.mutation_id}`),
        metrics: { mutations: rest.length },
      })
    }
    return findings
  },
}
