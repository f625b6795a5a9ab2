// The doctor's rules about indexes, dead rows and vacuum on a real PostgreSQL 17 watched by the real
// agent: pg_dead_tuples, pg_autovacuum_disabled, pg_unused_indexes, pg_duplicate_indexes and
// pg_invalid_indexes. Each puts a fresh database into the state, reads the finding through the API
// with its severity, numbers and objects, then applies the finding's own fix command and sees the
// finding go. (Sequences, primary keys and sequential scans: postgres-objects-tables.test.ts.)
import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { parseIndexDef } from '../../src/server/doctor/rules/postgres/duplicate-indexes.ts'
import { type PostgresDoctorRig, postgresDoctorRig, settled, workload } from '../support/doctor.ts'
import { until } from '../support/wait.ts'

setDefaultTimeout(60_000)

let rig: PostgresDoctorRig | undefined
afterEach(async () => {
  await rig?.stop()
  rig = undefined
})

describe('pg_dead_tuples', () => {
  test('tables with autovacuum off and most rows deleted: critical past 50 % dead, warning past 20 %, none under 10,000 dead rows; VACUUM cures', async () => {
    rig = await postgresDoctorRig(17)
    await workload(rig.dsn, async (sql) => {
      for (const [table, rows, deleted] of [
        ['orders', 50_000, 45_000],
        ['events', 50_000, 15_000],
        ['small', 5_000, 4_000],
      ] as const) {
        await sql.unsafe(`CREATE TABLE ${table} (id int PRIMARY KEY, note text) WITH (autovacuum_enabled = false)`)
        await sql.unsafe(`INSERT INTO ${table} SELECT g, 'note ' || g FROM generate_series(1, ${rows}) g`)
        await sql.unsafe(`DELETE FROM ${table} WHERE id <= ${deleted}`)
      }
    })
    await settled(
      rig,
      'the deletes in pg_stat_user_tables',
      "SELECT sum(n_dead_tup)::int FROM pg_stat_user_tables WHERE relname IN ('orders', 'events', 'small')",
      64_000,
    )
    await rig.cycle()

    const findings = await rig.findings('pg_dead_tuples')
    expect(findings.map((f) => [f.key, f.severity])).toEqual([
      ['pg_dead_tuples:public.orders', 'critical'],
      ['pg_dead_tuples:public.events', 'warning'],
    ])
    const [orders, events] = findings
    expect(orders).toMatchObject({
      category: 'maintenance',
      title: 'Many dead rows in public.orders',
      objects: ['public.orders'],
      metrics: { n_dead_tup: 45_000, n_live_tup: 5_000, dead_ratio: 0.9, last_vacuum: null, last_autovacuum: null },
    })
    expect(orders.metrics.table_size_bytes).toBeGreaterThan(1024 * 1024)
    expect(orders.detail).toContain('public.orders has 45,000 dead rows against 5,000 live ones (90.0 % dead)')
    expect(orders.detail).toContain('it has never been vacuumed')
    expect(orders.how_to_fix[0]).toBe('VACUUM (ANALYZE, VERBOSE) public.orders;')
    expect(orders.how_to_investigate[0]).toBe(
      "SELECT n_live_tup, n_dead_tup, last_vacuum, last_autovacuum, autovacuum_count FROM pg_stat_user_tables WHERE relid = 'public.orders'::regclass;",
    )
    expect(events.metrics).toMatchObject({ n_dead_tup: 15_000, n_live_tup: 35_000, dead_ratio: 0.3 })
    expect((await rig.api('/doctor')).status).toBe('unhealthy')

    // The cure: the finding's own commands (the VACUUM, and autovacuum turned back on).
    for (const f of findings) for (const command of f.how_to_fix.slice(0, 2)) await rig.sql.unsafe(command)
    await settled(
      rig,
      'the vacuums in pg_stat_user_tables',
      "SELECT sum(n_dead_tup)::int FROM pg_stat_user_tables WHERE relname IN ('orders', 'events')",
      0,
    )
    await rig.cycle()
    expect(await rig.findings('pg_dead_tuples')).toEqual([])
  })
})

