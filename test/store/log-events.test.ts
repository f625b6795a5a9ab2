// The log events store on both stores: hostile text comes back byte for byte (and a LIKE over it
// escapes its wildcards), counts add up across batches into minute and hour buckets, and retention
// deletes entries after a week and minute counts after 48 hours while the hour counts keep the exact
// totals until the organization's retention.
import { beforeAll, describe, expect, test } from 'bun:test'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import type { IngestBatch, LogEventsSection } from '../../src/shared/wire.ts'
import { logEntry, logSection } from '../support/log-events.ts'
import { type StoreKind, storeKinds } from '../support/server.ts'
import { storeAccount } from '../support/store-account.ts'

const MINUTE = 60_000
const HOUR = 3_600_000
const DAY = 24 * HOUR
/** Ten days back on an hour boundary: the batches are old enough for every cutoff. */
const T0 = Math.floor(Date.now() / HOUR) * HOUR - 10 * DAY

function batch(collectedAt: number, log_events: LogEventsSection): IngestBatch {
  return {
    batch_id: crypto.randomUUID(),
    collected_at: collectedAt,
    interval_seconds: 10,
    agent_version: 'test',
    database: { name: 'logs', engine: 'postgres', engine_version: '17.6', host: 'db.internal', port: 5432 },
    log_events,
  }
}

const HOSTILE = 'quote \' dq " bs \\ pct % us _ */ -- \n\r\t \u202e\u2066 \ud83d\ude00 \ufffd é'

describe.each(storeKinds)('log events store (%s)', (kind: StoreKind) => {
  const account = storeAccount(kind, 'Logs Inc')
  let store: SqlStore
  beforeAll(() => {
    store = account.store
  })

  test('hostile text round-trips; q matches it literally; counts sum across batches; retention keeps hour totals', async () => {
    const hostile = logEntry('error', T0 + 5 * MINUTE, {
      severity: 'error',
      message: HOSTILE,
      statement: HOSTILE,
      detail: HOSTILE,
      user: HOSTILE,
      fields: { table: HOSTILE, list: [1, HOSTILE] },
    })
    const id = await account.ingest(
      batch(T0 + 6 * MINUTE, logSection([hostile], [logEntry('error', T0 + 5 * MINUTE, { severity: 'error' })])),
    )
    // a second batch, the same minute and kind: counts add up
    await account.ingest(
      batch(T0 + 7 * MINUTE, logSection([logEntry('error', T0 + 5 * MINUTE + 1, { severity: 'error' })])),
    )
    // a later entry, 9 days after T0: inside the week entries are kept
    await account.ingest(batch(T0 + 9 * DAY, logSection([logEntry('checkpoint', T0 + 9 * DAY - MINUTE)])))

    const window = { since: T0, until: T0 + 10 * DAY }
    const [found] = await store.logEvents.entries(id, { ...window, q: 'pct % us _' }, 10)
    expect([found?.message, found?.statement, found?.detail, found?.user, found?.fields]).toEqual([
      HOSTILE,
      HOSTILE,
      HOSTILE,
      HOSTILE,
      { table: HOSTILE, list: [1, HOSTILE] },
    ])
    expect(await store.logEvents.entries(id, { ...window, q: 'pct _ us %' }, 10)).toEqual([])
    expect((await store.logEvents.entries(id, { ...window, q: 'QUOTE \' DQ " BS \\' }, 10)).length).toBe(1)
    expect((await store.logEvents.entries(id, { ...window, kinds: ['error'], severities: ['error'] }, 10)).length).toBe(
      2,
    )
    expect(await store.logEvents.counts(id, { since: T0, until: T0 + HOUR }, HOUR)).toEqual([
      { bucket: T0, kind: 'error', severity: 'error', count: 3 },
    ])
    expect(await store.logEvents.dropped(id, { since: T0, until: T0 + HOUR })).toBe(1)

    const now = T0 + 10 * DAY
    await store.retention.sweepDatabase(
      id,
      { before: now - 30 * DAY, minutesBefore: now - 48 * HOUR, rollUpTo: now - HOUR, logEntriesBefore: now - 7 * DAY },
      1000,
    )
    // the entries of T0 went (older than a week), the one of day 9 stayed
    expect((await store.logEvents.entries(id, window, 10)).map((e) => e.kind)).toEqual(['checkpoint'])
    // minute rows of T0 went; the hour row keeps the exact count, which a window reaching back that far reads
    const rows = await store.driver.all<{ resolution: number; n: number }>(
      'SELECT resolution, COUNT(*) AS n FROM log_counts WHERE database_id = $1 AND bucket < $2 GROUP BY resolution',
      [id, T0 + HOUR],
    )
    expect(rows.map((r) => [Number(r.resolution), Number(r.n)])).toEqual([[3600, 2]])
    expect(
      await store.logEvents.counts(id, { since: T0, until: T0 + HOUR, minuteFloor: now - 48 * HOUR }, HOUR),
    ).toEqual([{ bucket: T0, kind: 'error', severity: 'error', count: 3 }])
    expect(await store.logEvents.dropped(id, { since: T0, until: T0 + HOUR, minuteFloor: now - 48 * HOUR })).toBe(1)
  })
})
