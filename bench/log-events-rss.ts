// What reading PostgreSQL's log adds to a process's memory the first time (issue 25, deliverable 8: the
// agent adds at most 20 MB of RSS while it classifies the log). Each measure runs in a fresh child process
// and reads its own /proc/self/status (VmRSS, RssAnon, RssFile; VmHWM reset through clear_refs) and
// JavaScriptCore's heap (bun:jsc heapStats):
// 1. bare: the stages of a process that imports the log modules and reads 1 MB of log, twice, each read
//    followed by a full collection, and again once the allocator has returned its free pages (a settle of
//    1 s: bmalloc's scavenger gives free pages back to the system on its own clock, not at the collection).
// 2. agent: the real Agent (every collector, pg_log_dir set) against PostgreSQL 17 and a dbm server, warmed
//    by cycles in which the log grows by nothing; then a --mb MB (500) backlog appears and is read in the
//    collector's cycles. Reported: the agent's own peak while it cycles with nothing to read, and the peak
//    while it reads the backlog (VmHWM reset before each), the RSS before and after (settled). The peak is
//    also given per phase of a cycle (VmHWM reset at each phase's end, the highest over every cycle, and
//    how far a phase rose above the RSS it started at): the other collectors (and the end-of-cycle
//    collection before them), log_events' read, its entries to send, the runner's batch JSON and state file,
//    the send. With --twice a second backlog as large follows once the agent settled: whether the cost
//    recurs or was paid once (compiled code).
//    explain_plans reads the same pg_log_dir for auto_explain plans (up to 8 MB a cycle): --without
//    explain_plans leaves it out (enabled_collectors: every other collector), so that the peak is the
//    log_events reader's alone.
// --smaps: the anonymous mappings whose RSS grew from the baseline to the read phase that ended highest, with
// the JS heap and mimalloc's counters there (where the memory is: which allocator, live or held).
// Options: --mb N (500), --only bare|agent, --twice, --without NAME (a collector left out; repeatable), --smaps.
import { heapStats } from 'bun:jsc'
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const MB = 1024 * 1024
const root = join(import.meta.dir, '..')
const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : undefined
}

interface Snap {
  label: string
  rss: number
  /** NaN (null once through JSON) on a phase's row, which has its peak alone. */
  anon: number | null
  file: number
  hwm: number
  heap: number
  heapCapacity: number
}

function status(): { rss: number; anon: number; file: number; hwm: number } {
  const text = readFileSync('/proc/self/status', 'utf8')
  const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? 'NaN') * 1024
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), hwm: kb('VmHWM') }
}

/** Anonymous RSS per mapping (start address, size and name → bytes), from /proc/self/smaps. */
function regions(): Map<string, number> {
  const out = new Map<string, number>()
  let key = ''
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(line)
    if (head) {
      key = `${head[1]} ${((Number.parseInt(head[2]!, 16) - Number.parseInt(head[1]!, 16)) / MB).toFixed(1)} MB ${head[3] || '[anon]'}`
      continue
    }
    const anon = /^Anonymous:\s+(\d+) kB/.exec(line)
    if (anon && Number(anon[1]) > 0) out.set(key, Number(anon[1]) * 1024)
  }
  return out
}

/** --smaps: the mappings whose anonymous RSS grew most between two region maps. */
function regionGrowth(before: Map<string, number>, after: Map<string, number>): string {
  const rows = [...new Set([...before.keys(), ...after.keys()])].map(
    (k) => [k, (after.get(k) ?? 0) - (before.get(k) ?? 0), after.get(k) ?? 0] as const,
  )
  rows.sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]))
  return rows
    .slice(0, 8)
    .map(([k, d, a]) => `  ${k}: ${d >= 0 ? '+' : ''}${(d / MB).toFixed(1)} MB (now ${(a / MB).toFixed(1)})`)
    .join('\n')
}

function snap(label: string): Snap {
  const h = heapStats()
  return { label, ...status(), heap: h.heapSize, heapCapacity: h.heapCapacity }
}

/** Resets VmHWM to the current RSS (Linux ≥ 4.0). */
function resetPeak(): void {
  writeFileSync('/proc/self/clear_refs', '5')
}

/** A full collection, then one more after the allocator's scavenger had time to return free pages. */
async function settle(): Promise<void> {
  Bun.gc(true)
  await Bun.sleep(1_000)
  Bun.gc(true)
}

const sample = readFileSync(join(root, 'test', 'fixtures', 'pg-logs', 'pg17.log'))
const block = Buffer.concat(Array.from({ length: Math.ceil(MB / sample.length) }, () => sample))

function appendLog(path: string, mb: number): void {
  const fd = openSync(path, 'a')
  for (let i = 0; i < mb; i++) writeSync(fd, block)
  closeSync(fd)
}

