// pg_sequential_scans' index advice ordering its equality columns by the table's column statistics, on a
// real PostgreSQL 17 watched by the real agent: a statement filtering a 100,000-row table by equality on a
// column of 3 values and one of 5,000 (in that order in the plan's Filter, as EXPLAIN shows), both named
// with quotes, newlines and unicode. Without the column_stats collector the advice keeps the plan's order;
// with it, the 5,000-value column comes first, the detail says why from pg_stats' own numbers, and the
// finding's CREATE INDEX, run as it is, cures the finding.
import { afterEach, expect, setDefaultTimeout, test } from 'bun:test'
import { explainSampling } from '../../src/agent/collectors/postgres/explain-plans.ts'
import { pgIdent } from '../../src/server/doctor/sql-text.ts'
import { type PostgresDoctorRig, postgresDoctorRig, settled, workload } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(120_000)

const CUSTOMER = 'cu"st\nomer ü'
const STATUS = "sta'tus 🐘"
const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`

let rig: PostgresDoctorRig | undefined
afterEach(async () => {
  await rig?.stop()
  rig = undefined
})

test("the equality columns of the advised index, the most distinct first by pg_stats (the plan's order without column statistics); the advised index cures", async () => {
  const interval = explainSampling.intervalMs
  explainSampling.intervalMs = 0 // sample plans every cycle instead of every 5 minutes
  try {
    rig = await postgresDoctorRig(17)
    const r = rig
    const setCollectors = async (disabled: string[]) => {
      const res = await r.server.call('PATCH', `/api/v1/databases/${r.dbId}`, {
        token: r.account.token,
        body: { disabled_collectors: disabled },
      })
      expect(res.status).toBe(200)
    }
    // First without column statistics: the agent applies the server's settings from its next cycle.
    await setCollectors(['column_stats'])
    await r.cycle()
    const [customer, status] = [quoteIdent(CUSTOMER), quoteIdent(STATUS)]
    await workload(r.dsn, async (sql) => {
      await sql.unsafe(
        `CREATE TABLE orders (id int PRIMARY KEY, ${customer} int NOT NULL, ${status} int NOT NULL, note text)`,
      )
      await sql.unsafe(`INSERT INTO orders SELECT g, g % 5000, g % 3, 'order ' || g FROM generate_series(1, 100000) g`)
    })
    await settled(
      r,
      'the inserts in pg_stat_user_tables',
      `SELECT n_live_tup::int FROM pg_stat_user_tables WHERE relname = 'orders'`,
      100_000,
    )
    await r.sql.unsafe('ANALYZE orders')
    // The plan's Filter compares status first (PostgreSQL keeps the written order of quals of equal cost).
    const [explained] = await r.sql.unsafe(
      `EXPLAIN (FORMAT JSON) SELECT * FROM orders WHERE ${status} = 1 AND ${customer} = 2`,
    )
    const filter = (Object.values(explained!)[0] as { Plan: { Filter: string } }[])[0]!.Plan.Filter
    expect(filter).toBe(`((${status} = 1) AND (${customer} = 2))`)
    // pg_stats' own numbers: 3 values of status, about 5,000 customers (a negative n_distinct is a share of reltuples).
    const [stats] = await r.sql.unsafe(
      `SELECT (SELECT n_distinct FROM pg_stats WHERE tablename = 'orders' AND attname = $1) AS status,
              (SELECT CASE WHEN n_distinct < 0 THEN -n_distinct * (SELECT reltuples FROM pg_class WHERE relname = 'orders') ELSE n_distinct END
               FROM pg_stats WHERE tablename = 'orders' AND attname = $2)::float8 AS customer`,
      [STATUS, CUSTOMER],
    )
    expect(stats!.status).toBe(3)
    expect(stats!.customer).toBeGreaterThan(4000)
    await r.sql`SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`
    await r.cycle() // the tables' first sample carries no deltas
    const run = () =>
      workload(r.dsn, async (sql) => {
        await sql`SET max_parallel_workers_per_gather = 0` // one scan per statement, not one per worker
        for (let i = 0; i < 120; i++)
          await sql.unsafe(`SELECT * FROM orders WHERE ${status} = $1 AND ${customer} = $2`, [i % 3, i * 3])
      })
    const scans = async () =>
      (
        await r.sql.unsafe(
          `SELECT seq_scan::int AS seq, coalesce(idx_scan, 0)::int AS idx FROM pg_stat_user_tables WHERE relname = 'orders'`,
        )
      )[0]!
    const before = await scans()
    await run()
    await settled(
      r,
      'the scans in pg_stat_user_tables',
      `SELECT seq_scan::int FROM pg_stat_user_tables WHERE relname = 'orders'`,
      before.seq + 120,
    )
    await r.cycle()

    const planOrder = await until(
      'the finding in the plan order',
      async () => (await r.findings('pg_sequential_scans'))[0],
    )
    const statement = planOrder.metrics.query_hash as string
    expect(planOrder.metrics).toMatchObject({
      filter: `((${status} = $1) AND (${customer} = $2))`,
      index_columns: `${pgIdent(STATUS)}, ${pgIdent(CUSTOMER)}`,
      column_order: 'plan',
    })
    expect(planOrder.detail).toContain(
      "Equality columns in the plan's order: no column statistics of public.orders for each of them (the agent's column_stats collector reads them for the tables most read by sequential scans, where its role may: pg_read_all_data or SELECT on the table).",
    )
    expect(planOrder.how_to_fix).toEqual([
      `CREATE INDEX CONCURRENTLY ON public.orders (${pgIdent(STATUS)}, ${pgIdent(CUSTOMER)});   -- for statement ${statement}`,
    ])

    // With column statistics: the 5,000-value column first.
    await setCollectors([])
    const ordered = await until('the finding ordered by column statistics', async () => {
      await r.cycle()
      const [found] = await r.findings('pg_sequential_scans')
      return found?.metrics.column_order === 'n_distinct' ? found : undefined
    })
    // The newline is written as U&"...\000A..." by pgIdent, so the command stays on one line.
    expect(pgIdent(CUSTOMER)).toBe('U&"cu""st\\000Aomer ü"')
    expect(ordered.metrics.index_columns).toBe(`${pgIdent(CUSTOMER)}, ${pgIdent(STATUS)}`)
    const distinct = Math.round(stats!.customer as number).toLocaleString('en-US')
    expect(ordered.detail).toContain(
      `Equality columns ordered by their statistics (pg_stats), the most selective first: ${pgIdent(CUSTOMER)} first: about ${distinct} distinct values against 3 for ${pgIdent(STATUS)}.`,
    )
    expect(ordered.how_to_fix).toEqual([
      `CREATE INDEX CONCURRENTLY ON public.orders (${pgIdent(CUSTOMER)}, ${pgIdent(STATUS)});   -- for statement ${statement}`,
    ])

    // The cure: the advised index, as it is; the statement's next plan uses it.
    await r.sql.unsafe(ordered.how_to_fix[0])
    const [index] = await r.sql.unsafe(
      `SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indrelid = 'orders'::regclass AND NOT indisprimary`,
    )
    expect(index!.def).toBe(
      `CREATE INDEX ${quoteIdent(`orders_${CUSTOMER}_${STATUS}_idx`)} ON public.orders USING btree (${customer}, ${status})`,
    )
    // Twice: the hour's window still holds the 120 full reads from before, and more than half sequential is a note.
    const indexed = await scans()
    await run()
    await run()
    await settled(
      r,
      'the index scans',
      `SELECT idx_scan::int FROM pg_stat_user_tables WHERE relname = 'orders'`,
      indexed.idx + 240,
    )
    await r.cycle()
    expect(((await r.api(`/queries/${statement}/explain`)) as { seq_scans: number }[])[0]!.seq_scans).toBe(0)
    expect(await r.findings('pg_sequential_scans')).toEqual([])
  } finally {
    explainSampling.intervalMs = interval
  }
})
