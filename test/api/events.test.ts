// GET /databases/{id}/events on both stores, from batches as agents of every version send them: the
// rules of derivation (a gap of more than 3 poll intervals; a late batch derives nothing; a part of a
// split cycle derives no object events; a section not carried before does not make every object appear;
// settings diffed against the last values received; a flood of setting changes in one event), a
// ClickHouse restart and tables from the uptime and parts of agents without server_state, a version
// change, alert events stored with the text of their moment (alerts opened before that and plan
// changes read at query time), the open disconnection while the agent is away,
// and the window, limit and error answers.
import { describe, expect, test } from 'bun:test'
import { INDEX_COUNTERS, INDEX_GAUGES, TABLE_COUNTERS, TABLE_GAUGES } from '../../src/shared/families.ts'
import type { ExplainPlan, IndexStat, PartStat, TableStat } from '../../src/shared/wire.ts'
import { agentSession, at, chBatch, iso, pgBatch, range } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

/** Every counter and gauge of the listed fields unknown (null): only the names matter here. */
const unknown = (keys: readonly string[]) => Object.fromEntries(keys.map((k) => [k, null]))

const table = (name: string): TableStat => ({
  ...(unknown([...TABLE_COUNTERS, ...TABLE_GAUGES]) as Pick<
    TableStat,
    (typeof TABLE_COUNTERS)[number] | (typeof TABLE_GAUGES)[number]
  >),
  schema_name: 'public',
  table_name: name,
  last_vacuum: null,
  last_autovacuum: null,
  last_analyze: null,
  last_autoanalyze: null,
  delta: null,
})

const index = (name: string, valid = true): IndexStat => ({
  ...(unknown([...INDEX_COUNTERS, ...INDEX_GAUGES]) as Pick<
    IndexStat,
    (typeof INDEX_COUNTERS)[number] | (typeof INDEX_GAUGES)[number]
  >),
  schema_name: 'public',
  table_name: 'orders',
  index_name: name,
  index_def: `CREATE INDEX ${name} ON public.orders USING btree (id)`,
  is_unique: false,
  is_primary: false,
  is_valid: valid,
  delta: null,
})

const part = (database: string, tableName: string): PartStat => ({
  database,
  table: tableName,
  partition_id: 'all',
  active_parts: 1,
  rows: 10,
  bytes_on_disk: 100,
})

const plan = (hash: string, ts: number, planHash: string, cost: number): ExplainPlan => ({
  query_hash: hash,
  ts,
  plan_json: { Plan: { 'Node Type': 'Seq Scan' } },
  plan_hash: planHash,
  total_cost: cost,
  actual_time_ms: null,
  seq_scans: 1,
  index_scans: 0,
  rows_estimated: null,
  rows_actual: null,
  source: 'sampled',
})

interface Event {
  ts: string
  kind: string
  severity?: string
  title: string
  detail?: string
  object?: string
  link?: string
}