describe('pg_autovacuum_disabled with pg_dead_tuples', () => {
  test('tables whose storage parameters turn autovacuum off show it in the tables API; the bloated one in its dead-rows finding with the RESET, the others in notes; RESET cures', async () => {
    // One table named per finding: the second one is counted in the finding for the rest.
    rig = await postgresDoctorRig(17, { thresholds: { pg_autovacuum_disabled: { max_findings: 1 } } })
    await workload(rig.dsn, async (sql) => {
      await sql`CREATE TABLE ledger (id int PRIMARY KEY, note text)`
      await sql`ALTER TABLE ledger SET (autovacuum_enabled = false)`
      await sql`INSERT INTO ledger SELECT g, 'entry ' || g FROM generate_series(1, 50000) g`
      await sql`DELETE FROM ledger WHERE id <= 30000`
      // No TOAST table (integers only), the setting spelled off.
      await sql`CREATE TABLE "Counters" (id int PRIMARY KEY, n int)`
      await sql`ALTER TABLE "Counters" SET (autovacuum_enabled = off)`
      await sql`INSERT INTO "Counters" SELECT g, 0 FROM generate_series(1, 1000) g`
      // Autovacuum off for the TOAST table only.
      await sql`CREATE TABLE blobs (id int PRIMARY KEY, body text) WITH (toast.autovacuum_enabled = false)`
      // Other storage parameters leave autovacuum on.
      await sql`CREATE TABLE plain (id int PRIMARY KEY, note text) WITH (autovacuum_vacuum_scale_factor = 0.05, autovacuum_enabled = on)`
    })
    await settled(
      rig,
      'the deletes in pg_stat_user_tables',
      "SELECT n_dead_tup::int FROM pg_stat_user_tables WHERE relname = 'ledger'",
      30_000,
    )
    await rig.cycle()

    const autovacuum = async () =>
      Object.fromEntries(((await rig!.api('/tables')) as any[]).map((t) => [t.table_name, t.autovacuum_enabled]))
    expect(await autovacuum()).toEqual({ ledger: false, Counters: false, blobs: false, plain: true })
    expect(await rig.api('/tables/public/ledger')).toMatchObject({
      table_name: 'ledger',
      n_dead_tup: 30_000,
      autovacuum_enabled: false,
    })
    expect((await rig.api('/tables/public/plain')).autovacuum_enabled).toBe(true)

    const dead = await rig.findings('pg_dead_tuples')
    expect(dead.map((f) => [f.key, f.severity])).toEqual([['pg_dead_tuples:public.ledger', 'critical']])
    const [ledger] = dead
    expect(ledger.detail).toContain(
      'Autovacuum is turned off for this table (autovacuum_enabled or toast.autovacuum_enabled = false in its storage parameters), so only a manual VACUUM removes them.',
    )
    expect(ledger.recommendation).toStartWith('Vacuum the table now and turn autovacuum back on for it')
    const [ledgerOptions] = await rig.sql.unsafe(ledger.how_to_investigate[1].split(';')[0])
    expect({ ...ledgerOptions }).toEqual({ reloptions: ['autovacuum_enabled=false'], toast_reloptions: null })
    expect(ledger.how_to_fix).toEqual([
      'VACUUM (ANALYZE, VERBOSE) public.ledger;',
      'ALTER TABLE public.ledger RESET (autovacuum_enabled, toast.autovacuum_enabled);   -- autovacuum is turned off for it',
      'ALTER TABLE public.ledger SET (autovacuum_vacuum_scale_factor = 0.05);   -- vacuum after 5 % of the rows changed instead of 20 %',
    ])

    // The ledger is left to its dead-rows finding; the largest of the two others is named, the other counted.
    const disabled = await rig.findings('pg_autovacuum_disabled')
    expect(disabled.map((f) => [f.key, f.severity]).sort()).toEqual([
      ['pg_autovacuum_disabled', 'info'],
      ['pg_autovacuum_disabled:public."Counters"', 'info'],
    ])
    const counters = disabled.find((f) => f.key === 'pg_autovacuum_disabled:public."Counters"')
    const rest = disabled.find((f) => f.key === 'pg_autovacuum_disabled')
    expect(counters).toMatchObject({
      category: 'maintenance',
      title: 'Autovacuum is turned off for public."Counters"',
      objects: ['public."Counters"'],
      metrics: { n_live_tup: 1000, n_dead_tup: 0, last_vacuum: null, last_analyze: null },
      how_to_fix: ['ALTER TABLE public."Counters" RESET (autovacuum_enabled, toast.autovacuum_enabled);'],
    })
    expect(counters.detail).toContain(
      'autovacuum neither vacuums nor analyzes it, except against transaction ID wraparound. Last vacuumed never, last analyzed never.',
    )
    // The investigation shows where the setting is: the table's own parameters, or its TOAST table's.
    const [countersOptions] = await rig.sql.unsafe(counters.how_to_investigate[0])
    expect({ ...countersOptions }).toEqual({ reloptions: ['autovacuum_enabled=off'], toast_reloptions: null })
    expect(rest).toMatchObject({
      title: 'Autovacuum is turned off for 1 more tables',
      objects: ['public.blobs'],
      metrics: { tables: 1 },
      how_to_fix: ['ALTER TABLE public.blobs RESET (autovacuum_enabled, toast.autovacuum_enabled);'],
    })
    expect(rest.detail).toContain('the storage parameters of 1 more tables turn autovacuum off: public.blobs.')
    const listed = await rig.sql.unsafe(rest.how_to_investigate[0])
    expect(listed.map((r: any) => [String(r.table), r.reloptions, r.toast_reloptions])).toEqual([
      ['"Counters"', ['autovacuum_enabled=off'], null],
      ['blobs', null, ['autovacuum_enabled=false']],
      ['ledger', ['autovacuum_enabled=false'], null],
    ])

    // The cure: the findings' own commands (the dead-rows finding's VACUUM and RESET, the notes' RESET).
    for (const command of ledger.how_to_fix.slice(0, 2)) await rig.sql.unsafe(command)
    for (const f of disabled) await rig.sql.unsafe(f.how_to_fix[0])
    await settled(
      rig,
      'the vacuum in pg_stat_user_tables',
      "SELECT n_dead_tup::int FROM pg_stat_user_tables WHERE relname = 'ledger'",
      0,
    )
    await rig.cycle()
    expect(await autovacuum()).toEqual({ ledger: true, Counters: true, blobs: true, plain: true })
    expect(await rig.findings('pg_dead_tuples')).toEqual([])
    expect(await rig.findings('pg_autovacuum_disabled')).toEqual([])
  })
})

