// Counter deltas between two samples (src/agent/collectors/delta.ts): a counter the previous sample does
// not have at all, as after an agent upgrade that reads a new counter with the older agent's saved state,
// has no delta yet (null), not its whole value since the table was created; a reset or a new subject
// still counts every counter whole.
import { describe, expect, test } from 'bun:test'
import { deltaOf, zerosOf } from '../../src/agent/collectors/delta.ts'
import { deltaSince } from '../../src/agent/collectors/postgres/common.ts'

describe('deltaOf', () => {
  test('a counter absent from the previous sample is null; the others are their increase', () => {
    const saved = { n_tup_upd: 2046 + 46, n_tup_hot_upd: 2046 } as Record<string, number | null>
    const now = { n_tup_upd: 2092 + 30, n_tup_hot_upd: 2046 + 26, n_tup_newpage_upd: 361 }
    expect(deltaOf(saved, now)).toEqual({ n_tup_upd: 30, n_tup_hot_upd: 26, n_tup_newpage_upd: null })
    // the next sample has it: from then on a delta
    expect(deltaOf(now, { ...now, n_tup_newpage_upd: 365 })).toEqual({
      n_tup_upd: 0,
      n_tup_hot_upd: 0,
      n_tup_newpage_upd: 4,
    })
  })

  test('a counter that went down resets the subject: every counter counts whole, a new one included', () => {
    expect(deltaOf({ seq_scan: 10 } as Record<string, number | null>, { seq_scan: 3, n_tup_newpage_upd: 2 })).toEqual({
      seq_scan: 3,
      n_tup_newpage_upd: 2,
    })
  })

  test('null before (a table without indexes gaining one) counts whole; null now is null', () => {
    expect(deltaOf({ idx_scan: null, seq_scan: 1 }, { idx_scan: 4, seq_scan: 1 })).toEqual({ idx_scan: 4, seq_scan: 0 })
    expect(deltaOf({ idx_scan: 4, seq_scan: 1 }, { idx_scan: null, seq_scan: 2 })).toEqual({
      idx_scan: null,
      seq_scan: 1,
    })
  })

  test('the first sample has no deltas', () => {
    expect(deltaOf(undefined, { seq_scan: 5 })).toBeNull()
  })
})

describe('deltaSince (a view row with a reset time)', () => {
  test('a moved reset time counts every counter whole; a saved sample without a counter gives it null', () => {
    const values = { reads: 7, writes: 3 }
    expect(deltaSince({ resetAt: 'r1', values: { reads: 5, writes: 1 } }, { resetAt: 'r2', values })).toEqual({
      reads: 7,
      writes: 3,
    })
    expect(deltaSince({ resetAt: 'r1', values: { reads: 5 } as typeof values }, { resetAt: 'r1', values })).toEqual({
      reads: 2,
      writes: null,
    })
    expect(deltaSince({ resetAt: 'r1', values: zerosOf(values) }, { resetAt: 'r1', values })).toEqual({
      reads: 7,
      writes: 3,
    })
  })
})
