// The keys of causes (grouping.ts) from findings as the rules write them, no database needed: names are
// quoted part by part in a cause's key, so two tables whose dotted names read alike are two causes.
import { describe, expect, test } from 'bun:test'
import { causeOf, groupFindings, indexTarget } from '../../src/server/doctor/grouping.ts'
import { commentText, pgIdent, pgQualified } from '../../src/server/doctor/sql-text.ts'
import { memoryAdvice, memoryCommand, memoryReason } from '../../src/server/doctor/work-mem.ts'
import type { Finding } from '../../src/server/doctor/types.ts'

const finding = (
  rule: string,
  object: string | undefined,
  fields: Partial<Omit<Finding, 'cause'>> = {},
): Omit<Finding, 'cause'> => ({
  rule,
  key: object === undefined ? rule : `${rule}:${object}`,
  severity: 'warning',
  category: 'performance',
  title: `${rule} title`,
  detail: '',
  recommendation: '',
  how_to_investigate: [],
  how_to_fix: [],
  objects: object === undefined ? [] : [object],
  metrics: {},
  as_of: null,
  ...fields,
})

describe('cause keys quote each name', () => {
  // Schema x, table `a.b`; and schema `x.a`, table b: both read x.a.b once the parts are joined bare.
  const tables = [
    { schema: 'x', table: 'a.b', constraint: 'fk_one' },
    { schema: 'x.a', table: 'b', constraint: 'fk_two' },
  ]
  // As pg_unindexed_foreign_keys writes them: object schema.table.constraint, its CREATE INDEX on column c.
  const drafts = tables.map(({ schema, table, constraint }) =>
    finding('pg_unindexed_foreign_keys', `${schema}.${table}.${constraint}`, {
      how_to_fix: [
        `CREATE INDEX CONCURRENTLY ${pgIdent(`${table}_c_idx`)} ON ${pgQualified(schema, table)} (${pgIdent('c')});`,
      ],
    }),
  )

  test('x."a.b" and "x.a".b, each with an index wanted on c: two causes, each with its own CREATE INDEX', () => {
    expect(drafts.map((d) => d.how_to_fix[0])).toEqual([
      'CREATE INDEX CONCURRENTLY "a.b_c_idx" ON x."a.b" (c);',
      'CREATE INDEX CONCURRENTLY b_c_idx ON "x.a".b (c);',
    ])
    const { findings, groups } = groupFindings(drafts)
    expect(groups.map((g) => [g.key, g.findings, g.how_to_fix])).toEqual([
      ['index:x."a.b"(c)', ['pg_unindexed_foreign_keys:x.a.b.fk_one'], [drafts[0]!.how_to_fix[0]!]],
      ['index:"x.a".b(c)', ['pg_unindexed_foreign_keys:x.a.b.fk_two'], [drafts[1]!.how_to_fix[0]!]],
    ])
    expect(findings.map((f) => f.cause)).toEqual(['index:x."a.b"(c)', 'index:"x.a".b(c)'])
  })

  test('a name is keyed as pgIdent writes it, however the command spelled it', () => {
    expect(indexTarget('CREATE INDEX CONCURRENTLY ON public.orders (customer_id);')).toBe('public.orders(customer_id)')
    expect(indexTarget('CREATE INDEX CONCURRENTLY ON "public"."orders" ("customer_id");')).toBe(
      'public.orders(customer_id)',
    )
    expect(indexTarget('CREATE INDEX CONCURRENTLY ON Public.Orders (Customer_Id);')).toBe('public.orders(customer_id)')
    expect(indexTarget('CREATE INDEX CONCURRENTLY ON "Shop"."order" ("customerId");')).toBe(
      '"Shop"."order"("customerId")',
    )
    // A name with a line break is written U&"..." by pgIdent, and keyed so.
    const hostile = pgQualified('s', 't\nu')
    expect(hostile).toBe('s.U&"t\\000Au"')
    expect(
      causeOf(
        finding('pg_sequential_scans', 's.t\nu', { how_to_fix: [`CREATE INDEX CONCURRENTLY ON ${hostile} (c);`] }),
      ),
    ).toEqual({ key: 'index:s.U&"t\\000Au"(c)', kind: 'index' })
  })
})