/** Child 1: imports and two 1 MB reads in a process that did nothing else. */
async function bareChild(): Promise<Snap[]> {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-rss-'))
  const out: Snap[] = []
  try {
    appendLog(join(dir, 'postgresql-a.log'), 1)
    appendLog(join(dir, 'postgresql-b.log'), 1)
    await settle()
    out.push(snap('before the imports (settled)'))
    const { LogTally } = await import('../src/agent/collectors/postgres/log-events.ts')
    const { buildPrefixParser } = await import('../src/agent/logs/prefix.ts')
    const { readLogs } = await import('../src/agent/logs/reader.ts')
    const { fileSource } = await import('../src/agent/logs/source.ts')
    await settle()
    out.push(snap('log modules imported (settled)'))
    const prefix = buildPrefixParser('%m [%p] %q%u@%d ')
    for (const [i, name] of ['postgresql-a.log', 'postgresql-b.log'].entries()) {
      const n = i === 0 ? 'first' : 'second'
      resetPeak()
      const tally = new LogTally(Date.now(), true)
      await readLogs(
        fileSource(dir),
        { files: { [name]: [0, 0] } },
        { format: 'stderr', prefix, tzOffsetMs: 0, now: Date.now() + 10_000 },
        (e) => tally.add(e),
      )
      out.push(snap(`${n} 1 MB read (entries classified, counted)`))
      tally.events('redacted')
      tally.countRows()
      out.push(snap(`${n}: its entries to send made`))
      Bun.gc(true)
      out.push(snap(`${n}: full collection`))
      await settle()
      out.push(snap(`${n}: settled`))
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  return out
}

/** The highest RSS of each phase of a cycle, over every cycle since `phases.armed` (bytes, VmHWM). */
const phases = { armed: false, start: 0, peaks: new Map<string, number>(), rises: new Map<string, number>() }

/** --smaps: the mappings at the baseline, and at the end of the read phase that ended with the most RSS. */
const smaps = {
  on: process.argv.includes('--smaps'),
  baseline: new Map<string, number>(),
  worst: new Map<string, number>(),
  worstRss: 0,
  worstHeap: '',
  baseHeap: '',
}

/** The JS heap and mimalloc's own counters (bun:jsc heapStats().mimalloc): what is in use, what is held. */
function heapLine(): string {
  const h = heapStats() as ReturnType<typeof heapStats> & {
    mimalloc?: Record<string, { current: number } & Record<string, number>>
  }
  const mi = h.mimalloc
  const cur = (k: string) => ((mi?.[k]?.current ?? Number.NaN) / MB).toFixed(1)
  return (
    `JS heap ${(h.heapSize / MB).toFixed(1)} / capacity ${(h.heapCapacity / MB).toFixed(1)} MB, extra memory ${(h.extraMemorySize / MB).toFixed(1)} MB; ` +
    `mimalloc: in use ${cur('malloc_normal')} small + ${cur('malloc_huge')} huge, pages committed ${cur('page_committed')}, committed ${cur('committed')}, RSS ${(((mi?.process as unknown as { rss_current: number })?.rss_current ?? Number.NaN) / MB).toFixed(1)} MB`
  )
}

/** Ends a phase: its peak, and how far it rose above the RSS it started at; the next phase starts here. */
function phaseEnd(name: string): void {
  if (!phases.armed) return
  const { rss, hwm } = status()
  if (smaps.on && name.startsWith('log_events: read') && rss > smaps.worstRss) {
    smaps.worstRss = rss
    smaps.worst = regions()
    smaps.worstHeap = heapLine()
  }
  phases.peaks.set(name, Math.max(phases.peaks.get(name) ?? 0, hwm))
  if (phases.start > 0) phases.rises.set(name, Math.max(phases.rises.get(name) ?? 0, hwm - phases.start))
  resetPeak()
  phases.start = rss
}

/**
 * Wraps the log collector, its entries to send and the shipper so that each phase of a cycle has its own
 * peak: the read (parse, classify, count), the entries to send, what the runner does between the
 * collector and the shipper (the batch's JSON, the state file with the pending batch), the send.
 */
async function probePhases(): Promise<void> {
  const { logEvents, LogTally } = await import('../src/agent/collectors/postgres/log-events.ts')
  const { Shipper } = await import('../src/agent/shipper.ts')
  const collect = logEvents.collect.bind(logEvents)
  logEvents.collect = async (ctx) => {
    phaseEnd('other collectors')
    try {
      return await collect(ctx)
    } finally {
      phaseEnd('log_events: entries to send, count rows')
    }
  }
  const events = LogTally.prototype.events
  LogTally.prototype.events = function (this: InstanceType<typeof LogTally>, ...args: Parameters<typeof events>) {
    phaseEnd('log_events: read, parse, classify, count')
    return events.apply(this, args)
  }
  const send = Shipper.prototype.send
  Shipper.prototype.send = async function (this: InstanceType<typeof Shipper>, ...args: Parameters<typeof send>) {
    phaseEnd("runner: the batch's JSON, the state file")
    try {
      return await send.apply(this, args)
    } finally {
      phaseEnd('shipper: send (HTTP, buffer)')
    }
  }
}

/** Child 2: the real agent, warm, then a backlog. argv: config, buffer dir, log file, MB. */
async function agentChild(
  configPath: string,
  bufferDir: string,
  logFile: string,
  mb: number,
  twice: boolean,
): Promise<Snap[]> {
  await probePhases()
  const { Agent } = await import('../src/agent/agent.ts')
  const { createLogger } = await import('../src/shared/log.ts')
  const out: Snap[] = []
  const warnings: string[] = []
  const agent = new Agent({
    configPath,
    bufferDir,
    log: createLogger('warn', (l) => warnings.push(l)),
    timings: { pingIntervalMs: 60_000 },
  })
  await agent.start()
  for (let i = 0; i < 200 && agent.status().databases[0]?.last_cycle_at == null; i++) await Bun.sleep(50)
  // Warm: every collector has run a few times; log_events has its position and reads nothing.
  for (let i = 0; i < 6; i++) await agent.cycleAll()
  await settle()
  out.push(snap('agent warm, log_events reading nothing (settled)'))
  resetPeak()
  for (let i = 0; i < 6; i++) await agent.cycleAll()
  out.push(snap("6 more cycles, nothing to read: peak = the agent's own"))
  await settle()
  out.push(snap('baseline: the same, settled'))
  if (smaps.on) {
    smaps.baseline = regions()
    smaps.baseHeap = heapLine()
  }
  appendLog(logFile, mb)
  resetPeak()
  phases.armed = true
  await agent.cycleAll()
  out.push({ ...snap('first cycle of the backlog (16 MB)'), hwm: Math.max(status().hwm, ...phases.peaks.values()) })
  const cycles = Math.ceil(mb / 16) + 1
  for (let i = 1; i < cycles; i++) await agent.cycleAll()
  phases.armed = false
  if (smaps.on)
    console.error(
      `anonymous RSS by mapping, the read phase's end with the most RSS (${(smaps.worstRss / MB).toFixed(1)} MB; ${smaps.worstHeap}) against the baseline (${smaps.baseHeap}):\n${regionGrowth(smaps.baseline, smaps.worst)}`,
    )
  const overall = Math.max(status().hwm, ...phases.peaks.values())
  out.push({ ...snap(`backlog read (${cycles} cycles): peak over all of them`), hwm: overall })
  for (const [name, hwm] of phases.peaks) {
    out.push({
      label: `phase: ${name} (rose by at most ${((phases.rises.get(name) ?? 0) / MB).toFixed(1)} MB)`,
      rss: hwm,
      anon: NaN,
      file: NaN,
      hwm,
      heap: NaN,
      heapCapacity: NaN,
    })
  }
  await settle()
  out.push(snap('after the backlog, settled'))
  if (twice) {
    appendLog(logFile, mb)
    resetPeak()
    for (let i = 0; i < cycles; i++) await agent.cycleAll()
    out.push(snap('a second backlog as large, read the same way: peak'))
    await settle()
    out.push(snap('after the second backlog, settled'))
  }
  await agent.stop()
  if (warnings.length > 0) console.error(warnings.join('\n'))
  return out
}

async function agentRun(mb: number, twice: boolean, without: string[]): Promise<Snap[]> {
  const { startPostgres } = await import('../test/support/postgres.ts')
  const { agentAccount, startTestServer } = await import('../test/support/server.ts')
  const postgres = (await import('postgres')).default
  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-rss-agent-'))
  const pg = await startPostgres(17, [
    '-c',
    'shared_preload_libraries=pg_stat_statements',
    '-c',
    'log_line_prefix=%m [%p] %q%u@%d ',
    '-c',
    'lc_messages=C',
  ])
  const server = await startTestServer('sqlite')
  try {
    const sql = postgres(pg.url(), { max: 1, onnotice: () => {} })
    await sql.unsafe('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
    // Something for the other collectors: 100 tables with rows and indexes, statements run on them.
    for (let i = 0; i < 100; i++) {
      await sql.unsafe(
        `CREATE TABLE t${i} (id int PRIMARY KEY, v text); INSERT INTO t${i} SELECT g, md5(g::text) FROM generate_series(1, 1000) g`,
      )
      await sql.unsafe(`SELECT count(*) FROM t${i} WHERE v LIKE 'a%'`)
    }
    await sql.end()
    const { key } = await agentAccount(server)
    const logDir = join(dir, 'log')
    const logFile = join(logDir, 'postgresql-2026-12-07.log')
    mkdirSync(logDir)
    appendLog(logFile, 1)
    const configPath = join(dir, 'config.yaml')
    const { collectorsFor } = await import('../src/shared/collectors.ts')
    const enabled =
      without.length === 0
        ? ''
        : `    enabled_collectors: [${collectorsFor('postgres')
            .filter((c) => !without.includes(c))
            .join(', ')}]\n`
    writeFileSync(
      configPath,
      `api:\n  endpoint: ${server.base}\n  key: ${key}\ndatabases:\n  - name: rss\n    dsn: ${pg.url()}\n    poll_interval: 1h\n    pg_log_dir: ${logDir}\n${enabled}`,
    )
    return await child([
      '--agent-child',
      configPath,
      dir,
      logFile,
      String(mb),
      twice ? 'twice' : 'once',
      ...(smaps.on ? ['--smaps'] : []),
    ])
  } finally {
    await server.stop()
    await pg.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Runs a child without blocking this process (the dbm server the agent ships to lives here). */
async function child(args: string[]): Promise<Snap[]> {
  const run = Bun.spawn([process.execPath, join(import.meta.dir, 'log-events-rss.ts'), ...args], {
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, code] = await Promise.all([
    new Response(run.stdout).text(),
    new Response(run.stderr).text(),
    run.exited,
  ])
  if (code !== 0) throw new Error(`child ${args[0]} failed (${code}): ${stderr}`)
  if (stderr.trim()) console.error(stderr.trim())
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Snap[]
}

function table(title: string, snaps: Snap[], base: number): void {
  const m = (n: number) => (n / MB).toFixed(1)
  console.log(`\n#### ${title}\n`)
  console.log(
    `| stage | RSS MB | + over "${snaps[base]!.label}" | RssAnon | RssFile | peak (VmHWM) since its reset | JS heap / capacity MB |`,
  )
  console.log('|---|---:|---:|---:|---:|---:|---:|')
  for (const s of snaps) {
    const d = s.rss - snaps[base]!.rss
    if (s.anon === null || Number.isNaN(s.anon))
      console.log(`| ${s.label} | | ${d >= 0 ? '+' : ''}${m(d)} (peak) | | | ${m(s.hwm)} | |`)
    else
      console.log(
        `| ${s.label} | ${m(s.rss)} | ${d >= 0 ? '+' : ''}${m(d)} | ${m(s.anon)} | ${m(s.file)} | ${m(s.hwm)} | ${m(s.heap)} / ${m(s.heapCapacity)} |`,
      )
  }
}

if (process.argv.includes('--bare-child')) {
  console.log(JSON.stringify(await bareChild()))
} else if (process.argv.includes('--agent-child')) {
  const i = process.argv.indexOf('--agent-child')
  const [configPath, bufferDir, logFile, mb, twice] = process.argv.slice(i + 1, i + 6)
  console.log(JSON.stringify(await agentChild(configPath!, bufferDir!, logFile!, Number(mb), twice === 'twice')))
  process.exit(0)
} else {
  const only = arg('--only')
  const mb = Number(arg('--mb') ?? 500)
  console.log(`## log_events RSS, cold (${new Date().toISOString().slice(0, 10)}, bun ${Bun.version})`)
  if (only !== 'agent')
    table('A process that imports the log modules and reads 1 MB twice', await child(['--bare-child']), 1)
  if (only !== 'bare') {
    const without = process.argv.flatMap((a, i) =>
      a === '--without' && process.argv[i + 1] ? [process.argv[i + 1]!] : [],
    )
    const snaps = await agentRun(mb, process.argv.includes('--twice'), without)
    table(
      `The agent (${without.length === 0 ? 'every collector' : `every collector but ${without.join(', ')}`}, PostgreSQL 17), then a ${mb} MB backlog`,
      snaps,
      2,
    )
    const own = snaps[1]!.hwm
    const peak = Math.max(snaps[3]!.hwm, snaps[4]!.hwm)
    const second = snaps.find((s) => s.label.startsWith('a second backlog'))
    console.log(
      `\nAdded by the backlog's read: peak ${((peak - snaps[2]!.rss) / MB).toFixed(1)} MB over the settled baseline, ${((peak - own) / MB).toFixed(1)} MB over the agent's own peak while it cycles with nothing to read.`,
    )
    const settledAfter = snaps.find((s) => s.label === 'after the backlog, settled')
    if (second && settledAfter)
      console.log(
        `The second backlog: peak ${((second.hwm - snaps[2]!.rss) / MB).toFixed(1)} MB over the first baseline, ${((second.hwm - settledAfter.rss) / MB).toFixed(1)} MB over the agent settled after the first.`,
      )
  }
}
