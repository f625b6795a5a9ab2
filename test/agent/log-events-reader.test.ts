// The log reader's bounds, without a database: files read in slices to their exact end, an entry longer
// than a slice read whole, the per-batch cap of count rows stopping a cycle's read right before the entry
// that would pass it (the rest read next cycle, nothing lost or doubled), and the fast timestamp reader against
// the regular expression.
import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LogTally } from '../../src/agent/collectors/postgres/log-events.ts'
import { parseLogTime, parseLogTimeByRegex, type RawLogEntry } from '../../src/agent/logs/entry.ts'
import { buildPrefixParser } from '../../src/agent/logs/prefix.ts'
import { type LogPosition, readLogs } from '../../src/agent/logs/reader.ts'
import { fileSource } from '../../src/agent/logs/source.ts'

const dir = mkdtempSync(join(tmpdir(), 'dbm-log-reader-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const prefix = buildPrefixParser('%m [%p] %q%u@%d ')
const T0 = Date.UTC(2026, 11, 7, 0, 0, 0)
const stamp = (ms: number) => `${new Date(ms).toISOString().replace('T', ' ').replace('Z', '')} UTC`
const options = (extra: { budgetBytes?: number; sliceBytes?: number } = {}) => ({
  format: 'stderr' as const,
  prefix,
  tzOffsetMs: 0,
  now: Date.now() + 60_000,
  ...extra,
})

/** `n` entries, one a minute from T0, each with a DETAIL line; entry i says `entry-i`. */
function writeLog(name: string, n: number, pad = ''): number {
  let text = ''
  for (let i = 0; i < n; i++) {
    text += `${stamp(T0 + i * 60_000)} [${100 + (i % 7)}] app@shop ERROR:  entry-${i}${pad}\n`
    text += `${stamp(T0 + i * 60_000)} [${100 + (i % 7)}] app@shop DETAIL:  detail of ${i}\n`
  }
  writeFileSync(join(dir, name), text)
  return Buffer.byteLength(text)
}

test('slices that do not divide the file: every entry once, the position at the exact end', async () => {
  const size = writeLog('slices.log', 500)
  const seen: string[] = []
  const result = await readLogs(
    fileSource(dir),
    { files: { 'slices.log': [0, 0] } },
    options({ sliceBytes: 1000 }),
    (e) => {
      seen.push(e.message)
    },
  )
  expect(seen).toEqual(Array.from({ length: 500 }, (_, i) => `entry-${i}`))
  expect(result.position.files['slices.log']![0]).toBe(size)
  expect(result.backlogBytes).toBe(0)
  rmSync(join(dir, 'slices.log'))
})

test('an entry longer than a slice is read whole in a longer slice', async () => {
  const size = writeLog('long.log', 3, 'x'.repeat(5_000))
  const seen: RawLogEntry[] = []
  const result = await readLogs(
    fileSource(dir),
    { files: { 'long.log': [0, 0] } },
    options({ sliceBytes: 1024 }),
    (e) => {
      seen.push(e)
    },
  )
  expect(seen.map((e) => [e.message.length, e.detail])).toEqual(
    [0, 1, 2].map((i) => [`entry-${i}`.length + 5_000, `detail of ${i}`]),
  )
  expect(result.position.files['long.log']![0]).toBe(size)
  rmSync(join(dir, 'long.log'))
})

test('count rows at the batch cap (10,000): the read stops before the entry past it; the next cycle goes on', async () => {
  // 10,500 minutes of one error each: 10,500 count rows, more than one batch may carry.
  const size = writeLog('minutes.log', 10_500)
  let position: LogPosition = { files: { 'minutes.log': [0, 0] } }
  const cycles: { rows: number; total: number; entries: number; refused: boolean; backlog: number }[] = []
  const messages: string[] = []
  for (let i = 0; i < 3 && (cycles.length === 0 || cycles.at(-1)!.backlog > 0); i++) {
    const tally = new LogTally(Date.now(), true)
    const result = await readLogs(fileSource(dir), position, options(), (e) => tally.add(e))
    const { entries } = tally.events('full')
    messages.push(...entries.map((e) => e.message))
    const rows = tally.countRows()
    cycles.push({
      rows: rows.length,
      total: rows.reduce((n, r) => n + r.count, 0),
      entries: entries.length,
      refused: tally.refused,
      backlog: result.backlogBytes,
    })
    position = result.position
  }
  expect(cycles).toEqual([
    { rows: 10_000, total: 10_000, entries: 1_000, refused: true, backlog: expect.any(Number) },
    { rows: 500, total: 500, entries: 500, refused: false, backlog: 0 },
  ])
  expect(position.files['minutes.log']![0]).toBe(size)
  // The first cycle kept its first 1,000 errors whole; the second, all of its 500: none twice.
  expect(messages.slice(0, 1_000)).toEqual(Array.from({ length: 1_000 }, (_, i) => `entry-${i}`))
  expect(messages.slice(1_000)).toEqual(Array.from({ length: 500 }, (_, i) => `entry-${10_000 + i}`))
  rmSync(join(dir, 'minutes.log'))
})

test('a refused entry leaves the classifier memory as it was (the checkpoint reason is read again next cycle)', async () => {
  const text = [
    `${stamp(T0)} [7] LOG:  checkpoint starting: time`,
    `${stamp(T0 + 60_000)} [7] LOG:  checkpoint complete: wrote 3 buffers (0.0%); 0 WAL file(s) added, 0 removed, 0 recycled; write=0.1 s, sync=0.1 s, total=0.2 s; sync files=1, longest=0.0 s, average=0.0 s; distance=1 kB, estimate=1 kB`,
    '',
  ].join('\n')
  writeFileSync(join(dir, 'reason.log'), text)
  const first = new LogTally(Date.now(), true, undefined, 1_000, 1)
  const r1 = await readLogs(fileSource(dir), { files: { 'reason.log': [0, 0] } }, options(), (e) => first.add(e))
  expect(first.refused).toBe(true)
  expect(first.memory.checkpointReason).toBe('time')
  const second = new LogTally(Date.now(), true, first.memory.checkpointReason, 1_000, 1)
  await readLogs(fileSource(dir), r1.position, options(), (e) => second.add(e))
  expect(second.events('full').entries.map((e) => [e.kind, e.fields.reason])).toEqual([['checkpoint', 'time']])
  rmSync(join(dir, 'reason.log'))
})

test('timestamps: the digit-by-digit reader agrees with the regular expression', () => {
  const cases = [
    '2026-12-07 03:58:46.566 UTC',
    '2026-12-07 03:58:46 UTC',
    '2026-12-07 03:58:46.5 GMT',
    '2026-12-07 03:58:46.123456 +03',
    '2026-12-07 03:58:46 -0530',
    '2026-12-07 03:58:46.999 CEST',
    '2026-12-07 03:58:46',
    '2026-02-30 25:61:61.1 UTC',
    '2026-12-07 03:58:46.1234567 UTC',
    '2026-12-07 03:58:46. UTC',
    '2026-12-07 03:58:46.5  UTC',
    '2026-12-07 03:58:46 ',
    '2026-12-07T03:58:46 UTC',
    '2026-1-07 03:58:46 UTC',
    'x',
    '',
    '2026-12-07 03:58:46 U\u00e9C',
  ]
  for (const text of cases)
    for (const offset of [0, 3_600_000])
      expect([text, parseLogTime(text, offset)]).toEqual([text, parseLogTimeByRegex(text, offset)])
  expect(parseLogTime('2026-12-07 03:58:46.566 UTC', 0)).toBe(Date.UTC(2026, 11, 7, 3, 58, 46, 566))
})
