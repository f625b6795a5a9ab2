// Holders of the xmin horizon across agent versions, from crafted batches on both stores: an agent that
// predates the xmin_holders section (database_stats gauges only) still gets its holder named, from the
// activity snapshot (the session) and the replication section (the slots); a batch whose xmin_holders
// section is older than its database_stats (a newer agent downgraded) is not read as current; and the
// section, when current, is what names the holder. Real PostgreSQL behaviour is tested in
// postgres-xmin-causes.test.ts and postgres-sessions-xmin.test.ts.
import { describe, expect, test } from 'bun:test'
import type { ActiveQuery, BloatEstimate, TableStat, XminHolder } from '../../src/shared/wire.ts'
import { agentSession, pgBatch } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const MINUTE = 60_000

function table(name: string, lastVacuum: number): TableStat {
  return {
    schema_name: 'public',
    table_name: name,
    seq_scan: 0,
    seq_tup_read: 0,
    idx_scan: 0,
    idx_tup_fetch: 0,
    n_tup_ins: 0,
    n_tup_upd: 0,
    n_tup_del: 0,
    n_tup_hot_upd: 0,
    n_live_tup: 100,
    n_dead_tup: 50_000,
    last_vacuum: lastVacuum,
    last_autovacuum: null,
    last_analyze: null,
    last_autoanalyze: null,
    table_size_bytes: 8_192_000,
    index_size_bytes: 0,
    has_primary_key: true,
    autovacuum_enabled: true,
    delta: null,
  }
}

const session = (now: number): ActiveQuery => ({
  pid: 3161,
  query_text: 'SELECT * FROM orders',
  state: 'idle in transaction',
  wait_event_type: 'Client',
  wait_event: 'ClientRead',
  // Idle for 22 minutes: it has held its snapshot since then at the latest.
  duration_ms: 22 * MINUTE,
  blocking_pids: [],
  user: 'report',
  application_name: 'psql',
  client_addr: '10.0.0.9',
  database: 'app',
  backend_type: 'client backend',
  xact_start: now - 23 * MINUTE,
})

const gauges = {
  xmin_backend_age: 5_000,
  xmin_backend_pid: 3161,
  xmin_backend_xact_age_s: 23 * 60,
  xmin_slot_age: null,
  prepared_xacts: 0,
  xmin_prepared_age: null,
  xmin_prepared_age_s: null,
}

