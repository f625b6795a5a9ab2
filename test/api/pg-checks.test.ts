// The PgHero-parity endpoints (/constraints/invalid, /bloat, /connections, /progress) on both stores:
// what the latest batch carrying each section said, with hostile names passed through as data and the
// VALIDATE command quoted; empty with collected_at null for an agent that predates the sections; a
// later batch without a section keeps the last one; a newer agent's unknown fields are left out; bad
// parameters are 400s naming the field, ClickHouse databases 400, other organizations 404.
import { describe, expect, test } from 'bun:test'
import type { BloatEstimate, ConnectionGroup, InvalidConstraint, ProgressEntry } from '../../src/shared/wire.ts'
import { agentSession, at, iso, pgBatch } from '../support/batches.ts'
import { storeKinds } from '../support/server.ts'

const SCHEMA = 'we"ird\n*/ schéma'
const TABLE = 'ta\'ble"\n*/ ünï 🐘'
const PATHS = ['/constraints/invalid', '/bloat', '/connections', '/progress']

const constraint: InvalidConstraint = {
  schema_name: SCHEMA,
  table_name: TABLE,
  constraint_name: 'ck"\n*/ ü',
  constraint_type: 'check',
  definition: 'CHECK ((qty > 0)) NOT VALID',
}
const estimate = (kind: 'table' | 'index', name: string | null, size: number, bloat: number): BloatEstimate => ({
  kind,
  schema_name: SCHEMA,
  table_name: TABLE,
  index_name: name,
  size_bytes: size,
  expected_bytes: size - bloat,
  bloat_bytes: bloat,
  fillfactor: kind === 'table' ? 100 : 90,
  live_rows: 1000,
})
const group = (
  user: string | null,
  app: string,
  addr: string | null,
  state: string | null,
  count: number,
): ConnectionGroup => ({
  database: 'app',
  user,
  application_name: app,
  client_addr: addr,
  state,
  count,
})
const running: ProgressEntry = {
  pid: 4242,
  command: 'CREATE INDEX CONCURRENTLY',
  phase: 'waiting for old snapshots',
  schema_name: SCHEMA,
  table_name: TABLE,
  index_name: 'ix */',
  unit: 'lockers waited for',
  done: 0,
  total: 1,
  percent: 0,
  started_at: at(9),
}
/** What /progress says of the waits of an entry from an agent that predates them. */
const NO_WAITS = {
  wait_event_type: null,
  wait_event: null,
  lockers_done: null,
  lockers_total: null,
  current_locker_pid: null,
  blocker: null,
}

