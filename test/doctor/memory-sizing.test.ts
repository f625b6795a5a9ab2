// The cache-hit finding's memory advice sized to the host (memory-sizing.ts) and the order of the causes
// it names (cache-hit-ratio.ts's readCauses): pure functions, no database.
import { describe, expect, test } from 'bun:test'
import { readCauses } from '../../src/server/doctor/rules/postgres/cache-hit-ratio.ts'
import { memoryAdvice, roundedSetting } from '../../src/server/doctor/rules/postgres/memory-sizing.ts'
import type { FindingDraft } from '../../src/server/doctor/types.ts'

const GB = 1024 ** 3
const MB = 1024 ** 2

describe('memory advice', () => {
  test('sizes rounded down: MB below 8 GB, GB from there, never under 128MB', () => {
    expect(roundedSetting(3.9 * GB)).toBe('3993MB')
    expect(roundedSetting(12 * GB)).toBe('12GB')
    expect(roundedSetting(47.9 * GB)).toBe('47GB')
    expect(roundedSetting(100 * MB)).toBe('128MB')
    expect(roundedSetting(2 * GB)).toBe('2GB')
  })

  test('a 16 GB host: a quarter for shared_buffers, three quarters for effective_cache_size, the current values named', () => {
    const advice = memoryAdvice(16 * GB, { shared_buffers: '128MB', effective_cache_size: '4GB' })
    expect(advice).toMatchObject({ total_bytes: 16 * GB, shared_buffers: '4GB', effective_cache_size: '12GB' })
    expect(advice.commands).toEqual([
      "ALTER SYSTEM SET shared_buffers = '4GB';   -- 25 % of the host's 16.0 GB, now 128MB; takes effect after a restart",
      "ALTER SYSTEM SET effective_cache_size = '12GB';   -- 75 % of the host's 16.0 GB, now 4GB; SELECT pg_reload_conf() applies it",
    ])
    expect(advice.text).toBe(
      "Sized to the host's 16.0 GB of memory: shared_buffers 4GB (25 % of the host's 16.0 GB; now 128MB), and effective_cache_size 12GB (75 %; now 4GB).",
    )
  })

  test('a 64 GB host whose settings are already there: no command, and the text says memory is not the fix', () => {
    const advice = memoryAdvice(64 * GB, { shared_buffers: '16GB', effective_cache_size: '48GB' })
    expect(advice.commands).toEqual([])
    expect(advice.text).toContain('more memory for PostgreSQL is not the fix')
    // Only the one below its size is advised; shared_buffers in 8 kB pages as a bare number counts too.
    expect(memoryAdvice(64 * GB, { shared_buffers: '2097152', effective_cache_size: '4GB' }).commands).toEqual([
      "ALTER SYSTEM SET effective_cache_size = '48GB';   -- 75 % of the host's 64.0 GB, now 4GB; SELECT pg_reload_conf() applies it",
    ])
  })

  test('memory unknown: placeholders, the word guess, and no constant size', () => {
    for (const total of [null, undefined, 0]) {
      const advice = memoryAdvice(total, { shared_buffers: '128MB' })
      expect(advice.total_bytes).toBeNull()
      expect(advice.text).toContain('would be a guess')
      expect(advice.text).toContain('(now 128MB)')
      expect(advice.commands).toHaveLength(2)
      for (const command of advice.commands) {
        expect(command).toContain('a guess')
        expect(command).not.toMatch(/= '\d+[MG]B'/)
      }
    }
  })
})

describe('the causes of block reads', () => {
  const scan = (object: string, fullReads: number, heap: number): FindingDraft => ({
    severity: 'warning',
    object,
    title: '',
    detail: '',
    recommendation: '',
    how_to_investigate: [],
    how_to_fix: [`CREATE INDEX CONCURRENTLY ON ${object} (x);`],
    metrics: { full_reads: fullReads, heap_bytes: heap, table_size_bytes: heap * 2 },
  })
  const bloat = (object: string, bloatBytes: number, kind = 'table'): FindingDraft => ({
    severity: 'warning',
    object,
    title: '',
    detail: '',
    recommendation: '',
    how_to_investigate: [],
    how_to_fix: [`VACUUM (FULL, ANALYZE) ${object};`],
    metrics: { bloat_bytes: bloatBytes, kind },
  })

  test('the most bytes read by sequential scans first; a bloated table joins its scans; bloated indexes and unnamed findings are left out', () => {
    const causes = readCauses(
      [scan('public.small', 1_000, MB), scan('public.big', 200, 100 * MB), { ...scan('x', 1, 1), object: undefined }],
      [bloat('public.big', 60 * MB), bloat('public.only_bloated', GB), bloat('public.big_pkey', GB, 'index')],
    )
    expect(causes.map((c) => [c.object, c.scanned_bytes, c.bloat_bytes])).toEqual([
      ['public.big', 200 * 100 * MB, 60 * MB],
      ['public.small', 1_000 * MB, 0],
      ['public.only_bloated', 0, GB],
    ])
    expect(causes[0]!.scan?.how_to_fix).toEqual(['CREATE INDEX CONCURRENTLY ON public.big (x);'])
    expect(causes[0]!.bloat?.how_to_fix).toEqual(['VACUUM (FULL, ANALYZE) public.big;'])
  })
})