describe('temporary files join the statement that wrote them; its memory is offered once', () => {
  // The fix lines as pg_slow_statements and pg_temp_files write them (work-mem.ts sizes them differently:
  // temp bytes per call for the one, the statement's plans for the other).
  const perCall = memoryAdvice({ text: 'SELECT * FROM orders ORDER BY note', tempBytes: 64 * 1024 * 1024, calls: 4 })!
  const fromPlan = memoryAdvice({
    text: 'SELECT * FROM orders ORDER BY note',
    plans: [{ Plan: { 'Node Type': 'Sort', 'Sort Space Type': 'Disk', 'Sort Space Used': 6144 } }],
  })!
  const other = memoryAdvice({ text: 'SELECT * FROM lines ORDER BY sku', tempBytes: 48 * 1024 * 1024, calls: 4 })!
  const reset = 'SELECT pg_stat_statements_reset(0, 0, -42);   -- after the fix, to measure it afresh'
  const slowFix = `${memoryCommand(perCall)}   -- it spilled to temporary files: ${commentText(memoryReason(perCall), 300)}`
  const tempFix = (label: string, a: typeof perCall) =>
    `${memoryCommand(a)}   -- for ${commentText(label, 160)} alone: ${commentText(memoryReason(a), 300)}`
  const slow = (indexFix: string) =>
    finding('pg_slow_statements', '-42', { metrics: { query_hash: '-42' }, how_to_fix: [indexFix, slowFix, reset] })
  const temp = finding('pg_temp_files', undefined, {
    objects: ['-42', '7'],
    metrics: { statement: '-42' },
    how_to_fix: [tempFix('statement -42', fromPlan), tempFix('statement 7', other)],
  })

  test('the sizes as the rules write them', () => {
    expect([perCall.mb, fromPlan.mb, other.mb]).toEqual([32, 12, 24])
  })

  test('a slow statement with no index to ask for: one statement issue, the spills under it, one work_mem for it (the plan-sized one)', () => {
    const generic =
      'CREATE INDEX CONCURRENTLY ON <table> (<filtered or joined columns>);   -- when its plan scans a large table for few rows (no sampled plan of it says which yet)'
    const { findings, groups } = groupFindings([slow(generic), temp])
    expect(findings.map((f) => f.cause)).toEqual(['statement:-42', 'statement:-42'])
    expect(groups).toHaveLength(1)
    expect(groups[0]!.how_to_fix).toEqual([
      generic,
      reset,
      tempFix('statement -42', fromPlan),
      tempFix('statement 7', other),
    ])
    expect(groups[0]!.how_to_fix.filter((c) => c.startsWith('BEGIN; SET LOCAL work_mem'))).toHaveLength(2)
  })

  test('a slow statement whose plan asks for an index: the spills it wrote join that index’s issue, not a statement issue of their own', () => {
    const create =
      'CREATE INDEX CONCURRENTLY ON public.orders (customer_id);   -- its plan reads public.orders by a Seq Scan with Filter: (customer_id = $1)'
    const { findings, groups } = groupFindings([slow(create), temp])
    expect(findings.map((f) => f.cause)).toEqual([
      'index:public.orders(customer_id)',
      'index:public.orders(customer_id)',
    ])
    expect(groups.map((g) => [g.key, g.kind, g.findings])).toEqual([
      ['index:public.orders(customer_id)', 'index', ['pg_slow_statements:-42', 'pg_temp_files']],
    ])
    expect(groups[0]!.how_to_fix).toEqual([
      create,
      reset,
      tempFix('statement -42', fromPlan),
      tempFix('statement 7', other),
    ])
    // Without the slow statement, the spills are the statement's issue.
    expect(causeOf(temp)).toEqual({ key: 'statement:-42', kind: 'statement' })
    expect(groupFindings([temp]).groups.map((g) => g.key)).toEqual(['statement:-42'])
  })

  test('two statements that need the same memory each keep their line', () => {
    const same = finding('pg_temp_files', undefined, {
      metrics: { statement: null },
      how_to_fix: [tempFix('statement 1', other), tempFix('statement 2', other)],
    })
    expect(groupFindings([same]).groups[0]!.how_to_fix).toEqual(same.how_to_fix)
  })
})

test('an index being built joins the session it waits for; one waiting for nobody (or pid 0, a prepared transaction) stays its own', () => {
  const build = (blocker: number | null) =>
    finding('pg_invalid_indexes', 'public.events_id_idx', {
      severity: 'info',
      metrics: { build_pid: 900, blocker_pid: blocker },
    })
  const idle = finding('pg_idle_in_transaction', 'pid 901', { severity: 'critical' })
  const { groups } = groupFindings([idle, build(901)])
  expect(groups.map((g) => [g.key, g.lead, g.findings])).toEqual([
    [
      'session:pid 901',
      'pg_idle_in_transaction:pid 901',
      ['pg_idle_in_transaction:pid 901', 'pg_invalid_indexes:public.events_id_idx'],
    ],
  ])
  expect(causeOf(build(null))).toEqual({ key: 'pg_invalid_indexes:public.events_id_idx', kind: 'finding' })
  expect(causeOf(build(0))).toEqual({ key: 'pg_invalid_indexes:public.events_id_idx', kind: 'finding' })
})