for (const kind of storeKinds) {
  describe(`${kind} store`, () => {
    const session = agentSession(kind)

    test('a wire-valid but inconsistent bloat estimate (more bloat than size, a size of 5e-324) answers a ratio of at most 1, never a 500', async () => {
      const odd = [
        { ...estimate('table', null, 5e-324, Number.MAX_SAFE_INTEGER), expected_bytes: 0 },
        { ...estimate('index', 'twice', 100, 200), expected_bytes: 0 },
      ]
      const id = await session.ingest(pgBatch('odd-bloat', at(10), { bloat: odd }))
      const res = await session.get(id, '/bloat')
      expect(res.status).toBe(200)
      expect(
        res.body.entries.map((e: { index_name: string | null; bloat_ratio: number }) => [e.index_name, e.bloat_ratio]),
      ).toEqual([
        [null, 1],
        ['twice', 1],
      ])
    })

    test('an agent without the sections: every endpoint is empty with collected_at null', async () => {
      const id = await session.ingest(pgBatch('old-agent', at(10), { tables: [] }))
      expect(await session.ok(id, '/constraints/invalid')).toEqual({ collected_at: null, constraints: [] })
      expect(await session.ok(id, '/bloat')).toMatchObject({ estimated_at: null, estimate: true, entries: [] })
      expect(await session.ok(id, '/connections')).toEqual({
        collected_at: null,
        total: 0,
        slots: null,
        by_state: [],
        by_user: [],
        by_application: [],
        by_client: [],
        by_database: [],
        groups: [],
      })
      expect(await session.ok(id, '/progress')).toEqual({ collected_at: null, operations: [] })
    })

    test('the latest sections as sent, names as data, the VALIDATE command quoted; a batch without them keeps them, a late one does not replace them', async () => {
      const groups = [
        group('app_user', 'web', '10.0.0.1', 'idle', 7),
        group('app_user', 'web', '10.0.0.2', 'active', 2),
        group('report"er\n*/', 'cron ü', null, 'idle in transaction', 1),
        group('app_user', 'worker', '10.0.0.1', 'idle', 3),
      ]
      const bloat = [
        estimate('table', null, 100 * 8192, 60 * 8192),
        estimate('index', 'ix "b"\n*/', 50 * 8192, 40 * 8192),
        estimate('index', 'packed', 10 * 8192, 0),
      ]
      const id = await session.ingest(
        pgBatch('checked', at(10), {
          invalid_constraints: [constraint],
          bloat,
          connections: groups,
          progress: [running],
        }),
      )
      expect(await session.ok(id, '/constraints/invalid')).toEqual({
        collected_at: iso(at(10)),
        // Names with a newline are written U&"..." with the character escaped, so the command stays one line.
        constraints: [
          {
            ...constraint,
            validate_sql:
              'ALTER TABLE U&"we""ird\\000A*/ schéma".U&"ta\'ble""\\000A*/ ünï 🐘" VALIDATE CONSTRAINT U&"ck""\\000A*/ ü";',
          },
        ],
      })
      const bloatBody = await session.ok(id, '/bloat')
      expect(bloatBody.estimated_at).toBe(iso(at(10)))
      expect(bloatBody.method).toContain('Estimated from planner statistics')
      expect(
        bloatBody.entries.map((e: { index_name: string | null; bloat_ratio: number }) => [e.index_name, e.bloat_ratio]),
      ).toEqual([
        [null, 0.6],
        ['ix "b"\n*/', 0.8],
        ['packed', 0],
      ])
      expect(
        (await session.ok(id, '/bloat?kind=index')).entries.map((e: { index_name: string }) => e.index_name),
      ).toEqual(['ix "b"\n*/', 'packed'])
      expect(
        (await session.ok(id, `/bloat?min_bytes=${41 * 8192}`)).entries.map(
          (e: { index_name: string | null }) => e.index_name,
        ),
      ).toEqual([null])
      expect((await session.ok(id, '/bloat?limit=1')).entries.length).toBe(1)

      expect(await session.ok(id, '/connections')).toEqual({
        collected_at: iso(at(10)),
        total: 13,
        slots: null,
        by_state: [
          { value: 'idle', count: 10 },
          { value: 'active', count: 2 },
          { value: 'idle in transaction', count: 1 },
        ],
        by_user: [
          { value: 'app_user', count: 12 },
          { value: 'report"er\n*/', count: 1 },
        ],
        by_application: [
          { value: 'web', count: 9 },
          { value: 'worker', count: 3 },
          { value: 'cron ü', count: 1 },
        ],
        by_client: [
          { value: '10.0.0.1', count: 10 },
          { value: '10.0.0.2', count: 2 },
          { value: null, count: 1 },
        ],
        by_database: [{ value: 'app', count: 13 }],
        groups,
      })
      expect(await session.ok(id, '/progress')).toEqual({
        collected_at: iso(at(10)),
        operations: [{ ...running, ...NO_WAITS, started_at: iso(at(9)) }],
      })

      // The next cycle's bloat estimate was skipped (statistics unchanged) and nothing runs any more.
      await session.ingest(pgBatch('checked', at(11), { progress: [], connections: groups.slice(0, 1) }))
      expect((await session.ok(id, '/bloat')).entries.length).toBe(3)
      expect(await session.ok(id, '/progress')).toEqual({ collected_at: iso(at(11)), operations: [] })
      expect((await session.ok(id, '/connections')).total).toBe(7)
      // A batch delivered late from the agent's buffer does not replace newer snapshots.
      await session.ingestLate(pgBatch('checked', at(10, 30), { progress: [running] }), 30)
      await session.ingestLate(pgBatch('checked', at(9), { invalid_constraints: [] }), 120)
      expect((await session.ok(id, '/progress')).operations).toEqual([])
      expect((await session.ok(id, '/constraints/invalid')).constraints.length).toBe(1)
    })

    test('connections against max_connections less both reserves, per state, from the settings the agent sent; odd values leave it out', async () => {
      const settings = { max_connections: '20', superuser_reserved_connections: '3', reserved_connections: '2' }
      const groups = [group('app', 'web', null, 'idle', 10), group('app', 'web', null, 'active', 2)]
      const id = await session.ingest({
        ...pgBatch('slots', at(10), { connections: groups }),
        server_state: { settings_hash: 'a', settings },
      })
      expect((await session.ok(id, '/connections')).slots).toEqual({
        max_connections: 20,
        superuser_reserved_connections: 3,
        reserved_connections: 2,
        usable: 15,
        used_ratio: 0.8,
        headroom: 3,
        by_state: [
          { value: 'idle', count: 10, ratio: 0.6667 },
          { value: 'active', count: 2, ratio: 0.1333 },
        ],
      })
      await session.ingest({
        ...pgBatch('slots', at(11), { connections: groups }),
        server_state: { settings_hash: 'b', settings: { max_connections: '1e9' } },
      })
      expect((await session.ok(id, '/connections')).slots).toBeNull()
    })

    test('a newer agent: a field of these sections this server does not know is left out, the rest stored', async () => {
      const id = await session.ingest({
        ...pgBatch('newer-agent', at(10), { progress: [{ ...running, ...({ delay_time_ms: 12 } as object) }] }),
        ...({ future_section: [{ a: 1 }] } as object),
      } as ReturnType<typeof pgBatch>)
      expect(await session.ok(id, '/progress')).toEqual({
        collected_at: iso(at(10)),
        operations: [{ ...running, ...NO_WAITS, started_at: iso(at(9)) }],
      })
    })

    test('bad parameters are 400s naming the field; ClickHouse is refused; other organizations get 404', async () => {
      const id = await session.ingest(pgBatch('params', at(10), { bloat: [] }))
      expect(await session.get(id, '/bloat?kind=view')).toEqual({
        status: 400,
        body: { error: 'kind must be one of: table, index' },
      })
      for (const bad of ['-1', '1.5', 'lots', '']) {
        expect(await session.get(id, `/bloat?min_bytes=${bad}`)).toEqual({
          status: 400,
          body: { error: 'min_bytes must be a whole number of bytes' },
        })
      }
      for (const path of PATHS) {
        expect((await session.get(id, `${path}?limit=0`)).status).toBe(400)
        expect((await session.get(id, `${path}?limit=99999999`)).status).toBe(200)
      }
      const ch = pgBatch('ch', at(10))
      ch.database = { name: 'ch', engine: 'clickhouse', engine_version: '24.3', host: 'ch.internal', port: 8123 }
      const chId = await session.ingest(ch)
      await session.expectEach(chId, PATHS, {
        status: 400,
        body: { error: 'this endpoint serves postgres databases; "ch" is a clickhouse database' },
      })
      await session.expectHiddenFromOtherOrganizations(id, PATHS)
      expect((await session.server.call('GET', `/api/v1/databases/${id}/bloat`)).status).toBe(401)
    })
  })
}
