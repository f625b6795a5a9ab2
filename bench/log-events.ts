// Cost of the log_events collector's reading (issue 25, deliverable 8): how many MB of PostgreSQL log a
// second one core parses and classifies (stderr with the prefix '%m [%p] %q%u@%d ', the real lines of
// test/fixtures/pg-logs/pg17.log repeated), and how much RSS reading a 500 MB log file adds when the
// collector's reader takes it in its bounded per-cycle budget (16 MB, slices of 4 MB) with the tally and
// the entries of each cycle. Goals: ≥ 50 MB/s; ≤ 20 MB of RSS added. Options: --mb N (file size, 500).
import { mkdtempSync, openSync, readFileSync, rmSync, writeSync, closeSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { LogTally } from '../src/agent/collectors/postgres/log-events.ts'
import { parseChunk } from '../src/agent/logs/parse.ts'
import { buildPrefixParser } from '../src/agent/logs/prefix.ts'
import { type LogPosition, readLogs } from '../src/agent/logs/reader.ts'
import { fileSource } from '../src/agent/logs/source.ts'

const mbArg = process.argv.indexOf('--mb')
const fileMb = mbArg > 0 ? Number(process.argv[mbArg + 1]) : 500
const sample = readFileSync(join(import.meta.dir, '..', 'test', 'fixtures', 'pg-logs', 'pg17.log'))
const prefix = buildPrefixParser('%m [%p] %q%u@%d ')

// A block of about 1 MB of whole entries (the sample ends with a newline).
const block = Buffer.concat(Array.from({ length: Math.ceil((1024 * 1024) / sample.length) }, () => sample))

// 1. Throughput: parse and classify 128 MB held in memory, slice by slice as the reader hands them over.
const slices = 32
const slice = Buffer.concat(Array.from({ length: 4 }, () => block))
let entries = 0
const t0 = performance.now()
const cpu0 = process.cpuUsage()
for (let i = 0; i < slices; i++) {
  const tally = new LogTally(Date.now(), true)
  const parsed = parseChunk(slice, { format: 'stderr', prefix, tzOffsetMs: 0, settled: true, closed: true })
  for (const e of parsed.entries) tally.add(e)
  tally.events('redacted')
  entries += tally.total
}
const seconds = (performance.now() - t0) / 1000
const cpu = process.cpuUsage(cpu0)
const mb = (slices * slice.length) / 1024 / 1024
const mbPerSecond = mb / seconds

// 2. RSS: a file of --mb MB read to its end in per-cycle budgets.
const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-logs-'))
const name = 'postgresql-bench.log'
const fd = openSync(join(dir, name), 'w')
for (let i = 0; i < fileMb; i++) writeSync(fd, block)
closeSync(fd)
Bun.gc(true)
const before = process.memoryUsage().rss
let peak = before
let cycles = 0
let read = 0
let counted = 0
const source = fileSource(dir)
let position: LogPosition = { files: { [name]: [0, 0] } }
for (;;) {
  const tally = new LogTally(Date.now(), true)
  const result = await readLogs(source, position, { format: 'stderr', prefix, tzOffsetMs: 0, now: Date.now() + 10_000 }, (e) => {
    tally.add(e)
  })
  tally.events('redacted')
  counted += tally.total
  position = result.position
  read += result.bytesRead
  cycles++
  peak = Math.max(peak, process.memoryUsage().rss)
  // The agent waits a poll interval between cycles; a collection here stands for the one that happens then.
  Bun.gc(false)
  if (result.backlogBytes === 0 || result.bytesRead === 0) break
}
rmSync(dir, { recursive: true, force: true })
const addedMb = (peak - before) / 1024 / 1024

console.log(`## log_events (${new Date().toISOString().slice(0, 10)}, ${cpus()[0]?.model ?? 'cpu'} × ${cpus().length}, bun ${Bun.version})`)
console.log('')
console.log('| measure | value | goal |')
console.log('|---|---|---|')
console.log(`| parse + classify, one core | ${mbPerSecond.toFixed(1)} MB/s (${mb} MB, ${entries.toLocaleString('en')} entries, ${seconds.toFixed(2)} s wall, ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s CPU) | ≥ 50 MB/s |`)
console.log(`| RSS added reading a ${fileMb} MB log | ${addedMb.toFixed(1)} MB (${(before / 1024 / 1024).toFixed(0)} → ${(peak / 1024 / 1024).toFixed(0)} MB; ${cycles} cycles, ${(read / 1024 / 1024).toFixed(0)} MB read, ${counted.toLocaleString('en')} entries) | ≤ 20 MB |`)
