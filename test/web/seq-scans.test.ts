// A table's sequential scans on the dashboard: PostgreSQL's seq_scan counts one per process of a
// parallel scan, so the page also says how many times the table's rows were read (seq_tup_read / n_live_tup).
import { expect, test } from 'bun:test'
import { fullReads } from '../../src/web/pages/db/objects.tsx'

test('full reads: 150 parallel runs with 2 workers over 30,000 rows are 450 seq_scan but 150 reads of the table', () => {
  expect(fullReads({ seq_tup_read: 150 * 30_000, n_live_tup: 30_000 })).toBe(150)
  expect(fullReads({ seq_tup_read: 1_000, n_live_tup: 30_000 })).toBe(0)
  expect(fullReads({ seq_tup_read: 1_000, n_live_tup: 0 })).toBeNull()
  expect(fullReads({ seq_tup_read: null, n_live_tup: 10 })).toBeNull()
})