describe('pg_unused_indexes', () => {
  test('never-scanned indexes over 1 MB, the largest named (warning from the size threshold) and the rest summed; drop and use cure', async () => {
    rig = await postgresDoctorRig(17, {
      thresholds: { pg_unused_indexes: { warning_bytes: 2 * 1024 * 1024, max_findings: 1 } },
    })
    await rig.sql`CREATE TABLE docs (id int PRIMARY KEY, code text NOT NULL, payload text NOT NULL)`
    await rig.sql`INSERT INTO docs SELECT g, 'c' || g, md5(g::text) FROM generate_series(1, 40000) g`
    await rig.sql`CREATE INDEX docs_payload_idx ON docs (payload)` // about 2.3 MB
    await rig.sql`CREATE INDEX docs_id_code_idx ON docs (id, code)` // about 1.2 MB
    await rig.sql`CREATE UNIQUE INDEX docs_code_key ON docs (code)` // unique: never "unused"
    await rig.sql`CREATE INDEX docs_recent_idx ON docs (id) WHERE id > 39000` // under 1 MB
    const [sizes] =
      await rig.sql`SELECT pg_relation_size('docs_payload_idx')::int AS payload, pg_relation_size('docs_id_code_idx')::int AS id_code`
    await rig.cycle()

    const findings = await rig.findings('pg_unused_indexes')
    expect(findings.map((f) => [f.key, f.severity])).toEqual([
      ['pg_unused_indexes:public.docs_payload_idx', 'warning'],
      ['pg_unused_indexes', 'info'],
    ])
    const [payload, rest] = findings
    expect(payload).toMatchObject({
      category: 'performance',
      title: 'Unused index public.docs_payload_idx',
      objects: ['public.docs_payload_idx', 'public.docs'],
      metrics: { size_bytes: sizes!.payload, idx_scan: 0 },
      how_to_fix: [
        'DROP INDEX CONCURRENTLY public.docs_payload_idx;',
        '-- to recreate it: CREATE INDEX CONCURRENTLY docs_payload_idx ON public.docs USING btree (payload);',
      ],
    })
    expect(payload.detail).toContain(
      'public.docs_payload_idx on public.docs (2.3 MB) has not been scanned once (idx_scan 0)',
    )
    expect(payload.detail).toContain('since the statistics were last reset')
    expect(payload.detail).toContain('on a replica')
    expect(rest).toMatchObject({
      title: '1 more unused indexes',
      objects: ['public.docs_id_code_idx'],
      metrics: { indexes: 1, size_bytes: sizes!.id_code },
    })
    // The same indexes as the spec's /indexes/unused endpoint.
    expect((await rig.api('/indexes/unused')).map((i: any) => i.index_name)).toEqual([
      'docs_payload_idx',
      'docs_id_code_idx',
    ])

    // The cure: the payload index dropped with the finding's command, the other one used.
    await rig.sql.unsafe(payload.how_to_fix[0])
    await workload(rig.dsn, async (sql) => {
      await sql`SET enable_seqscan = off`
      await sql`SET enable_bitmapscan = off`
      // Only docs_id_code_idx returns this order without a sort.
      await sql`SELECT id, code FROM docs ORDER BY id, code LIMIT 1`
    })
    await settled(
      rig,
      'the index scan',
      "SELECT idx_scan::int FROM pg_stat_user_indexes WHERE indexrelname = 'docs_id_code_idx'",
      1,
    )
    await rig.cycle()
    expect(await rig.findings('pg_unused_indexes')).toEqual([])
  })
})

