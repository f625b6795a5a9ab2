// Mutations (ALTER TABLE ... UPDATE / DELETE) that do not finish, one finding per table: the agent
// marks one stuck when its latest attempt failed or it has run over an hour
// (collectors/clickhouse/mutations.ts). ClickHouse runs a table's mutations in order and copies the
// failure reason of a failing one onto every mutation queued behind it, so a table with one bad
// ALTER shows many "failing" mutations: the finding is led by the table's oldest failing mutation (by
// create_time, ties broken by the mutation's number: mutation_12.txt, or 0000000012 on Replicated
// tables) and counts the others under it. Its key is the table's, so one failure is one alert. A
// failing mutation is retried forever and holds back the rest, so it is critical as soon as it is
// seen (failing_critical_age_s 0); a slow one is a warning until it is a day old (critical_age_s).
// Altinity's clickhouse-operator alerts on unfinished mutations (ClickHouseTooManyMutations) and
// points to their errors and KILL MUTATION.
import type { MutationEntry } from '../../../../shared/wire.ts'
import { chString } from '../../sql-text.ts'
import { type FindingDraft, type Rule, type Severity, duration } from '../../types.ts'
import { count, counted, short, tableFilter } from './common.ts'

const defaults = {
  /** A stuck mutation that is not failing becomes critical at this age. */
  critical_age_s: 86_400,
  /** A failing mutation (its latest attempt failed) is critical from this age: 0, at once. */
  failing_critical_age_s: 0,
  /** Tables named one finding each, those with a failing mutation and the oldest first; the rest are counted in one more. */
  max_findings: 10,
}

/** The number in a mutation's id (`mutation_12.txt`, `0000000012`) as digits without leading zeros; '' when it has none. */
function mutationNumber(id: string): string {
  const digits = /(\d+)(?!.*\d)/s.exec(id)?.[1] ?? ''
  return digits.replace(/^0+(?=\d)/, '')
}

/** Mutation numbers compared as unbounded integers (block numbers are 64-bit): shorter is smaller. */
const byNumber = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)

/** The order ClickHouse runs a table's mutations in: created first, then the lower number; the id last. */
export function mutationOrder(a: MutationEntry, b: MutationEntry): number {
  return (
    a.create_time - b.create_time ||
    byNumber(mutationNumber(a.mutation_id), mutationNumber(b.mutation_id)) ||
    (a.mutation_id < b.mutation_id ? -1 : a.mutation_id > b.mutation_id ? 1 : 0)
  )
}

/** The mutations not done, by table (`db.table`), each list in the order ClickHouse runs them. */
export function pendingByTable(mutations: MutationEntry[]): Map<string, MutationEntry[]> {
  const tables = new Map<string, MutationEntry[]>()
  for (const m of mutations) {
    if (m.is_done) continue
    const key = `${m.database}.${m.table}`
    const list = tables.get(key)
    if (list) list.push(m)
    else tables.set(key, [m])
  }
  for (const list of tables.values()) list.sort(mutationOrder)
  return tables
}

/** A mutation whose last attempt failed (ClickHouse copies the reason onto those queued behind it). */
export const failing = (m: MutationEntry) => m.latest_fail_reason !== ''

interface TableCase {
  table: string
  /** The oldest failing mutation, else the oldest stuck one. */
  lead: MutationEntry
  /** The table's other mutations not done. */
  queued: MutationEntry[]
  severity: Severity
}

