// The collectors' state across runs and restarts: a run's writes reach the runner's state only on
// commit, cache entries are kept at once and never saved, and a saved file comes back as it was
// (maps included) or is refused when it is from another format or does not parse.
import { afterAll, describe, expect, test } from 'bun:test'
import { chmodSync, chownSync, copyFileSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entryDelta, startedAnew } from '../../src/agent/collectors/postgres/query-stats.ts'
import { STATE_FORMAT, StagedState, loadState, saveState, stateFileName } from '../../src/agent/state.ts'

const dir = mkdtempSync(join(tmpdir(), 'dbm-state-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('StagedState', () => {
  test('writes are seen by the run at once and by the runner only after commit', () => {
    const committed = new Map<string, unknown>([
      ['tables', 'old'],
      ['gone', 1],
    ])
    const staged = new StagedState(committed)
    staged.set('tables', 'new')
    staged.delete('gone')
    expect(staged.get('tables')).toBe('new')
    expect(staged.has('gone')).toBe(false)
    expect(committed.get('tables')).toBe('old')
    expect(committed.has('gone')).toBe(true)
    expect(staged.changed).toBe(true)
    staged.commit()
    expect(committed.get('tables')).toBe('new')
    expect(committed.has('gone')).toBe(false)
  })

  test('a run that is never committed (late or failed) leaves the state as it was', () => {
    const committed = new Map<string, unknown>([['query_stats', { n: 1 }]])
    const staged = new StagedState(committed)
    staged.set('query_stats', { n: 2 })
    expect(committed.get('query_stats')).toEqual({ n: 1 })
  })

  test('cache entries (texts that can be fetched again) are kept at once', () => {
    const committed = new Map<string, unknown>()
    const staged = new StagedState(committed)
    staged.set('cache:texts', new Map([['1', 'SELECT 1']]))
    expect(committed.has('cache:texts')).toBe(true)
    expect(staged.changed).toBe(false)
  })
})