describe('pg_duplicate_indexes', () => {
  test('index definitions parse into method, columns, INCLUDE and predicate', () => {
    expect(
      parseIndexDef(
        'CREATE INDEX "Odd, name" ON public."T" USING btree (lower((email)::text), "Col, 2" DESC NULLS LAST) INCLUDE (a, b) WHERE ((x > 0) AND (y = \'a, b\'::text))',
      ),
    ).toEqual({
      method: 'btree',
      columns: ['lower((email)::text)', '"Col, 2" DESC NULLS LAST'],
      include: ['a', 'b'],
      predicate: "((x > 0) AND (y = 'a, b'::text))",
    })
    expect(
      parseIndexDef(
        "CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id) NULLS NOT DISTINCT WITH (fillfactor='90')",
      ),
    ).toEqual({ method: 'btree', columns: ['id'], include: [], predicate: null })
    expect(parseIndexDef('')).toBeUndefined()
  })

  test('identical indexes, a prefix of a wider index and of the primary key are redundant; other methods and predicates are not; dropping cures', async () => {
    rig = await postgresDoctorRig(17)
    await rig.sql`CREATE TABLE accounts (id int PRIMARY KEY, email text, org int, created date)`
    await rig.sql`CREATE INDEX accounts_email_a ON accounts (email)`
    await rig.sql`CREATE INDEX accounts_email_b ON accounts (email)`
    await rig.sql`CREATE INDEX accounts_org ON accounts (org)`
    await rig.sql`CREATE INDEX accounts_org_created ON accounts (org, created)`
    await rig.sql`CREATE INDEX accounts_org_partial ON accounts (org) WHERE created IS NOT NULL`
    await rig.sql`CREATE INDEX accounts_id_idx ON accounts (id)`
    await rig.sql`CREATE INDEX accounts_email_hash ON accounts USING hash (email)`
    await rig.sql`CREATE INDEX accounts_created_org ON accounts (created, org)`
    await rig.cycle()

    const findings = await rig.findings('pg_duplicate_indexes')
    expect(findings.map((f) => [f.key, f.severity, f.metrics.covering_index])).toEqual([
      ['pg_duplicate_indexes:public.accounts_email_b', 'warning', 'public.accounts_email_a'],
      ['pg_duplicate_indexes:public.accounts_id_idx', 'warning', 'public.accounts_pkey'],
      ['pg_duplicate_indexes:public.accounts_org', 'warning', 'public.accounts_org_created'],
    ])
    const org = findings[2]
    expect(org).toMatchObject({
      category: 'performance',
      title: 'Redundant index public.accounts_org',
      objects: ['public.accounts_org', 'public.accounts_org_created', 'public.accounts'],
      how_to_fix: ['DROP INDEX CONCURRENTLY public.accounts_org;'],
      metrics: { size_bytes: 8192, idx_scan: 0 },
    })
    expect(org.detail).toBe(
      'public.accounts_org (8.0 KB) on public.accounts is covered by public.accounts_org_created, which starts with all of its columns (btree (org) against btree (org, created)). Every write to public.accounts maintains both; queries can use public.accounts_org_created instead.',
    )
    expect(findings[0].detail).toContain('which indexes the same columns')

    for (const f of findings) await rig.sql.unsafe(f.how_to_fix[0])
    await rig.cycle()
    expect(await rig.findings('pg_duplicate_indexes')).toEqual([])
  })
})

