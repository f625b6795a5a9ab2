// Cost of the log_events collector's reading (issue 25, deliverable 8), on PostgreSQL 17's real stderr
// lines (test/fixtures/pg-logs/pg17.log, prefix '%m [%p] %q%u@%d ') repeated into log files:
// 1. RSS: a --mb MB (500) log read to its end as the collector reads it, cycle after cycle with no pause
//    (its per-cycle budget of 16 MB in slices, a LogTally per cycle, the entries to send made at the end of
//    each). Reported: the peak RSS over the read (sampled every 4,096 entries and after each cycle) and the
//    RSS after a full collection at the end (what stays), against the RSS of the process after it read a
//    1 MB log (warm: the code compiled), and the peak against the process before any log (cold). Goal:
//    ≤ 20 MB added.
// 2. Speed: --speed-mb MB (128) read the same way, in CPU seconds of the one thread that does it; the time of
//    each stage (read + parse, classify + count, the entries to send) is measured apart on one 16 MB cycle
//    held in memory. Goal: ≥ 50 MB/s on one core.
// Options: --mb N, --speed-mb N.
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { LogTally } from '../src/agent/collectors/postgres/log-events.ts'
import type { RawLogEntry } from '../src/agent/logs/entry.ts'
import { parseChunk } from '../src/agent/logs/parse.ts'
import { buildPrefixParser } from '../src/agent/logs/prefix.ts'
import { DEFAULT_BUDGET_BYTES, type LogPosition, readLogs, SLICE_BYTES } from '../src/agent/logs/reader.ts'
import { fileSource } from '../src/agent/logs/source.ts'

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const fileMb = arg('--mb', 500)
const speedMb = arg('--speed-mb', 128)
const sample = readFileSync(join(import.meta.dir, '..', 'test', 'fixtures', 'pg-logs', 'pg17.log'))
const prefix = buildPrefixParser('%m [%p] %q%u@%d ')
// A block of about 1 MB of whole entries (the sample ends with a newline).
const block = Buffer.concat(Array.from({ length: Math.ceil((1024 * 1024) / sample.length) }, () => sample))
const MB = 1024 * 1024
const cpuSeconds = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}
const rss = () => process.memoryUsage().rss

function writeLog(dir: string, name: string, mb: number): void {
  const fd = openSync(join(dir, name), 'w')
  for (let i = 0; i < mb; i++) writeSync(fd, block)
  closeSync(fd)
}

interface ReadAll {
  cycles: number
  bytes: number
  entries: number
  peak: number
}

/** Reads the file to its end in the collector's cycles; `sample` is called every 4,096 entries. */
async function readAll(dir: string, name: string, sampleEvery?: () => void): Promise<ReadAll> {
  const source = fileSource(dir)
  let position: LogPosition = { files: { [name]: [0, 0] } }
  const out: ReadAll = { cycles: 0, bytes: 0, entries: 0, peak: 0 }
  for (;;) {
    const tally = new LogTally(Date.now(), true)
    const result = await readLogs(
      source,
      position,
      { format: 'stderr', prefix, tzOffsetMs: 0, now: Date.now() + 10_000 },
      (e) => {
        const ok = tally.add(e)
        if (sampleEvery && (tally.total & 4095) === 0) sampleEvery()
        return ok
      },
    )
    tally.events('redacted')
    tally.countRows()
    out.entries += tally.total
    position = result.position
    out.bytes += result.bytesRead
    out.cycles++
    sampleEvery?.()
    if (result.backlogBytes === 0 || result.bytesRead === 0) break
  }
  return out
}