describe('saved state', () => {
  const owner = { target: 'postgres://monitor@db:5432/orders', lineage: '7301234567890123456' }

  test('round trip: maps, numbers, nulls and strings come back as they were; cache entries are not saved', () => {
    const path = join(dir, stateFileName('orders'))
    const state = new Map<string, unknown>([
      [
        'query_stats',
        { entries: new Map([['10/5/-42/t', [null, 3, 1.5]]]), statsReset: '2026-11-26 00:00:00+00', dealloc: 0 },
      ],
      ['tables', new Map([[16384, { seq_scan: 4, idx_scan: null }]])],
      ['cache:query_stats:texts', new Map([['-42', 'SELECT secret']])],
    ])
    saveState(path, owner, state, 1_700_000_000_000)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    const loaded = loadState(path)
    expect(loaded.kind).toBe('loaded')
    if (loaded.kind !== 'loaded') return
    expect(loaded.owner).toEqual(owner)
    expect(loaded.savedAt).toBe(1_700_000_000_000)
    expect(loaded.entries.has('cache:query_stats:texts')).toBe(false)
    const stats = loaded.entries.get('query_stats') as { entries: Map<string, unknown[]> }
    expect(stats.entries).toBeInstanceOf(Map)
    expect(stats.entries.get('10/5/-42/t')).toEqual([null, 3, 1.5])
    expect((loaded.entries.get('tables') as Map<number, unknown>).get(16384)).toEqual({ seq_scan: 4, idx_scan: null })
  })

  test('the file name keeps any database name inside the buffer directory', () => {
    expect(stateFileName('../../etc/passwd')).toBe('service_state_.._.._etc_passwd.json')
    expect(stateFileName('a/b\nc')).toBe('service_state_a_b_c.json')
  })

  test('no file, a file of another format and a file that does not parse', () => {
    expect(loadState(join(dir, 'none.json')).kind).toBe('none')
    const other = join(dir, 'other.json')
    writeFileSync(other, JSON.stringify({ format: STATE_FORMAT + 1, target: 'x', lineage: null, entries: [] }))
    expect(loadState(other)).toMatchObject({ kind: 'unusable' })
    const broken = join(dir, 'broken.json')
    writeFileSync(broken, '{"format": 2, "entr')
    expect(loadState(broken).kind).toBe('unusable')
  })

  test("a planted file is refused: a symbolic link, another user's file, one others may write", () => {
    const real = join(dir, 'real.json')
    saveState(real, owner, new Map([['tables', new Map([[1, { seq_scan: 1 }]])]]), Date.now())
    const link = join(dir, 'link.json')
    symlinkSync(real, link)
    expect(loadState(link)).toEqual({ kind: 'unusable', reason: 'it is a symbolic link' })
    const foreign = join(dir, 'foreign.json')
    copyFileSync(real, foreign)
    chownSync(foreign, 4242, 4242)
    expect(loadState(foreign)).toEqual({ kind: 'unusable', reason: 'it belongs to another user (uid 4242)' })
    const open = join(dir, 'open.json')
    copyFileSync(real, open)
    chmodSync(open, 0o622)
    expect(loadState(open)).toEqual({ kind: 'unusable', reason: 'other users may write to it' })
  })

  test('numbers no counter can have (negative, endless) make the whole file unusable', () => {
    const crafted = (value: string) => {
      const path = join(dir, `crafted-${Math.random().toString(36).slice(2)}.json`)
      writeFileSync(
        path,
        `{"format":${STATE_FORMAT},"saved_at":1,"target":"t","lineage":"l","entries":[["query_stats",{"entries":{"$map":[["k",[null,${value},0,0,0,0,0,0,0,0,0,0]]]},"statsReset":null,"dealloc":null}]]}`,
        { mode: 0o600 },
      )
      return loadState(path)
    }
    expect(crafted('5').kind).toBe('loaded')
    expect(crafted('-1e15')).toEqual({ kind: 'unusable', reason: 'it holds numbers no counter can have' })
    expect(crafted('1e400')).toEqual({ kind: 'unusable', reason: 'it holds numbers no counter can have' })
  })

  test('a save that cannot write throws (the runner logs it once) and leaves no temporary file', () => {
    const blocked = join(dir, 'blocked')
    writeFileSync(blocked, 'a file where a folder should be')
    expect(() => saveState(join(blocked, 'state.json'), owner, new Map(), 0)).toThrow()
  })
})

describe('statement entry deltas', () => {
  // [stats_since, calls, total_time_ms, rows, ...]: the order of POSTGRES_QUERY_COUNTER_KEYS.
  const saved = (since: number | null, calls: number, time: number, rows: number) =>
    [since, calls, time, rows, 0, 0, 0, 0, 0, 0, 0, 0] as [number | null, ...number[]]

  test('counters of one entry are judged together: one that went down restarts them all', () => {
    expect(startedAnew(saved(null, 50, 10, 50), saved(null, 80, 9, 80))).toBe(true)
    expect(entryDelta(saved(null, 50, 10, 50), saved(null, 80, 9, 80), false)).toMatchObject({
      calls: 80,
      total_time_ms: 9,
      rows: 80,
    })
    expect(entryDelta(saved(null, 50, 10, 50), saved(null, 80, 16, 80), false)).toMatchObject({
      calls: 30,
      total_time_ms: 6,
      rows: 30,
    })
  })

  test('a moved stats_since (17+) or a full reset counts the entry from zero', () => {
    expect(entryDelta(saved(1000, 5, 1, 5), saved(2000, 9, 2, 9), false)).toMatchObject({ calls: 9, rows: 9 })
    expect(entryDelta(saved(1000, 5, 1, 5), saved(1000, 9, 2, 9), true)).toMatchObject({ calls: 9, rows: 9 })
    expect(entryDelta(undefined, saved(1000, 9, 2, 9), false)).toMatchObject({ calls: 9 })
    expect(entryDelta(saved(1000, 5, 1, 5), saved(1000, 9, 2, 9), false)).toMatchObject({ calls: 4, rows: 4 })
  })
})