describe('pg_duplicate_indexes with pg_unused_indexes', () => {
  test('two identical indexes, only the second scanned: the duplicate rule drops the unscanned one, the unused rule stays silent, and following both leaves the used one', async () => {
    rig = await postgresDoctorRig(17)
    await rig.sql`CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, note text)`
    await rig.sql`INSERT INTO orders SELECT g, g % 5000, md5(g::text) FROM generate_series(1, 100000) g`
    await rig.sql`CREATE INDEX orders_customer_idx ON orders (customer_id)` // over 1 MB, never scanned
    await rig.sql`CREATE INDEX orders_customer_idx2 ON orders (customer_id)`
    await workload(rig.dsn, async (sql) => {
      await sql`SET enable_seqscan = off`
      await sql`SET enable_bitmapscan = off`
      // Only the second copy exists while it is being used, so the scans land on it.
      await sql`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'orders_customer_idx'::regclass`
      for (let i = 0; i < 3; i++) await sql`SELECT id FROM orders WHERE customer_id = ${i}`
      await sql`UPDATE pg_index SET indisvalid = true WHERE indexrelid = 'orders_customer_idx'::regclass`
    })
    await settled(
      rig,
      'the scans',
      "SELECT idx_scan::int FROM pg_stat_user_indexes WHERE indexrelname = 'orders_customer_idx2'",
      3,
    )
    expect(
      (
        await rig.sql`SELECT idx_scan::int AS n FROM pg_stat_user_indexes WHERE indexrelname = 'orders_customer_idx'`
      )[0]!.n,
    ).toBe(0)
    await rig.cycle()

    const duplicates = await rig.findings('pg_duplicate_indexes')
    expect(duplicates.map((f) => [f.key, f.metrics.covering_index, f.how_to_fix])).toEqual([
      [
        'pg_duplicate_indexes:public.orders_customer_idx',
        'public.orders_customer_idx2',
        ['DROP INDEX CONCURRENTLY public.orders_customer_idx;'],
      ],
    ])
    expect(await rig.findings('pg_unused_indexes')).toEqual([])

    for (const f of [...duplicates, ...(await rig.findings('pg_unused_indexes'))]) await rig.sql.unsafe(f.how_to_fix[0])
    await rig.cycle()
    expect((await rig.api('/indexes')).map((i: any) => i.index_name).sort()).toEqual([
      'orders_customer_idx2',
      'orders_pkey',
    ])
    expect(await rig.findings('pg_duplicate_indexes')).toEqual([])
  })
})

