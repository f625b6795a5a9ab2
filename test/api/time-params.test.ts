// Times in query parameters are RFC 3339 dates that exist: a day past the month's end, hour 24, a
// minute or offset out of range and times before 1970 are a 400 (Date.parse reads 2026-02-30 as 2 March,
// and a year-0000 window was echoed back as "-000001-12-31T…", which is no RFC 3339).
import { describe, expect, test } from 'bun:test'
import { agentSession, pgBatch } from '../support/batches.ts'

describe('time parameters (sqlite)', () => {
  const s = agentSession('sqlite')

  test('days that do not exist, hour 24 and times before 1970 are refused; real ones, leap days and offsets are read', async () => {
    const id = await s.ingest(pgBatch('times', Date.now() - 5_000))
    for (const since of [
      '2026-02-30T00:00:00Z',
      '2026-02-29T00:00:00Z',
      '2026-04-31T00:00Z',
      '2026-13-01T00:00Z',
      '2026-01-01T24:00Z',
      '2026-01-01T23:60Z',
      '2026-01-01T00:00:61Z',
      '2026-01-01T00:00+24:00',
      '0000-01-01T00:00Z',
      '1969-12-31T23:59:59Z',
    ]) {
      const res = await s.get(id, `/queries?since=${encodeURIComponent(since)}`)
      expect([since, res.status, res.body.error]).toEqual([
        since,
        400,
        'since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z',
      ])
      expect([since, (await s.get(id, `/active?at=${encodeURIComponent(since)}`)).status]).toEqual([since, 400])
    }
    for (const since of [
      '2024-02-29T00:00:00Z',
      '2026-01-31T23:59:59.999Z',
      '2026-06-30T12:00:00+05:30',
      '1970-01-01T00:00:00Z',
    ]) {
      expect([since, (await s.get(id, `/queries?since=${encodeURIComponent(since)}`)).status]).toEqual([since, 200])
    }
    const window = await s.get(id, `/active/history?since=${encodeURIComponent('2026-06-30T12:00:00+05:30')}`)
    expect([window.status, window.body.since]).toEqual([200, '2026-06-30T06:30:00.000Z'])
  })
})
