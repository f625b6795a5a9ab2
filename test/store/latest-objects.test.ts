// The latest tables and indexes (objects/writes.ts updateLatest): a batch writes the latest row of an object
// only when it is new, changed, moved, or first reported in the hour; an unchanged object keeps its row
// and still reads as of the latest batch; an object no longer reported goes at the next batch, by key;
// and retention never deletes the row of an object that is still reported, however long it stays
// unchanged. Both stores.
import { beforeAll, describe, expect, test } from 'bun:test'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import type { IndexStat, IngestBatch, TableStat } from '../../src/shared/wire.ts'
import { type StoreKind, storeKinds } from '../support/server.ts'
import { storeAccount } from '../support/store-account.ts'

const MINUTE = 60_000
const HOUR = 3_600_000
/** An hour boundary 40 hours back: batches over 30 hours stay in the past. */
const T0 = Math.floor(Date.now() / HOUR) * HOUR - 40 * HOUR

interface TableSample {
  name: string
  /** Sequential scans since the previous sample, and in all since the first (100 more). */
  scans?: number
  totalScans?: number
  liveTuples?: number
  sizeBytes?: number | null
  lastAutovacuum?: number | null
  autovacuumEnabled?: boolean
}

function table(s: TableSample): TableStat {
  const scans = s.scans ?? 0
  const counters = {
    seq_scan: 100 + (s.totalScans ?? scans),
    seq_tup_read: 1_000,
    idx_scan: 7,
    idx_tup_fetch: 7,
    n_tup_ins: 3,
    n_tup_upd: 0,
    n_tup_del: 0,
    n_tup_hot_upd: 0,
  }
  return {
    schema_name: 'public',
    table_name: s.name,
    ...counters,
    n_live_tup: s.liveTuples ?? 500,
    n_dead_tup: 4,
    last_vacuum: null,
    last_autovacuum: s.lastAutovacuum ?? null,
    last_analyze: null,
    last_autoanalyze: null,
    table_size_bytes: s.sizeBytes === undefined ? 81_920 : s.sizeBytes,
    index_size_bytes: 16_384,
    has_primary_key: true,
    autovacuum_enabled: s.autovacuumEnabled ?? true,
    delta: {
      seq_scan: scans,
      seq_tup_read: 0,
      idx_scan: 0,
      idx_tup_fetch: 0,
      n_tup_ins: 0,
      n_tup_upd: 0,
      n_tup_del: 0,
      n_tup_hot_upd: 0,
    },
  }
}

function index(
  tableName: string,
  definition = `CREATE UNIQUE INDEX ${tableName}_pkey ON public.${tableName} USING btree (id)`,
): IndexStat {
  return {
    schema_name: 'public',
    table_name: tableName,
    index_name: `${tableName}_pkey`,
    idx_scan: 40,
    idx_tup_read: 80,
    idx_tup_fetch: 40,
    size_bytes: 16_384,
    index_def: definition,
    is_unique: true,
    is_primary: true,
    is_valid: true,
    delta: { idx_scan: 0, idx_tup_read: 0, idx_tup_fetch: 0 },
  }
}

function batch(name: string, collectedAt: number, tables: TableStat[], indexes: IndexStat[]): IngestBatch {
  return {
    batch_id: crypto.randomUUID(),
    collected_at: collectedAt,
    interval_seconds: 10,
    agent_version: 'test',
    database: { name, engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432 },
    tables,
    indexes,
  }
}