describe('pg_invalid_indexes', () => {
  test('a CREATE UNIQUE INDEX CONCURRENTLY that failed on duplicates, then a REINDEX that failed again: one finding names the _ccnew leftover; its fix resolves, drops and re-creates', async () => {
    rig = await postgresDoctorRig(17)
    await rig.sql`CREATE TABLE users (id int PRIMARY KEY, email text NOT NULL)`
    await rig.sql`INSERT INTO users VALUES (1, 'a@example.com'), (2, 'a@example.com'), (3, 'b@example.com')`
    await expect(
      rig.sql`CREATE UNIQUE INDEX CONCURRENTLY users_email_key ON users (email)`.then(() => 'built'),
    ).rejects.toThrow('could not create unique index')
    // What the old advice led to: a REINDEX CONCURRENTLY fails on the same duplicates and leaves a second invalid index.
    await expect(rig.sql`REINDEX INDEX CONCURRENTLY users_email_key`.then(() => 'rebuilt')).rejects.toThrow(
      'could not create unique index',
    )
    await until('the failed builds to end', async () =>
      (await rig!.sql`SELECT count(*)::int AS n FROM pg_stat_progress_create_index`)[0]!.n === 0 ? true : undefined,
    )
    expect(
      (await rig.sql`SELECT indexrelid::regclass::text AS name FROM pg_index WHERE NOT indisvalid ORDER BY 1`).map(
        (r) => r.name,
      ),
    ).toEqual(['users_email_key', 'users_email_key_ccnew'])
    await rig.cycle()

    const findings = await rig.findings('pg_invalid_indexes')
    expect(findings.map((f) => [f.key, f.severity])).toEqual([['pg_invalid_indexes:public.users_email_key', 'warning']])
    const [finding] = findings
    expect(finding).toMatchObject({
      category: 'schema',
      title: 'Invalid index public.users_email_key',
      objects: ['public.users_email_key', 'public.users_email_key_ccnew', 'public.users'],
      metrics: { is_unique: 1 },
      how_to_fix: [
        '-- first delete or change the rows with duplicate keys (the GROUP BY query above lists them): else the build fails again',
        'DROP INDEX CONCURRENTLY public.users_email_key_ccnew;   -- left by a failed REINDEX CONCURRENTLY',
        'DROP INDEX CONCURRENTLY public.users_email_key;',
        'CREATE UNIQUE INDEX CONCURRENTLY users_email_key ON public.users USING btree (email);',
      ],
    })
    expect(finding.detail).toContain(
      'The unique index public.users_email_key on public.users is marked invalid: queries never use it, yet it still rejects new duplicate values',
    )
    expect(finding.detail).toContain(
      'A failed REINDEX CONCURRENTLY of it also left public.users_email_key_ccnew, invalid as well.',
    )
    expect(finding.recommendation).toContain('resolve the duplicate values first')
    // The investigation's query finds the duplicates that failed the build.
    const duplicates = finding.how_to_investigate.find((q: string) => q.includes('GROUP BY'))
    expect(duplicates).toBe(
      'SELECT email, count(*) FROM public.users GROUP BY email HAVING count(*) > 1 LIMIT 20;   -- the duplicates that made the build fail',
    )
    expect([...(await rig.sql.unsafe(duplicates))] as unknown[]).toEqual([{ email: 'a@example.com', count: '2' }])
    // An invalid index is not also reported as unused or redundant.
    expect(await rig.findings('pg_unused_indexes')).toEqual([])

    // The cure: the duplicate resolved, then the fix's commands in order.
    await rig.sql`DELETE FROM users WHERE id = 2`
    for (const command of finding.how_to_fix.filter((c: string) => !c.startsWith('--'))) await rig.sql.unsafe(command)
    await rig.cycle()
    expect(await rig.findings('pg_invalid_indexes')).toEqual([])
    const indexes = (await rig.api('/indexes')).filter((i: any) => i.index_name.startsWith('users_email_key'))
    expect(indexes).toMatchObject([{ index_name: 'users_email_key', is_valid: true, is_unique: true }])
  })

  test('an index still being built (CREATE INDEX CONCURRENTLY waiting for an old snapshot) is a note naming the build, with no command, in the issue of the session it waits for; valid once it ends', async () => {
    rig = await postgresDoctorRig(17)
    await rig.sql`CREATE TABLE events (id int, pad text)`
    await rig.sql`INSERT INTO events SELECT g, repeat('p', 50) FROM generate_series(1, 20000) g`
    const holder = postgres(rig.dsn, { max: 1, onnotice: () => {} })
    const builder = postgres(rig.dsn, { max: 1, onnotice: () => {} })
    try {
      await holder.unsafe('BEGIN ISOLATION LEVEL REPEATABLE READ')
      const holderPid = (await holder.unsafe<{ pid: number }[]>('SELECT pg_backend_pid() AS pid'))[0]!.pid
      const building = builder.unsafe('CREATE INDEX CONCURRENTLY events_id_idx ON events (id)').then(() => undefined)
      const [view] = await until('the build to wait for old snapshots', async () => {
        const rows = await rig!
          .sql`SELECT pid, phase FROM pg_stat_progress_create_index WHERE datname = current_database()`
        return rows[0]?.phase === 'waiting for old snapshots' ? rows : undefined
      })
      await rig.cycle()
      const [finding] = await rig.findings('pg_invalid_indexes')
      expect(finding).toMatchObject({
        key: 'pg_invalid_indexes:public.events_id_idx',
        severity: 'info',
        title: 'Index public.events_id_idx is being built',
        how_to_fix: [],
        metrics: { build_pid: view!.pid, build_phase: 'waiting for old snapshots', blocker_pid: holderPid },
        objects: ['public.events_id_idx', 'public.events', `pid ${holderPid}`],
      })
      expect(finding.detail).toContain(
        `is invalid because CREATE INDEX CONCURRENTLY (pid ${view!.pid}) is still building it: phase "waiting for old snapshots"`,
      )
      expect(finding.detail).toContain(`It waits for pid ${holderPid}, `)
      // The build is a consequence of the session it waits for: in that session's issue.
      expect(finding.cause).toBe(`session:pid ${holderPid}`)
      const group = ((await rig.api('/doctor')).groups as any[]).find((g) => g.key === `session:pid ${holderPid}`)
      expect(group).toMatchObject({ kind: 'session' })
      expect(group.findings).toContain('pg_invalid_indexes:public.events_id_idx')
      await holder.unsafe('COMMIT')
      await building
      await rig.cycle()
      expect(await rig.findings('pg_invalid_indexes')).toEqual([])
    } finally {
      await holder.end({ timeout: 5 })
      await builder.end({ timeout: 5 })
    }
  })

  test('a plain invalid index is rebuilt with REINDEX CONCURRENTLY', async () => {
    rig = await postgresDoctorRig(17)
    await rig.sql`CREATE TABLE notes (id int PRIMARY KEY, body text)`
    await rig.sql`CREATE INDEX notes_body_idx ON notes (body)`
    await rig.sql`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'notes_body_idx'::regclass`
    await rig.cycle()
    const [finding] = await rig.findings('pg_invalid_indexes')
    expect(finding.how_to_fix).toEqual([
      'REINDEX INDEX CONCURRENTLY public.notes_body_idx;',
      '-- or: DROP INDEX CONCURRENTLY public.notes_body_idx; then CREATE INDEX CONCURRENTLY notes_body_idx ON public.notes USING btree (body);',
    ])
    await rig.sql.unsafe(finding.how_to_fix[0])
    await rig.cycle()
    expect(await rig.findings('pg_invalid_indexes')).toEqual([])
  })
})
