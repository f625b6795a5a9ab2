// The keys of causes (grouping.ts) from findings as the rules write them, no database needed: names are
// quoted part by part in a cause's key, so two tables whose dotted names read alike are two causes.
import { describe, expect, test } from 'bun:test'
import { causeOf, groupFindings, indexTarget } from '../../src/server/doctor/grouping.ts'
import { pgIdent, pgQualified } from '../../src/server/doctor/sql-text.ts'
import type { Finding } from '../../src/server/doctor/types.ts'

const finding = (rule: string, object: string | undefined, fields: Partial<Omit<Finding, 'cause'>> = {}): Omit<Finding, 'cause'> => ({
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
      how_to_fix: [`CREATE INDEX CONCURRENTLY ${pgIdent(`${table}_c_idx`)} ON ${pgQualified(schema, table)} (${pgIdent('c')});`],
    }),
  )

  test('x."a.b" and "x.a".b, each with an index wanted on c: two causes, each with its own CREATE INDEX', () => {
    expect(drafts.map((d) => d.how_to_fix[0])).toEqual(['CREATE INDEX CONCURRENTLY "a.b_c_idx" ON x."a.b" (c);', 'CREATE INDEX CONCURRENTLY b_c_idx ON "x.a".b (c);'])
    const { findings, groups } = groupFindings(drafts)
    expect(groups.map((g) => [g.key, g.findings, g.how_to_fix])).toEqual([
      ['index:x."a.b"(c)', ['pg_unindexed_foreign_keys:x.a.b.fk_one'], [drafts[0]!.how_to_fix[0]!]],
      ['index:"x.a".b(c)', ['pg_unindexed_foreign_keys:x.a.b.fk_two'], [drafts[1]!.how_to_fix[0]!]],
    ])
    expect(findings.map((f) => f.cause)).toEqual(['index:x."a.b"(c)', 'index:"x.a".b(c)'])
  })

  test('a name is keyed as pgIdent writes it, however the command spelled it', () => {
    expect(indexTarget('CREATE INDEX CONCURRENTLY ON public.orders (customer_id);')).toBe('public.orders(customer_id)')
    expect(indexTarget('CREATE INDEX CONCURRENTLY ON "public"."orders" ("customer_id");')).toBe('public.orders(customer_id)')
    expect(indexTarget('CREATE INDEX CONCURRENTLY ON Public.Orders (Customer_Id);')).toBe('public.orders(customer_id)')
    expect(indexTarget('CREATE INDEX CONCURRENTLY ON "Shop"."order" ("customerId");')).toBe('"Shop"."order"("customerId")')
    // A name with a line break is written U&"..." by pgIdent, and keyed so.
    const hostile = pgQualified('s', 't\nu')
    expect(hostile).toBe('s.U&"t\\000Au"')
    expect(causeOf(finding('pg_sequential_scans', 's.t\nu', { how_to_fix: [`CREATE INDEX CONCURRENTLY ON ${hostile} (c);`] }))).toEqual({ key: 'index:s.U&"t\\000Au"(c)', kind: 'index' })
  })
})
