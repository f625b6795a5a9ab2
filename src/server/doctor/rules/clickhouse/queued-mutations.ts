// Too many mutations waiting on one table: `queue_warning` (100) or more not done and none failing.
// Each mutation rewrites the parts it touches, one after another, so a job that issues an ALTER ...
// UPDATE / DELETE per row or per batch builds a queue that takes hours and competes with merges;
// nothing is stuck yet, so ch_stuck_mutations says nothing. A table with a failing mutation is left
// to ch_stuck_mutations, which counts its queue under the failing one. Altinity's clickhouse-operator
// warns on the same (ClickHouseTooManyMutations, more than 100 not done). One finding per table.
import { type FindingDraft, type Rule, duration } from '../../types.ts'
import { count, counted, short, tableFilter } from './common.ts'
import { failing, pendingByTable } from './stuck-mutations.ts'

const defaults = {
  /** Not-done mutations on one table, none failing, from which it is a warning. */
  queue_warning: 100,
}

export const queuedMutations: Rule<typeof defaults> = {
  id: 'ch_queued_mutations',
  summary:
    'Too many mutations waiting on one table while none fails: a queue that takes hours and competes with merges.',
  collectors: ['mutations'],
  engine: 'clickhouse',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(queuedMutations)
    const findings: FindingDraft[] = []
    for (const [table, pending] of pendingByTable((await ctx.mutations())?.payload ?? [])) {
      if (pending.length < t.queue_warning || pending.some(failing)) continue
      const oldest = pending[0]!
      const { database, table: name } = oldest
      const partsToDo = pending.reduce((sum, m) => sum + m.parts_to_do, 0)
      findings.push({
        severity: 'warning',
        object: table,
        objects: [table],
        title: `${counted(pending.length, 'mutation')} queued on ${table}`,
        detail:
          `${count(pending.length)} mutations of ${table} are not done (a warning from ${count(t.queue_warning)}), none of them failing, with ${counted(partsToDo, 'part')} still to rewrite between them. ` +
          `The oldest, ${oldest.mutation_id}, was created ${duration(Math.max(0, ctx.now - oldest.create_time))} ago: ${short(oldest.command, 200)}`,
        recommendation:
          'Every mutation rewrites the parts it touches, one after another, so many small ALTER ... UPDATE / DELETE statements make a queue that takes hours and holds back merges. Batch the changes into fewer mutations (one ALTER with a wider WHERE), use lightweight DELETE, or model updates as inserts (ReplacingMergeTree, CollapsingMergeTree).',
        how_to_investigate: [
          `SELECT count() AS mutations, min(create_time) AS oldest, sum(parts_to_do) AS parts_to_do FROM system.mutations WHERE ${tableFilter(database, name)} AND NOT is_done;`,
          `SELECT left(command, 100) AS command, count() AS mutations FROM system.mutations WHERE ${tableFilter(database, name)} AND NOT is_done GROUP BY command ORDER BY mutations DESC LIMIT 10;   -- which job issues them`,
        ],
        how_to_fix: [
          `KILL MUTATION WHERE ${tableFilter(database, name)} AND NOT is_done;   -- only once the job that issues them is stopped and their changes are not needed, or will be made in one batched ALTER`,
        ],
        metrics: {
          queued: pending.length,
          parts_to_do: partsToDo,
          oldest_age_s: Math.round(Math.max(0, ctx.now - oldest.create_time) / 1000),
        },
      })
    }
    return findings
  },
}