for (const kind of storeKinds) {
  describe(`events (${kind})`, () => {
    const s = agentSession(kind)
    const window = range(at(-10), at(300))
    const list = async (id: string, query = window): Promise<Event[]> => s.ok(id, `/events?${query}`)

    test('an agent without server_state: its first batch, a gap, tables and indexes appearing, becoming valid and going', async () => {
      const name = `old-agent-${kind}`
      const id = await s.ingest(pgBatch(name, at(0), { tables: [table('orders')], indexes: [index('orders_pkey')] }))
      await s.ingest(
        pgBatch(name, at(0, 10), {
          tables: [table('orders'), table('items')],
          indexes: [index('orders_pkey'), index('orders_new', false)],
        }),
      )
      // 30 s is 3 intervals of 10 s: not a gap; 41 s is
      await s.ingest(
        pgBatch(name, at(0, 40), {
          tables: [table('orders'), table('items')],
          indexes: [index('orders_pkey'), index('orders_new')],
        }),
      )
      await s.ingest(pgBatch(name, at(1, 21), { tables: [table('orders')], indexes: [index('orders_pkey')] }))
      const events = await list(id)
      const link = (tab: string, object: string) => `#/databases/${id}/${tab}/${encodeURIComponent(object)}`
      expect(events).toEqual([
        {
          ts: iso(at(1, 21)),
          kind: 'agent_connected',
          severity: 'info',
          title: 'Agent connected',
          detail: 'after a gap of 41 s',
        },
        {
          ts: iso(at(1, 21)),
          kind: 'index_dropped',
          severity: 'info',
          title: 'Index dropped: public.orders_new',
          detail: 'on public.orders',
          object: 'public.orders_new',
        },
        {
          ts: iso(at(1, 21)),
          kind: 'table_dropped',
          severity: 'info',
          title: 'Table dropped: public.items',
          object: 'public.items',
        },
        {
          ts: iso(at(0, 40)),
          kind: 'agent_disconnected',
          severity: 'warning',
          title: 'Agent stopped sending',
          detail: `no batch for 41 s (from ${iso(at(0, 40))} to ${iso(at(1, 21))})`,
        },
        {
          ts: iso(at(0, 40)),
          kind: 'index_valid',
          severity: 'info',
          title: 'Index became valid: public.orders_new',
          detail: 'on public.orders: its build finished',
          object: 'public.orders_new',
          link: link('indexes', 'public/orders_new'),
        },
        {
          ts: iso(at(0, 10)),
          kind: 'index_created',
          severity: 'info',
          title: 'Index created: public.orders_new',
          detail:
            'CREATE INDEX orders_new ON public.orders USING btree (id) (not valid yet: being built, or its build failed)',
          object: 'public.orders_new',
          link: link('indexes', 'public/orders_new'),
        },
        {
          ts: iso(at(0, 10)),
          kind: 'table_created',
          severity: 'info',
          title: 'Table created: public.items',
          object: 'public.items',
          link: link('tables', 'public/items'),
        },
        {
          ts: iso(at(0)),
          kind: 'agent_connected',
          severity: 'info',
          title: 'Agent connected',
          detail: 'first batch from the agent',
        },
      ])
    })

    test('a late batch derives nothing; a part of a split cycle derives no object events; a section carried first is not news', async () => {
      const name = `rules-${kind}`
      const id = await s.ingest(pgBatch(name, at(0), { tables: [table('a')] }))
      await s.ingest(pgBatch(name, at(0, 10), { tables: [table('a')] }))
      // delivered late from a buffer, older than the latest: no gap, no objects
      await s.ingest(pgBatch(name, at(0, 5), { tables: [table('late')] }))
      // a cycle split in two parts, each naming some of the tables: neither derives object events (so the
      // new table b goes unreported: a documented limit of split cycles)
      const cycle = crypto.randomUUID()
      await s.ingest({ ...pgBatch(name, at(0, 20), { tables: [table('a')] }), batch_id: `${cycle}.1` })
      await s.ingest({ ...pgBatch(name, at(0, 20), { tables: [table('b')] }), batch_id: `${cycle}.2` })
      // the indexes section, first carried now: its indexes are not "created"
      await s.ingest(pgBatch(name, at(0, 30), { tables: [table('a'), table('b')], indexes: [index('a_idx')] }))
      const kinds = (await list(id)).map((e) => `${e.kind} ${e.object ?? ''}`.trim())
      expect(kinds).toEqual(['agent_connected'])
    })

    test('settings: diffed against the last values received, old and new value; a flood is one event', async () => {
      const name = `settings-${kind}`
      const state = (settings?: Record<string, string>) => ({
        server_state: {
          agent_started_at: at(0),
          settings_hash: String(Bun.hash(JSON.stringify(settings ?? {}))),
          ...(settings ? { settings } : {}),
        },
      })
      const id = await s.ingest(pgBatch(name, at(0), state({ work_mem: '4MB', search_path: '"$user", public' })))
      // the digest only: nothing to compare
      await s.ingest(pgBatch(name, at(0, 10), state()))
      await s.ingest(pgBatch(name, at(0, 20), state({ work_mem: '8MB', search_path: '"$user", public', jit: 'off' })))
      const many = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`s${String(i).padStart(2, '0')}`, 'on']))
      await s.ingest(pgBatch(name, at(0, 30), state(many)))
      const events = (await list(id)).filter((e) => e.kind === 'setting_change')
      expect(events.map(({ title, detail, object }) => ({ title, detail, object }))).toEqual([
        {
          title: '63 settings changed',
          detail: `${['jit', ...Object.keys(many), 'search_path', 'work_mem'].sort().slice(0, 50).join(', ')}, … and 13 more`,
          object: undefined,
        },
        { title: 'jit changed', detail: '(not set) → off', object: 'jit' },
        { title: 'work_mem changed', detail: '4MB → 8MB', object: 'work_mem' },
      ])
    })

    test('hostile server_state: times past the batch are not believed, a flood of long names makes a bounded event', async () => {
      const name = `hostile-state-${kind}`
      const future = Date.parse('9999-12-31T23:59:58.999Z')
      const id = await s.ingest(
        pgBatch(name, at(0), { server_state: { started_at: at(-60), stats_resets: { pg_stat_database: at(-90) } } }),
      )
      // A start and a reset in year 9999: no event, and the start kept is still the real one.
      await s.ingest(
        pgBatch(name, at(0, 10), { server_state: { started_at: future, stats_resets: { pg_stat_database: future } } }),
      )
      // So a real restart after it is still seen.
      await s.ingest(pgBatch(name, at(0, 20), { server_state: { started_at: at(0, 15) } }))
      // 5,000 settings of 256-character names, changed: one event with a bounded detail.
      const flood = (value: string) =>
        Object.fromEntries(
          Array.from({ length: 5_000 }, (_, i) => [`${String(i).padStart(5, '0')}${'n'.repeat(251)}`, value]),
        )
      await s.ingest(pgBatch(name, at(0, 30), { server_state: { settings_hash: 'a', settings: flood('on') } }))
      await s.ingest(pgBatch(name, at(0, 40), { server_state: { settings_hash: 'b', settings: flood('off') } }))
      const events = (await list(id)).filter((e) => e.ts !== iso(at(0)))
      expect(events.some((e) => e.ts.startsWith('9999'))).toBe(false)
      expect(events.filter((e) => e.kind === 'restart').map((e) => [e.ts, e.detail])).toEqual([
        [iso(at(0, 15)), `started at ${iso(at(0, 15))} (previous start ${iso(at(-60))})`],
      ])
      const [many] = events.filter((e) => e.kind === 'setting_change')
      expect(many!.title).toBe('5000 settings changed')
      expect(many!.detail!.length).toBeLessThanOrEqual(2_000)
      expect(many!.detail).toEndWith('…')
    })

    test('PostgreSQL: restart, statistics reset, agent restart and version change from server_state', async () => {
      const name = `state-${kind}`
      const id = await s.ingest(
        pgBatch(name, at(0), {
          server_state: {
            started_at: at(-60),
            agent_started_at: at(-1),
            stats_resets: { pg_stat_statements: null, pg_stat_database: at(-90) },
          },
        }),
      )
      await s.ingest(
        pgBatch(
          name,
          at(0, 10),
          {
            server_state: {
              started_at: at(0, 7),
              agent_started_at: at(0, 8),
              stats_resets: { pg_stat_statements: at(0, 9), pg_stat_database: at(-90) },
            },
          },
          '17.3',
        ),
      )
      const events = (await list(id)).filter((e) => e.ts !== iso(at(0)))
      expect(events).toEqual([
        {
          ts: iso(at(0, 10)),
          kind: 'agent_connected',
          severity: 'info',
          title: 'Agent connected',
          detail: `agent test started at ${iso(at(0, 8))}`,
        },
        {
          ts: iso(at(0, 10)),
          kind: 'version_change',
          severity: 'info',
          title: 'PostgreSQL version changed',
          detail: '17.2 → 17.3',
          object: '17.3',
        },
        {
          ts: iso(at(0, 9)),
          kind: 'stats_reset',
          severity: 'info',
          title: 'Statistics reset: pg_stat_statements',
          detail: `pg_stat_statements counts from zero since ${iso(at(0, 9))}`,
          object: 'pg_stat_statements',
        },
        {
          ts: iso(at(0, 7)),
          kind: 'restart',
          severity: 'warning',
          title: 'PostgreSQL restarted',
          detail: `started at ${iso(at(0, 7))} (previous start ${iso(at(-60))})`,
        },
      ])
    })

    test('ClickHouse without server_state: a restart from uptime (seconds of jitter are the same start), tables from parts', async () => {
      const name = `clickhouse-${kind}`
      const id = await s.ingest(
        chBatch(name, at(0), { server_metrics: { uptime_s: 3600 }, parts: [part('db', 'events')] }),
      )
      await s.ingest(
        chBatch(name, at(0, 10), {
          server_metrics: { uptime_s: 3611 },
          parts: [part('db', 'events'), part('db', 'clicks')],
        }),
      )
      await s.ingest(chBatch(name, at(0, 20), { server_metrics: { uptime_s: 4 }, parts: [part('db', 'clicks')] }))
      const events = (await list(id)).filter((e) => e.ts !== iso(at(0)))
      expect(events).toEqual([
        {
          ts: iso(at(0, 20)),
          kind: 'table_dropped',
          severity: 'info',
          title: 'Table gone: db.events',
          detail: 'no active parts any more (dropped, truncated or emptied)',
          object: 'db.events',
        },
        {
          ts: iso(at(0, 16)),
          kind: 'restart',
          severity: 'warning',
          title: 'ClickHouse restarted',
          detail: `started at ${iso(at(0, 16))} (previous start ${iso(at(0) - 3600_000)})`,
        },
        {
          ts: iso(at(0, 10)),
          kind: 'table_created',
          severity: 'info',
          title: 'Table created: db.clicks',
          detail: 'its first active parts',
          object: 'db.clicks',
          link: `#/databases/${id}/parts`,
        },
      ])
    })

    test('alerts opened before alert events were stored, and plan changes, read from their own tables', async () => {
      const name = `read-${kind}`
      const id = await s.ingest(
        pgBatch(name, at(0), {
          query_stats: [
            {
              query_hash: 'q1',
              query_text: 'SELECT *\n  FROM orders WHERE id = $1',
              calls: 1,
              total_time_ms: 1,
              rows: 1,
              shared_blks_hit: 0,
              shared_blks_read: 0,
            },
          ],
          explain_plans: [plan('q1', at(0), 'p1', 10), plan('q1', at(1), 'p1', 10), plan('q1', at(2), 'p2', 99.5)],
        }),
      )
      const driver = s.server.store.driver
      await driver.run(
        `INSERT INTO alerts (id, database_id, key, rule, severity, title, detail, opened_at, last_seen_at, resolved_at) VALUES ($1, $2, 'blocked_sessions', 'blocked_sessions', 'critical', 'Sessions blocked', 'pid 7 waits', $3, $5, $4)`,
        [crypto.randomUUID(), id, at(3), at(4), at(3, 30)],
      )
      const events = (await list(id)).filter((e) => e.kind !== 'agent_connected')
      expect(events).toEqual([
        {
          ts: iso(at(4)),
          kind: 'alert_resolved',
          severity: 'info',
          title: 'Alert resolved: Sessions blocked',
          detail: `pid 7 waits (as of ${iso(at(3, 30))}, its last evaluation while open)`,
          object: 'blocked_sessions',
          link: `#/databases/${id}/alerts`,
        },
        {
          ts: iso(at(3)),
          kind: 'alert_opened',
          severity: 'critical',
          title: 'Alert opened: Sessions blocked',
          detail: `pid 7 waits (as of ${iso(at(3, 30))}, its last evaluation while open)`,
          object: 'blocked_sessions',
          link: `#/databases/${id}/alerts`,
        },
        {
          ts: iso(at(2)),
          kind: 'plan_change',
          severity: 'info',
          title: 'Plan changed: SELECT * FROM orders WHERE id = $1',
          detail: 'estimated cost 10 → 99.5',
          object: 'q1',
          link: `#/databases/${id}/queries/q1`,
        },
      ])
      // the window: the alert's opening only
      expect((await list(id, range(at(3), at(3, 30)))).map((e) => e.kind)).toEqual(['alert_opened'])
      // limit
      expect((await list(id, `${window}&limit=1`)).map((e) => e.kind)).toEqual(['alert_resolved'])
    })

    test('alert events keep the text of their moment: the opening the text at opening, the resolution that of the last evaluation', async () => {
      const id = await s.ingest(pgBatch(`alert-text-${kind}`, at(0)))
      const health = s.server.store.monitor
      const finding = (detail: string) => ({
        key: 'pg_xmin_horizon:pid 10434',
        rule: 'pg_xmin_horizon',
        severity: 'critical' as const,
        category: 'maintenance',
        title: `A transaction holds back cleanup: ${detail}`,
        detail: `pid 10434 has held its snapshot for ${detail}; last vacuumed 1.4 min ago`,
        recommendation: 'End it.',
        remediation_sql: 'SELECT pg_terminate_backend(10434);',
      })
      // opened, then evaluated again with the rule's text changing, then resolved
      expect(await health.syncAlerts(id, [finding('28 s')], [], [], at(3))).toEqual({
        opened: ['pg_xmin_horizon:pid 10434'],
        resolved: [],
      })
      await health.syncAlerts(id, [finding('5.0 min')], [], [], at(8))
      await health.syncAlerts(id, [finding('13.2 min')], [], [], at(16, 12))
      expect(await health.syncAlerts(id, [], [], [], at(17))).toEqual({
        opened: [],
        resolved: ['pg_xmin_horizon:pid 10434'],
      })
      // the alert itself has its latest text
      const [alert] = await health.listAlerts(id, 'all', 10)
      expect({ title: alert!.title, resolved_at: alert!.resolved_at }).toEqual({
        title: 'A transaction holds back cleanup: 13.2 min',
        resolved_at: at(17),
      })
      const alertsLink = `#/databases/${id}/alerts`
      expect((await list(id)).filter((e) => e.kind.startsWith('alert_'))).toEqual([
        {
          ts: iso(at(17)),
          kind: 'alert_resolved',
          severity: 'info',
          title: 'Alert resolved: A transaction holds back cleanup: 13.2 min',
          detail: `pid 10434 has held its snapshot for 13.2 min; last vacuumed 1.4 min ago (as of ${iso(at(16, 12))}, its last evaluation while open)`,
          object: 'pg_xmin_horizon:pid 10434',
          link: alertsLink,
        },
        {
          ts: iso(at(3)),
          kind: 'alert_opened',
          severity: 'critical',
          title: 'Alert opened: A transaction holds back cleanup: 28 s',
          detail: 'pid 10434 has held its snapshot for 28 s; last vacuumed 1.4 min ago',
          object: 'pg_xmin_horizon:pid 10434',
          link: alertsLink,
        },
      ])
      // the rows are stored, not derived: the events table holds exactly these two
      const stored = await s.server.store.driver.all(
        `SELECT kind, ts FROM events WHERE database_id = $1 AND kind LIKE 'alert%' ORDER BY ts`,
        [id],
      )
      expect(stored.map((r) => [r.kind, Number(r.ts)])).toEqual([
        ['alert_opened', at(3)],
        ['alert_resolved', at(17)],
      ])
      // two alerts of one rule opening in one evaluation are two events; a reopened key is a new opening
      const other = { ...finding('1 s'), key: 'pg_xmin_horizon:pid 99' }
      await health.syncAlerts(id, [finding('2 s'), other], [], [], at(20))
      expect((await list(id, range(at(20), at(21)))).map((e) => `${e.kind} ${e.object} ${e.title}`)).toEqual([
        'alert_opened pg_xmin_horizon:pid 10434 Alert opened: A transaction holds back cleanup: 2 s',
        'alert_opened pg_xmin_horizon:pid 99 Alert opened: A transaction holds back cleanup: 1 s',
      ])
    })

    test('several serve processes evaluating one database at once open the alert and write its events once', async () => {
      const id = await s.ingest(pgBatch(`alert-race-${kind}`, at(0)))
      const health = s.server.store.monitor
      const f = {
        key: 'pg_blocked_sessions',
        rule: 'pg_blocked_sessions',
        severity: 'critical' as const,
        category: 'locks',
        title: 'Sessions blocked',
        detail: 'pid 7 waits',
        recommendation: '',
        remediation_sql: '',
      }
      // at slightly different times, as two processes' clocks would be: the events' key alone would not make them one
      const opens = await Promise.all([1, 2, 3, 4].map((ms) => health.syncAlerts(id, [f], [], [], at(5) + ms)))
      expect(opens.flatMap((o) => o.opened)).toEqual(['pg_blocked_sessions'])
      const resolves = await Promise.all([1, 2, 3, 4].map((ms) => health.syncAlerts(id, [], [], [], at(6) + ms)))
      expect(resolves.flatMap((o) => o.resolved)).toEqual(['pg_blocked_sessions'])
      const events = (await list(id)).filter((e) => e.kind.startsWith('alert_'))
      expect(events.map((e) => e.kind)).toEqual(['alert_resolved', 'alert_opened'])
    })

    test('while the agent is away: an open "agent stopped sending" since its last batch, read at query time', async () => {
      const id = await s.ingest(pgBatch(`away-${kind}`, Date.now() - 1_000))
      const last = Date.parse((await s.ok(id, '')).last_seen_at)
      expect((await s.ok(id, '/events')).filter((e: Event) => e.kind === 'agent_disconnected')).toEqual([])
      // past max(3 × the 10 s poll interval, 60 s): disconnected (DECISIONS.md)
      s.server.advance(2 * 60_000)
      expect((await s.ok(id, '/events'))[0]).toEqual({
        ts: iso(last),
        kind: 'agent_disconnected',
        severity: 'warning',
        title: 'Agent stopped sending',
        detail: `no batch since ${iso(last)} (2 min ago)`,
      })
    })

    test('errors: a bad window or limit is a 400, another organization gets 404', async () => {
      const id = await s.ingest(pgBatch(`errors-${kind}`, at(0)))
      expect(await s.get(id, '/events?since=yesterday')).toEqual({
        status: 400,
        body: { error: 'since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z' },
      })
      expect(await s.get(id, `/events?${range(at(2), at(1))}`)).toEqual({
        status: 400,
        body: { error: 'since must be before until' },
      })
      expect((await s.get(id, '/events?limit=0')).status).toBe(400)
      expect((await s.get(id, '/events?limit=99999')).status).toBe(200)
      await s.expectHiddenFromOtherOrganizations(id, ['/events'])
      // a NUL in a setting's name or value (a PostgreSQL store cannot hold it) is refused, not a store error;
      // so is a name past its length
      for (const settings of [{ 'a\u0000': 'x' }, { work_mem: 'x\u0000' }] as Record<string, string>[]) {
        const res = await s.server.call('POST', '/api/v1/ingest', {
          apiKey: s.key,
          body: pgBatch(`errors-${kind}`, at(1), { server_state: { settings } }),
        })
        expect({ status: res.status, body: res.body }).toEqual({
          status: 400,
          body: { error: 'request body strings must not contain NUL characters' },
        })
      }
      const long = await s.server.call('POST', '/api/v1/ingest', {
        apiKey: s.key,
        body: pgBatch(`errors-${kind}`, at(1), { server_state: { settings: { ['x'.repeat(257)]: 'on' } } }),
      })
      expect({ status: long.status, named: String(long.body.error).includes('server_state.settings') }).toEqual({
        status: 400,
        named: true,
      })
    })
  })
}
