// The auto_explain reader on PostgreSQL 17's own log output (test/fixtures/pg-logs/auto-explain17.*,
// captured by capture-auto-explain.ts): the plans found, where each read stops, a plan cut anywhere,
// a backlog past one cycle's read and past the read buffer, rotation and truncation, a restart from the
// saved state, and what a LOGIN user can put in the log (plan-like RAISE LOG texts, invalid UTF-8).
import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { appendFileSync, mkdtempSync, readFileSync, rmSync, truncateSync, utimesSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SLICE, readAutoExplainPlans } from '../../src/agent/collectors/postgres/auto-explain-log.ts'
import { loadState, saveState } from '../../src/agent/state.ts'
import { createLogger } from '../../src/shared/log.ts'
import type { ExplainPlan } from '../../src/shared/wire.ts'

const fixture = (ext: string) => readFileSync(join(import.meta.dir, '../fixtures/pg-logs', `auto-explain17.${ext}`))
const stderr = fixture('log')
/** Where the first forged line (an unclosed `{` after `plan:`, raised by a LOGIN user) starts its marker. */
const forgedAt = stderr.indexOf('duration: 1.000 ms')
/** The four real plans before the forged lines. */
const genuine = stderr.subarray(0, stderr.lastIndexOf('\n', forgedAt) + 1)
const texts = (plans: ExplainPlan[]) =>
  plans.map((p) => String((p.plan_json as { 'Query Text': string })['Query Text']).slice(0, 40))
const GENUINE_TEXTS = [
  'SELECT count(*) FROM accounts WHERE owne',
  'SELECT * FROM accounts WHERE id = 42',
  'SELECT \'café ☕ plan: {"x": 1}\' AS t, id ',
  'SELECT id FROM accounts WHERE owner IN (',
]