export const stuckMutations: Rule<typeof defaults> = {
  id: 'ch_stuck_mutations',
  summary:
    'Mutations that do not finish (the latest attempt failed, or over an hour old), one finding per table led by its oldest failing mutation.',
  collectors: ['mutations'],
  engine: 'clickhouse',
  category: 'maintenance',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(stuckMutations)
    const cases: TableCase[] = []
    for (const [table, pending] of pendingByTable((await ctx.mutations())?.payload ?? [])) {
      const lead = pending.find(failing) ?? pending.find((m) => m.stuck)
      if (!lead) continue
      const age = ctx.now - lead.create_time
      const severity: Severity =
        age >= (failing(lead) ? t.failing_critical_age_s : t.critical_age_s) * 1000 ? 'critical' : 'warning'
      cases.push({ table, lead, queued: pending.filter((m) => m !== lead), severity })
    }
    cases.sort(
      (a, b) =>
        Number(failing(b.lead)) - Number(failing(a.lead)) ||
        mutationOrder(a.lead, b.lead) ||
        (a.table < b.table ? -1 : a.table > b.table ? 1 : 0),
    )

    const findings: FindingDraft[] = cases.slice(0, t.max_findings).map(({ table, lead: m, queued, severity }) => {
      const filter = `${tableFilter(m.database, m.table)} AND mutation_id = ${chString(m.mutation_id)}`
      const age = Math.max(0, ctx.now - m.create_time)
      const isFailing = failing(m)
      const behind = queued.filter((q) => mutationOrder(m, q) < 0)
      const copied = behind.filter((q) => isFailing && q.latest_fail_reason === m.latest_fail_reason).length
      const queuedText =
        queued.length === 0
          ? ''
          : ` ${counted(queued.length, 'more mutation')} of the table ${queued.length === 1 ? 'is' : 'are'} not done (${behind.length} queued behind it` +
            (copied > 0
              ? `, ${copied} of them showing its failure, which ClickHouse copies onto the mutations waiting behind a failing one`
              : '') +
            `): ${queued
              .slice(0, 10)
              .map((q) => q.mutation_id)
              .join(', ')}${queued.length > 10 ? ', …' : ''}.`
      return {
        severity,
        object: table,
        objects: [table, `${table}:${m.mutation_id}`],
        title: isFailing
          ? `Mutation ${m.mutation_id} on ${table} keeps failing${queued.length > 0 ? `, ${count(queued.length)} more waiting` : ''}`
          : `Mutation ${m.mutation_id} on ${table} is not finishing${queued.length > 0 ? `, ${count(queued.length)} more waiting` : ''}`,
        detail:
          `Mutation ${m.mutation_id} on ${table} was created ${duration(age)} ago and still has ${counted(m.parts_to_do, 'part')} to do` +
          (isFailing
            ? `; its latest attempt${m.latest_fail_time ? ` (${new Date(m.latest_fail_time).toISOString()})` : ''} failed: ${short(m.latest_fail_reason, 500)}`
            : '.') +
          ` The command: ${short(m.command, 300)}` +
          queuedText,
        recommendation: isFailing
          ? 'ClickHouse retries a failing mutation forever, and the mutations queued after it on this table wait behind it (showing its error). Fix what the error names (often an expression that throws on some rows, or a type that does not fit), or kill this mutation and issue a corrected one; the ones behind it then run.'
          : 'A mutation rewrites every part it touches: on a large table that takes long, and it competes with merges for the background pool. Check its progress below; if it is not needed any more, kill it.',
        how_to_investigate: [
          `SELECT mutation_id, command, create_time, parts_to_do, is_done, latest_failed_part, latest_fail_time, latest_fail_reason FROM system.mutations WHERE ${filter};`,
          `SELECT mutation_id, command, create_time, parts_to_do, latest_fail_reason != '' AS failing FROM system.mutations WHERE ${tableFilter(m.database, m.table)} AND NOT is_done ORDER BY create_time, mutation_id;   -- what waits behind it`,
          `SELECT elapsed, progress, result_part_name FROM system.merges WHERE ${tableFilter(m.database, m.table)} AND is_mutation;`,
        ],
        how_to_fix: [
          `KILL MUTATION WHERE ${filter};   -- parts already rewritten keep the change; then issue a corrected ALTER if it is still needed`,
        ],
        metrics: {
          parts_to_do: m.parts_to_do,
          age_s: Math.round(age / 1000),
          failing: isFailing ? 1 : 0,
          queued: queued.length,
        },
      }
    })

    const rest = cases.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((c) => c.severity === 'critical') ? 'critical' : 'warning',
        title: `${counted(rest.length, 'more table')} with stuck mutations`,
        detail: `Besides the tables named above, ${rest.length} more have a mutation failing or running for over an hour: ${rest
          .slice(0, 20)
          .map((c) => `${c.table} ${c.lead.mutation_id}${c.queued.length > 0 ? ` (+${c.queued.length})` : ''}`)
          .join(', ')}${rest.length > 20 ? ', …' : ''}.`,
        recommendation:
          'Many stuck mutations usually come from one job issuing ALTER ... UPDATE / DELETE in a loop; stop that job, then kill the mutations it left behind.',
        how_to_investigate: [
          "SELECT database, table, count() AS mutations, countIf(latest_fail_reason != '') AS failing, min(create_time) AS oldest FROM system.mutations WHERE NOT is_done GROUP BY database, table ORDER BY mutations DESC;",
        ],
        how_to_fix: [
          "KILL MUTATION WHERE database = '<database>' AND table = '<table>' AND NOT is_done;   -- for each table reviewed",
        ],
        objects: rest.slice(0, 100).map((c) => c.table),
        metrics: { tables: rest.length, mutations: rest.reduce((sum, c) => sum + 1 + c.queued.length, 0) },
      })
    }
    return findings
  },
}