const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-logs-'))
try {
  // 1. RSS, first, in a process that has done nothing else yet. Cold: against the RSS before any log was
  // read. Warm: against the RSS after reading a 1 MB log (the code compiled and optimised, as in an agent
  // that has run a few cycles): what the backlog itself adds.
  writeLog(dir, 'postgresql-warm.log', 1)
  writeLog(dir, 'postgresql-rss.log', fileMb)
  Bun.gc(true)
  const cold = rss()
  await readAll(dir, 'postgresql-warm.log')
  Bun.gc(true)
  const warm = rss()
  let peak = warm
  const big = await readAll(dir, 'postgresql-rss.log', () => {
    peak = Math.max(peak, rss())
  })
  Bun.gc(true)
  const after = rss()
  rmSync(join(dir, 'postgresql-rss.log'))

  // 2. Speed: the whole read, then each stage of one cycle's worth apart.
  writeLog(dir, 'postgresql-speed.log', speedMb)
  await readAll(dir, 'postgresql-speed.log') // warm-up: the page cache and the compiled code
  const c0 = cpuSeconds()
  const w0 = performance.now()
  const speed = await readAll(dir, 'postgresql-speed.log')
  const cpu = cpuSeconds() - c0
  const wall = (performance.now() - w0) / 1000
  const speedMbRead = speed.bytes / MB

  const cycleBuf = Buffer.concat(Array.from({ length: DEFAULT_BUDGET_BYTES / MB }, () => block))
  const rounds = 5
  let parseS = 0
  let countS = 0
  let eventsS = 0
  for (let r = 0; r < rounds; r++) {
    let t = cpuSeconds()
    const entries: RawLogEntry[] = []
    for (let off = 0; off < cycleBuf.length; off += SLICE_BYTES) {
      const slice = cycleBuf.subarray(off, Math.min(cycleBuf.length, off + SLICE_BYTES))
      const parsed = parseChunk(slice, { format: 'stderr', prefix, tzOffsetMs: 0, settled: true, closed: true })
      for (const e of parsed.entries) entries.push(e)
    }
    parseS += cpuSeconds() - t
    t = cpuSeconds()
    const tally = new LogTally(Date.now(), true)
    for (const e of entries) tally.add(e)
    countS += cpuSeconds() - t
    t = cpuSeconds()
    tally.events('redacted')
    eventsS += cpuSeconds() - t
  }
  const cycleMb = (rounds * cycleBuf.length) / MB
  const msPerMb = (s: number) => ((s * 1000) / cycleMb).toFixed(2)

  const f = (n: number) => n.toLocaleString('en')
  const mib = (n: number) => (n / MB).toFixed(1)
  console.log(
    `## log_events (${new Date().toISOString().slice(0, 10)}, ${cpus()[0]?.model ?? 'cpu'} × ${cpus().length}, bun ${Bun.version})`,
  )
  console.log('')
  console.log('| measure | value | goal |')
  console.log('|---|---|---|')
  console.log(
    `| read + parse + classify + count + entries to send, one core | **${(speedMbRead / cpu).toFixed(1)} MB/s of CPU** (${speedMbRead.toFixed(0)} MB, ${f(speed.entries)} entries, ${speed.cycles} cycles, ${cpu.toFixed(2)} s CPU, ${wall.toFixed(2)} s wall) | ≥ 50 MB/s |`,
  )
  console.log(
    `| the stages of one 16 MB cycle (CPU ms per MB, mean of ${rounds}) | parse ${msPerMb(parseS)}, classify + count ${msPerMb(countS)}, entries to send ${msPerMb(eventsS)} | |`,
  )
  console.log(
    `| RSS added reading a ${fileMb} MB log, peak over a warm process | **${mib(peak - warm)} MB** (${mib(warm)} → ${mib(peak)} MB; ${big.cycles} cycles, ${mib(big.bytes)} MB read, ${f(big.entries)} entries) | ≤ 20 MB |`,
  )
  console.log(`| the same, after a full collection at the end | ${mib(after - warm)} MB (${mib(after)} MB) | |`)
  console.log(
    `| peak over the process before it read any log (compiling the reader included) | ${mib(peak - cold)} MB (${mib(cold)} → ${mib(peak)} MB; a 1 MB log read first took it to ${mib(warm)} MB) | |`,
  )
} finally {
  rmSync(dir, { recursive: true, force: true })
}