for (const kind of storeKinds) {
  describe(`xmin holders across agent versions (${kind})`, () => {
    const s = agentSession(kind)

    test('an older agent (gauges only): the session from the activity snapshot holds back the table vacuumed after it began', async () => {
      const now = Date.now()
      const id = await s.ingest(
        pgBatch('older-agent', now - 5_000, {
          activity: [session(now - 5_000)],
          database_stats: gauges,
          tables: [table('orders', now - 11_000)],
        }),
      )
      const doctor = await s.ok(id, '/doctor')
      const dead = doctor.top_issues.find((f: { rule: string }) => f.rule === 'pg_dead_tuples')
      expect(dead).toMatchObject({
        key: 'pg_dead_tuples:public.orders',
        severity: 'critical',
        title: 'Vacuum cannot clean public.orders until pid 3161 ends its transaction',
        metrics: { held_by: 'pid 3161' },
      })
      expect(dead.detail).toContain(
        'The holder: pid 3161 (user report, application "psql", from 10.0.0.9, idle in transaction; transaction open for 23.0 min; last statement: SELECT * FROM orders)',
      )
      // No backend_start from such an agent: the session is told apart by its role, application and transaction start.
      expect(dead.how_to_fix[0]).toBe(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = 3161 AND usename = 'report' AND application_name = 'psql' AND abs(extract(epoch FROM xact_start - timestamptz '${new Date(now - 5_000 - 23 * MINUTE).toISOString()}')) < 0.001;   -- ends that session and rolls back its open transaction (its uncommitted work is lost: check with its owner first); returns no row if that session has already ended or its transaction has; run it as a superuser, a member of pg_read_all_stats or the session's own role (to others its start times are hidden, and it finds no row)`,
      )
      const cause = doctor.top_issues.find((f: { rule: string }) => f.rule === 'pg_xmin_horizon')
      expect(cause).toMatchObject({
        key: 'pg_xmin_horizon:pid 3161',
        severity: 'critical',
        metrics: { pid: 3161, transaction_age_s: 1380, held_tables: 1, held_dead_rows: 50_000 },
      })
    })

    test('a bloated table while a session has held the horizon for 23 minutes: the bloat finding names it and ends it first; without a holder it does not', async () => {
      const now = Date.now()
      const bloat: BloatEstimate = {
        kind: 'table',
        schema_name: 'public',
        table_name: 'orders',
        index_name: null,
        size_bytes: 400 * 1024 ** 2,
        expected_bytes: 100 * 1024 ** 2,
        bloat_bytes: 300 * 1024 ** 2,
        fillfactor: 100,
        live_rows: 1_000_000,
      }
      const held = await s.ingest(
        pgBatch('bloat-held', now - 5_000, {
          activity: [session(now - 5_000)],
          database_stats: gauges,
          bloat: [bloat],
        } as never),
      )
      const [finding] = (await s.ok(held, '/doctor')).top_issues.filter((f: { rule: string }) => f.rule === 'pg_bloat')
      expect(finding).toMatchObject({
        key: 'pg_bloat:public.orders',
        severity: 'warning',
        objects: ['public.orders', 'pid 3161'],
        metrics: { bloat_bytes: 300 * 1024 ** 2, held_by: 'pid 3161' },
      })
      expect(finding.detail).toContain('pid 3161 (user report, application "psql", from 10.0.0.9, idle in transaction;')
      expect(finding.detail).toContain('a rewrite keeps every row version it may still see, and the bloat comes back.')
      expect(finding.how_to_fix[0]).toStartWith(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = 3161 AND',
      )
      expect(finding.how_to_fix.at(-1)).toBe('VACUUM (FULL, ANALYZE) public.orders;')

      const free = await s.ingest(pgBatch('bloat-free', now - 5_000, { bloat: [bloat] } as never))
      const [plain] = (await s.ok(free, '/doctor')).top_issues.filter((f: { rule: string }) => f.rule === 'pg_bloat')
      expect(plain.objects).toEqual(['public.orders'])
      expect(plain.how_to_fix).toEqual(['VACUUM (FULL, ANALYZE) public.orders;'])
      expect(plain.metrics.held_by).toBeUndefined()
    })

    test('a table vacuumed before the holder began is not said to be held back by it', async () => {
      const now = Date.now()
      const id = await s.ingest(
        pgBatch('vacuumed-before', now - 5_000, {
          activity: [session(now - 5_000)],
          database_stats: gauges,
          tables: [table('orders', now - 40 * MINUTE)],
        }),
      )
      const doctor = await s.ok(id, '/doctor')
      const dead = doctor.top_issues.find((f: { rule: string }) => f.rule === 'pg_dead_tuples')
      expect(dead).toMatchObject({ title: 'Many dead rows in public.orders' })
      expect(dead.metrics).not.toHaveProperty('held_by')
      // Named as the likely cause all the same, and not raised before its hour.
      expect(dead.detail).toContain(
        'pid 3161 (user report, application "psql", from 10.0.0.9, idle in transaction; transaction open for 23.0 min; last statement: SELECT * FROM orders) has held back the xmin horizon since 22.',
      )
      expect(doctor.top_issues.filter((f: { rule: string }) => f.rule === 'pg_xmin_horizon')).toEqual([])
    })

    test('the named section of the latest batch names the holder; one older than the gauges is not read as current', async () => {
      const now = Date.now()
      const holders: XminHolder[] = [
        {
          kind: 'prepared',
          xmin_age: 7_000,
          since: now - 30 * MINUTE,
          gid: 'billing-42',
          owner: 'billing',
          database: 'app',
          prepared_at: now - 30 * MINUTE,
        },
      ]
      const id = await s.ingest(
        pgBatch('newer-agent', now - 65_000, {
          database_stats: { ...gauges, xmin_backend_age: null, xmin_backend_pid: null },
          xmin_holders: holders,
          tables: [table('ledger', now - 70_000)],
        }),
      )
      let dead = (await s.ok(id, '/doctor')).top_issues.find((f: { rule: string }) => f.rule === 'pg_dead_tuples')
      expect(dead).toMatchObject({
        title: "Vacuum cannot clean public.ledger until prepared transaction 'billing-42' is committed or rolled back",
      })
      expect(dead.how_to_fix[0]).toBe(
        "ROLLBACK PREPARED 'billing-42';   -- in this database; write COMMIT PREPARED instead to keep its changes",
      )
      // The same agent downgraded: gauges only from now on, which say nothing holds the horizon.
      await s.ingest(
        pgBatch('newer-agent', now - 5_000, {
          database_stats: { ...gauges, xmin_backend_age: null, xmin_backend_pid: null },
        }),
      )
      dead = (await s.ok(id, '/doctor')).top_issues.find((f: { rule: string }) => f.rule === 'pg_dead_tuples')
      expect(dead).toMatchObject({ title: 'Many dead rows in public.ledger' })
    })
  })
}