describe.each(storeKinds)('latest tables and indexes (%s store)', (kind: StoreKind) => {
  const account = storeAccount(kind, 'Latest Inc')
  let store: SqlStore
  beforeAll(() => {
    store = account.store
  })

  const ingest = (b: IngestBatch, now?: number): Promise<string> => account.ingest(b, now)

  /** The stored latest rows' own times (when each was last written), by name. */
  async function writtenAt(
    databaseId: string,
    latest: 'latest_tables' | 'latest_indexes',
  ): Promise<Record<string, number>> {
    const name = latest === 'latest_tables' ? 'table_name' : 'index_name'
    const rows = await store.driver.all<{ name: string; ts: unknown }>(
      `SELECT ${name} AS name, ts FROM ${latest} WHERE database_id = $1 ORDER BY ${name}`,
      [databaseId],
    )
    return Object.fromEntries(rows.map((r) => [r.name, Number(r.ts) - T0]))
  }

  test('an unchanged object keeps its row and reads as of the latest batch; a changed one is rewritten; a dropped one goes at the next batch', async () => {
    const at = (minute: number, second = 5) => T0 + minute * MINUTE + second * 1_000
    const id = await ingest(
      batch(
        'keep',
        at(0),
        [table({ name: 'a' }), table({ name: 'b' }), table({ name: 'c' })],
        [index('a'), index('b')],
      ),
    )
    // Minutes 1-3: a is idle; b moves at minute 2; c's autovacuum time changes at minute 3 (no delta moves).
    await ingest(
      batch(
        'keep',
        at(1),
        [table({ name: 'a' }), table({ name: 'b' }), table({ name: 'c' })],
        [index('a'), index('b')],
      ),
    )
    await ingest(
      batch(
        'keep',
        at(2),
        [table({ name: 'a' }), table({ name: 'b', scans: 2, liveTuples: 510 }), table({ name: 'c' })],
        [index('a'), index('b')],
      ),
    )
    await ingest(
      batch(
        'keep',
        at(3),
        [
          table({ name: 'a' }),
          table({ name: 'b', totalScans: 2, liveTuples: 510 }),
          table({ name: 'c', lastAutovacuum: at(2, 50) }),
        ],
        [index('a'), index('b')],
      ),
    )
    // Minute 4: sizes not measured (null) and b's index definition not deparsed (''): both keep the stored
    // ones. Autovacuum is turned off for c.
    const c4 = table({ name: 'c', lastAutovacuum: at(2, 50), autovacuumEnabled: false })
    await ingest(
      batch(
        'keep',
        at(4),
        [table({ name: 'a', sizeBytes: null }), table({ name: 'b', totalScans: 2, liveTuples: 510 }), c4],
        [index('a'), index('b', '')],
      ),
    )

    expect(await writtenAt(id, 'latest_tables')).toEqual({ a: at(0) - T0, b: at(2) - T0, c: at(4) - T0 })
    expect(await writtenAt(id, 'latest_indexes')).toEqual({ a_pkey: at(0) - T0, b_pkey: at(0) - T0 })
    const tables = await store.objects.listTables(id, 'size', 10)
    expect(
      tables.map((t) => [
        t.table_name,
        t.ts - T0,
        t.seq_scan,
        t.n_live_tup,
        t.table_size_bytes,
        t.last_autovacuum,
        t.autovacuum_enabled,
      ]),
    ).toEqual([
      ['a', at(4) - T0, 100, 500, 81_920, null, true],
      ['b', at(4) - T0, 102, 510, 81_920, null, true],
      ['c', at(4) - T0, 100, 500, 81_920, at(2, 50), false],
    ])
    expect((await store.objects.table(id, 'public', 'a'))!.ts).toBe(at(4))
    const b = await store.objects.index(id, 'public', 'b_pkey')
    expect([b!.ts, b!.index_def]).toEqual([at(4), 'CREATE UNIQUE INDEX b_pkey ON public.b USING btree (id)'])
    expect((await store.objects.listIndexes(id, 'size', 10)).map((i) => [i.index_name, i.ts])).toEqual([
      ['a_pkey', at(4)],
      ['b_pkey', at(4)],
    ])

    // Minute 5: b and its index are dropped; a and c unchanged. They go from the lists at once.
    await ingest(batch('keep', at(5), [table({ name: 'a' }), c4], [index('a')]))
    expect((await store.objects.listTables(id, 'size', 10)).map((t) => [t.table_name, t.ts])).toEqual([
      ['a', at(5)],
      ['c', at(5)],
    ])
    expect(await store.objects.table(id, 'public', 'b')).toBeUndefined()
    expect((await store.objects.listIndexes(id, 'size', 10)).map((i) => [i.index_name, i.ts])).toEqual([
      ['a_pkey', at(5)],
    ])
    expect(await writtenAt(id, 'latest_tables')).toEqual({ a: at(0) - T0, c: at(4) - T0 })

    // A late batch (minute 4, again b) changes no latest row and brings nothing back.
    await ingest(
      batch('keep', at(4, 30), [table({ name: 'a' }), table({ name: 'b', scans: 5 })], [index('a'), index('b')]),
      at(6),
    )
    expect((await store.objects.listTables(id, 'size', 10)).map((t) => [t.table_name, t.ts])).toEqual([
      ['a', at(5)],
      ['c', at(5)],
    ])
    // An empty tables section: the database has no tables any more.
    await ingest(batch('keep', at(6), [], [index('a')]))
    expect(await store.objects.listTables(id, 'size', 10)).toEqual([])
    expect((await store.objects.listIndexes(id, 'size', 10)).map((i) => [i.index_name, i.ts])).toEqual([
      ['a_pkey', at(6)],
    ])
  })

  test('the first batch of an hour rewrites every row, so retention never deletes an object still reported', async () => {
    // A table unchanged for 30 hours, reported every 20 minutes; retention 24 hours (an unverified organization's).
    let id = ''
    for (let minute = 0; minute <= 30 * 60; minute += 20) {
      id = await ingest(batch('quiet', T0 + minute * MINUTE + 5_000, [table({ name: 'q' })], [index('q')]))
    }
    const last = T0 + 30 * HOUR + 5_000
    // Written in the first batch of each hour only: the last time at 30 h.
    expect(await writtenAt(id, 'latest_tables')).toEqual({ q: 30 * HOUR + 5_000 })
    const now = last + 10 * MINUTE
    const cutoff = now - 24 * HOUR
    await store.retention.sweepDatabase(id, { before: cutoff, minutesBefore: cutoff, rollUpTo: now }, 100)
    expect((await store.objects.listTables(id, 'size', 10)).map((t) => [t.table_name, t.ts])).toEqual([['q', last]])
    expect((await store.objects.listIndexes(id, 'size', 10)).map((i) => [i.index_name, i.ts])).toEqual([
      ['q_pkey', last],
    ])
    // Within the hour, the last batch's time is read from its sampled hour, not from the row.
    await ingest(batch('quiet', last + 20 * MINUTE, [table({ name: 'q' })], [index('q')]))
    expect(await writtenAt(id, 'latest_tables')).toEqual({ q: 30 * HOUR + 5_000 })
    expect((await store.objects.table(id, 'public', 'q'))!.ts).toBe(last + 20 * MINUTE)
    // An agent that stops: 25 hours later its latest rows are past retention and go.
    const later = last + 20 * MINUTE + 25 * HOUR
    await store.retention.sweepDatabase(
      id,
      { before: later - 24 * HOUR, minutesBefore: later - 24 * HOUR, rollUpTo: later },
      100,
    )
    expect(await store.objects.listTables(id, 'size', 10)).toEqual([])
    expect(await store.objects.listIndexes(id, 'size', 10)).toEqual([])
  })
})