let dir: string
let mtime = 1_000_000
const log = createLogger('error', () => {})
const read = (offsets: Map<string, number>) => readAutoExplainPlans(dir, offsets, 1, log)
/** Appends to a file and moves its modification time forward (the reader takes the newest three). */
const append = (name: string, bytes: Buffer | string) => {
  appendFileSync(join(dir, name), bytes)
  utimesSync(join(dir, name), mtime, mtime++)
}
/** Offsets after the first scan of a directory holding an empty `a.log`. */
const started = async (): Promise<Map<string, number>> => {
  append('a.log', '')
  const offsets = new Map<string, number>()
  expect(await read(offsets)).toEqual([])
  return offsets
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dbm-auto-explain-'))
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

describe('auto_explain reader', () => {
  test('stderr: the plans written since the last read, with their query ids; the offset at the end', async () => {
    const offsets = await started()
    append('a.log', genuine)
    const plans = await read(offsets)
    expect(texts(plans)).toEqual(GENUINE_TEXTS)
    expect(plans.every((p) => /^-?\d+$/.test(p.query_hash) && p.source === 'auto_explain')).toBe(true)
    expect(plans[3]!.actual_time_ms).toBe(3.353)
    expect(offsets.get(join(dir, 'a.log'))).toBe(genuine.length)
    expect(await read(offsets)).toEqual([])
  })

  test('a plan cut anywhere is read whole on the next cycle, once', async () => {
    for (let cut = 1; cut < genuine.length; cut += 211) {
      rmSync(join(dir, 'a.log'), { force: true })
      const offsets = await started()
      append('a.log', genuine.subarray(0, cut))
      const first = await read(offsets)
      append('a.log', genuine.subarray(cut))
      const second = await read(offsets)
      expect(texts([...first, ...second])).toEqual(GENUINE_TEXTS)
    }
  })

  test('a RAISE LOG text with an unclosed brace after "plan:" stops the read at its marker, as before', async () => {
    const offsets = await started()
    append('a.log', stderr)
    expect(texts(await read(offsets))).toEqual(GENUINE_TEXTS)
    expect(offsets.get(join(dir, 'a.log'))).toBe(forgedAt)
    expect(await read(offsets)).toEqual([])
    expect(offsets.get(join(dir, 'a.log'))).toBe(forgedAt)
  })

  test('csvlog and jsonlog yield no plan today (doubled quotes; fields after the message)', async () => {
    const offsets = await started()
    append('b.csv', fixture('csv'))
    append('c.json', fixture('json'))
    expect(await read(offsets)).toEqual([])
    expect(offsets.get(join(dir, 'c.json'))).toBe(fixture('json').length)
  })

  test('invalid UTF-8 before the plans: they are found, and the offset is the file size (no read from the start again)', async () => {
    const offsets = await started()
    const bytes = Buffer.concat([
      Buffer.from([0xff, 0xfe, 0xe2, 0x28, 0xa1, 0x0a, 0xc3, 0x0a]),
      genuine,
      Buffer.from([0xe2, 0x82]),
    ])
    append('a.log', bytes)
    expect(texts(await read(offsets))).toEqual(GENUINE_TEXTS)
    expect(offsets.get(join(dir, 'a.log'))).toBe(bytes.length)
    expect(await read(offsets)).toEqual([])
  })

  test('whitespace as JavaScript has it between "ms", "plan:" and the plan, multi-byte included', async () => {
    const offsets = await started()
    append(
      'a.log',
      'LOG:  duration: 1.5 ms\u00a0plan:\u3000{"Plan": {"Node Type": "Result"}, "Query Text": "q"}\nLOG:  duration: 2 msplan: {"Plan": {}}\n',
    )
    const plans = await read(offsets)
    expect(plans.map((p) => p.actual_time_ms)).toEqual([1.5])
  })

  test('a backlog: 8 MB a cycle, a plan across that boundary next cycle, a plan longer than the read buffer', async () => {
    const offsets = await started()
    const line = '2026-12-07 07:12:20.541 UTC [1] x@y LOG:  duration: 0.5 ms  statement: SELECT 1\n'
    const filler = (bytes: number) => line.repeat(Math.ceil(bytes / line.length))
    const relations = Array.from(
      { length: Math.ceil((SLICE * 1.5) / 50) },
      (_, i) => `{"Node Type": "Seq Scan", "Relation Name": "t${i}"}`,
    )
    const big = `LOG:  duration: 12 ms  plan:\n{"Query Text": "big", "Plan": {"Node Type": "Append", "Plans": [${relations.join(', ')}]}}\n`
    // The cycle's 8 MB end 100 bytes past the fourth plan's marker, inside that plan.
    const marker = genuine.indexOf('duration: 3.353 ms')
    const head = filler(8 * 1024 * 1024 - marker - 100)
    append('a.log', head)
    append('a.log', genuine)
    append('a.log', filler(3 * SLICE))
    append('a.log', big)
    const first = await read(offsets)
    expect(texts(first)).toEqual(GENUINE_TEXTS.slice(0, 3))
    expect(offsets.get(join(dir, 'a.log'))).toBe(head.length + marker)
    const second = await read(offsets)
    expect(texts([...first, ...second])).toEqual([...GENUINE_TEXTS, 'big'])
    expect((second.at(-1)!.plan_json as { Plan: { Plans: unknown[] } }).Plan.Plans).toHaveLength(relations.length)
    expect(await read(offsets)).toEqual([])
  })

  test('rotation from the start, truncation from the start again, the newest three files only', async () => {
    append('old.log', genuine)
    const offsets = new Map<string, number>()
    expect(await read(offsets)).toEqual([]) // there at the first scan: read from its end
    append('new.log', genuine)
    expect(texts(await read(offsets))).toEqual(GENUINE_TEXTS)
    truncateSync(join(dir, 'new.log'), 0)
    append('new.log', genuine.subarray(0, genuine.indexOf('duration: 0.008 ms')))
    expect(texts(await read(offsets))).toEqual(GENUINE_TEXTS.slice(0, 1))
    for (const name of ['x.log', 'y.log', 'z.log']) append(name, genuine)
    append('new.log', genuine) // newer than x.log: x.log is not among the newest three
    const plans = await read(offsets)
    expect(plans).toHaveLength(4 * 3)
    expect(offsets.has(join(dir, 'x.log'))).toBe(false)
  })

  test('a restart goes on from the offsets in the saved state: nothing read twice or skipped', async () => {
    const offsets = await started()
    append('a.log', genuine.subarray(0, 5000))
    const before = await read(offsets)
    const path = join(dir, 'state', 'service_state_db.json')
    saveState(path, { target: 't', lineage: null }, new Map([['explain_plans', { logOffsets: offsets }]]), Date.now())
    const loaded = loadState(path)
    if (loaded.kind !== 'loaded') throw new Error(loaded.kind)
    const restored = (loaded.entries.get('explain_plans') as { logOffsets: Map<string, number> }).logOffsets
    expect(restored).toEqual(offsets)
    append('a.log', genuine.subarray(5000))
    expect(texts([...before, ...(await read(restored))])).toEqual(GENUINE_TEXTS)
  })
})

test('the fixture is what the tests say: four plans, then the forged lines', () => {
  expect(forgedAt).toBeGreaterThan(0)
  expect(genuine.toString('utf8').match(/duration: [\d.]+ ms {2}plan:/g)).toHaveLength(4)
})
