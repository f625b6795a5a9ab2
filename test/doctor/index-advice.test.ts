// The index advice's columns, from the Filter of a Seq Scan as real PostgreSQL deparses it (13 and 18:
// EXPLAIN's text of casts and ANY changed over the versions), and the existing index that already
// leads with them, from pg_get_indexdef.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import {
  type PlanNode,
  adviseIndex,
  filterConditions,
  indexColumns,
  indexShape,
  scanConditions,
  seqScanNodes,
} from '../../src/server/doctor/index-advice.ts'
import { sharedPostgres, stopSharedPostgres } from '../support/postgres.ts'

afterAll(() => stopSharedPostgres())

function seqScan(node: PlanNode, relation: string): PlanNode | undefined {
  if (node['Node Type'] === 'Seq Scan' && node['Relation Name'] === relation) return node
  for (const child of node.Plans ?? []) {
    const found = seqScan(child, relation)
    if (found) return found
  }
  return undefined
}

for (const major of [13, 18]) {
  describe(`PostgreSQL ${major}`, () => {
    let sql: postgres.Sql

    beforeAll(async () => {
      const server = await sharedPostgres(major)
      sql = postgres(await server.freshDatabase(), { max: 1, onnotice: () => {} })
      await sql.unsafe(`
        CREATE TABLE orders (id int, customer_id int, status varchar(20), created_at timestamptz, total numeric, deleted_at timestamptz,
                             "Weird ""Col"" */ ü" int, "select" int);
        CREATE TABLE customers (id int, region text);
        SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off;`)
    })
    afterAll(() => sql?.end())

    /** The plan of `query` and its Seq Scan on `relation`. */
    async function scanOf(query: string, relation = 'orders'): Promise<{ plan: PlanNode; scan: PlanNode }> {
      const generic = query.includes('$1') ? ', GENERIC_PLAN' : ''
      const [row] = await sql.unsafe(`EXPLAIN (FORMAT JSON${generic}) ${query}`)
      const plan = (row!['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan
      return { plan, scan: seqScan(plan, relation)! }
    }

    async function columnsOf(query: string, relation = 'orders') {
      const { plan, scan } = await scanOf(query, relation)
      return indexColumns(scanConditions(plan, scan))
    }

    test('equality first, in the order of the filter, then one range column', async () => {
      expect(await columnsOf('SELECT * FROM orders WHERE customer_id = 7')).toEqual(['customer_id'])
      // PostgreSQL 16+ explains a statement with its parameters (GENERIC_PLAN), as the agent does.
      if (major >= 16)
        expect(await columnsOf('SELECT * FROM orders WHERE customer_id = $1 AND created_at < $2')).toEqual([
          'customer_id',
          'created_at',
        ])
      expect(
        await columnsOf(
          "SELECT * FROM orders WHERE created_at > now() - interval '1 day' AND customer_id = 42 AND status = 'open'",
        ),
      ).toEqual(['customer_id', 'status', 'created_at'])
      expect(await columnsOf('SELECT * FROM orders WHERE total >= 10 AND total < 20')).toEqual(['total'])
      const { plan, scan } = await scanOf('SELECT * FROM orders WHERE customer_id IN (1, 2, 3) AND deleted_at IS NULL')
      const shape = indexShape(scanConditions(plan, scan))
      expect(shape).toEqual({ columns: ['customer_id'], whereNull: ['deleted_at'], order: 'plan' })
      expect(adviseIndex('public', 'orders', shape.columns, [], shape.whereNull).create).toBe(
        'CREATE INDEX CONCURRENTLY ON public.orders (customer_id) WHERE deleted_at IS NULL;',
      )
      expect(await columnsOf('SELECT * FROM orders WHERE deleted_at IS NULL')).toEqual(['deleted_at'])
      expect(await columnsOf('SELECT * FROM orders WHERE 42 = customer_id')).toEqual(['customer_id'])
    })

    test('OR, expressions and other operators are left out; the rest still counts', async () => {
      expect(await columnsOf("SELECT * FROM orders WHERE customer_id = 1 OR status = 'b'")).toEqual([])
      expect(await columnsOf("SELECT * FROM orders WHERE lower(status) = 'x' AND customer_id = 7")).toEqual([
        'customer_id',
      ])
      expect(await columnsOf("SELECT * FROM orders WHERE status LIKE 'a%' AND total <> 3")).toEqual([])
      expect(await columnsOf("SELECT * FROM orders WHERE status = ')'' AND x = (1'")).toEqual(['status'])
    })

    test('hostile column names come back exact, and the CREATE INDEX quotes them', async () => {
      const columns = await columnsOf('SELECT * FROM orders WHERE "Weird ""Col"" */ ü" = 5 AND "select" > 1')
      expect(columns).toEqual(['Weird "Col" */ ü', 'select'])
      expect(adviseIndex('public', 'orders', columns, []).create).toBe(
        'CREATE INDEX CONCURRENTLY ON public.orders ("Weird ""Col"" */ ü", "select");',
      )
    })

    test("a join's condition on the scanned relation is an equality after the filter's", async () => {
      const query =
        "SELECT * FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.region = 'eu' AND o.total > 5"
      const { plan, scan } = await scanOf(query)
      expect(scanConditions(plan, scan)).toEqual([
        { column: 'total', kind: 'range', join: false },
        { column: 'customer_id', kind: 'equality', join: true },
      ])
      expect(await columnsOf(query)).toEqual(['customer_id', 'total'])
      // The other side's scan gets its own filter's column and its join column.
      expect(await columnsOf(query, 'customers')).toEqual(['region', 'id'])
      // A condition naming two columns of the scanned relation serves no index lookup.
      expect(filterConditions('(o.a = o.b)', ['o', 'orders'])).toEqual([])
      // A crafted filter of 40,000 nested parentheses is unwrapped in one pass; one past 100,000 characters is not read.
      expect(filterConditions(`${'('.repeat(40_000)}customer_id = $1${')'.repeat(40_000)}`, ['orders'])).toEqual([
        { column: 'customer_id', kind: 'equality', join: false },
      ])
      expect(filterConditions(`${'('.repeat(60_000)}customer_id = $1${')'.repeat(60_000)}`, ['orders'])).toEqual([])
      // Parentheses inside quoted names and strings do not count.
      expect(filterConditions(`(("a)(" = ')(') AND (( b > 1 )))`, ['orders'])).toEqual([
        { column: 'a)(', kind: 'equality', join: false },
        { column: 'b', kind: 'range', join: false },
      ])
      expect(filterConditions(`${'('.repeat(1_000)}customer_id = $1${')'.repeat(1_000)}`, ['orders'])).toEqual([
        { column: 'customer_id', kind: 'equality', join: false },
      ])
    })

    test('an existing index that leads with the columns is named, from pg_get_indexdef', async () => {
      await sql.unsafe(`CREATE INDEX orders_status ON orders (status varchar_pattern_ops DESC);
                        CREATE INDEX orders_cust_created ON orders (customer_id, created_at);
                        CREATE INDEX orders_lower ON orders (lower(status));
                        CREATE INDEX orders_weird ON orders ("Weird ""Col"" */ ü")`)
      const defs = await sql<{ index_name: string; index_def: string }[]>`
        SELECT indexrelid::regclass::text AS index_name, pg_get_indexdef(indexrelid) AS index_def FROM pg_index WHERE indrelid = 'orders'::regclass`
      const indexes = defs.map((d) => ({ ...d, is_valid: true }))
      expect(adviseIndex('public', 'orders', ['customer_id', 'created_at'], indexes).existing).toMatchObject({
        index_name: 'orders_cust_created',
        complete: true,
      })
      expect(adviseIndex('public', 'orders', ['customer_id', 'status'], indexes).existing).toMatchObject({
        index_name: 'orders_cust_created',
        complete: false,
      })
      expect(adviseIndex('public', 'orders', ['status'], indexes).existing).toMatchObject({
        index_name: 'orders_status',
        complete: true,
      })
      expect(adviseIndex('public', 'orders', ['Weird "Col" */ ü'], indexes).existing).toMatchObject({
        index_name: 'orders_weird',
        complete: true,
      })
      expect(adviseIndex('public', 'orders', ['total'], indexes).existing).toBeUndefined()
      // An invalid index (a failed CREATE INDEX CONCURRENTLY) serves nothing.
      expect(
        adviseIndex(
          'public',
          'orders',
          ['customer_id'],
          indexes.map((i) => ({ ...i, is_valid: false })),
        ).existing,
      ).toBeUndefined()
    })
  })
}

describe('equality columns ordered by column statistics', () => {
  const cond = (column: string, kind: 'equality' | 'range' | 'null' = 'equality', join = false) => ({
    column,
    kind,
    join,
  })
  const stat = (column_name: string, n_distinct: number, null_frac = 0, reltuples = 100_000) => ({
    column_name,
    n_distinct,
    null_frac,
    reltuples,
  })

  test('the most distinct first, a negative n_distinct read as a share of reltuples; joins and the range stay after', () => {
    const conditions = [
      cond('status'),
      cond('customer_id'),
      cond('created_at', 'range'),
      cond('account_id', 'equality', true),
      cond('deleted_at', 'null'),
    ]
    expect(indexShape(conditions, [stat('status', 3), stat('customer_id', 5000)])).toEqual({
      columns: ['customer_id', 'status', 'account_id', 'created_at'],
      whereNull: ['deleted_at'],
      order: 'n_distinct',
      reason: 'customer_id first: about 5,000 distinct values against 3 for status',
    })
    // -0.2 of 100,000 rows is 20,000 values: more than 5,000.
    expect(
      indexShape([cond('customer_id'), cond('email')], [stat('customer_id', 5000), stat('email', -0.2)]),
    ).toMatchObject({
      columns: ['email', 'customer_id'],
      reason: 'email first: about 20,000 distinct values against 5,000 for customer_id',
    })
  })

  test('nulls: a value finds only the non-null rows, so a mostly null column of few values may come first', () => {
    // 100 values over 5 % of the rows find 0.05 % each; 1,000 values over all rows find 0.1 % each.
    expect(indexShape([cond('b'), cond('a')], [stat('a', 1000), stat('b', 100, 0.95)])).toMatchObject({
      columns: ['b', 'a'],
      reason: 'b first: about 100 (95.0 % null) distinct values against 1,000 for a',
    })
  })

  test("ties, a column without statistics, an unknown n_distinct or a single column keep the plan's order", () => {
    expect(indexShape([cond('x'), cond('y')], [stat('x', 50), stat('y', 50)])).toMatchObject({
      columns: ['x', 'y'],
      order: 'n_distinct',
    })
    expect(indexShape([cond('status'), cond('customer_id')], [stat('customer_id', 5000)])).toEqual({
      columns: ['status', 'customer_id'],
      whereNull: [],
      order: 'plan',
    })
    expect(
      indexShape([cond('status'), cond('customer_id')], [stat('status', 3), stat('customer_id', 0)]),
    ).toMatchObject({ columns: ['status', 'customer_id'], order: 'plan' })
    expect(
      indexShape([cond('status'), cond('customer_id')], [stat('status', 3), stat('customer_id', -0.5, 0, -1)]),
    ).toMatchObject({ order: 'plan' })
    expect(indexShape([cond('status'), cond('customer_id')])).toMatchObject({
      columns: ['status', 'customer_id'],
      order: 'plan',
    })
    expect(indexShape([cond('status')], [stat('status', 3)])).toEqual({
      columns: ['status'],
      whereNull: [],
      order: 'plan',
    })
  })

  test('hostile names are matched exactly and quoted in the reason', () => {
    const a = 'cu"st\nomer ü'
    const b = "sta'tus 🐘"
    expect(indexShape([cond(b), cond(a)], [stat(b, 3), stat(a, 5000)])).toMatchObject({
      columns: [a, b],
      // A newline is written as a Unicode escape (U&"...\000A..."), so the name stays on one line.
      reason: `U&"cu""st\\000Aomer ü" first: about 5,000 distinct values against 3 for "sta'tus 🐘"`,
    })
  })
})

test('a plan from a batch is walked only through arrays of children, and no deeper than 200 levels', () => {
  const scan = (name: string): PlanNode => ({ 'Node Type': 'Seq Scan', 'Relation Name': name })
  expect(
    seqScanNodes<PlanNode>({
      'Node Type': 'Nested Loop',
      Plans: [scan('a'), { 'Node Type': 'Hash', Plans: [scan('b')] }],
    }).map((n) => n['Relation Name']),
  ).toEqual(['a', 'b'])
  expect(seqScanNodes({ 'Node Type': 'Seq Scan', 'Relation Name': 'a', Plans: 'not an array' as never })).toHaveLength(
    1,
  )
  let deep: PlanNode = scan('bottom')
  for (let i = 0; i < 100_000; i++) deep = { 'Node Type': 'Seq Scan', 'Relation Name': `n${i}`, Plans: [deep] }
  expect(seqScanNodes(deep)).toHaveLength(201)
})
