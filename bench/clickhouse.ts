// ClickHouse agent benchmark (`bun bench/clickhouse.ts`): what one collection cycle of `dbm agent` costs
// against a ClickHouse server with many tables, parts and statements: by default 200 MergeTree tables
// holding 10,000 active parts (merges stopped) and a query_log that receives 10,000 queries of 2,000
// distinct normalized statements per poll interval, on top of millions logged earlier in the day.
//
// ClickHouse is the test rig (test/support/clickhouse.ts): the real ClickHouse 26 engine from chdb
// behind the ClickHouse HTTP interface, in a child process. chdb has no query_log or
// asynchronous_metrics of its own; they are created with the server's schema
// (test/support/clickhouse-system-tables.ts) and filled here. The agent runs as production runs it,
// in its own process (`bun src/cli.ts agent --config ...`, or what --agent-cmd gives), shipping to the
// real app (createApp, SQLite store) in this process on 127.0.0.1, with the default poll interval of 10 s.
//
// Data, made once before the agent starts:
// - tables: `--tables` tables in databases bench_1, bench_2, ... (50 per database), each filled by one
//   INSERT ... SELECT whose blocks are not squashed, so it writes `--parts-per-table` parts at once
//   (one per block and partition it touches). Partitions per table cycle through 1 (no PARTITION BY),
//   5 and 10 (monthly) and 25 (daily), where they divide --parts-per-table: with 50, that is 50, 10, 5
//   and 2 parts per partition. `SYSTEM STOP MERGES` before the inserts keeps every part.
// - query_log: `--history` queries logged earlier today, then, between cycles, `--calls` queries of
//   `--statements` distinct normalized statements per interval (each at least once, the rest falling
//   off as 1/rank), two rows per query as the server logs them (QueryStart, then QueryFinish or
//   ExceptionWhileProcessing for 1 in 500).
//
// Measured per cycle (snapshots taken half an interval after each cycle's batch arrived):
// - wall time per collector: the runner's own `ok in N ms` from the agent's /healthz (HTTP round trips
//   to the rig and JSON decoding included);
// - cycle time: from the cycle's start (`last_cycle_at` in /healthz) to the batch's arrival at the
//   server (connect or identity check, collectors, JSON encoding, the POST);
// - agent CPU: user + system time of the agent process (/proc/<pid>/stat), as a delta per cycle;
// - agent memory: VmRSS and VmHWM (the peak) from /proc/<pid>/status;
// - ingest bytes: the body of the POST /api/v1/ingest requests per cycle;
// - engine time: chdb has no query_log to read the agent's own query times from, so after each
//   snapshot this process runs the same collectors once more (their code, with their own watermarks,
//   on the same data as the agent's cycle) and sums the engine's elapsed time of each query (the rig's
//   X-ClickHouse-Summary elapsed_ns), one query at a time and with the query condition cache off, as a
//   new watermark each cycle leaves the agent without it.
// The first cycle (connect, baselines of query_stats and of the system.events counters) is reported
// apart from the steady cycles (2nd and later; median over them).
// Options: --cycles N (steady cycles), --interval S, --tables N, --parts-per-table N, --statements N,
// --calls N, --history N, --agent-cmd "COMMAND" (what runs `<COMMAND> agent ...`; default
// `bun src/cli.ts`, e.g. `dist/dbm` for the compiled binary).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ClickHouseConnection, connectClickHouse } from '../src/agent/clickhouse-connection.ts'
import { clickhouseCollectors } from '../src/agent/collectors/clickhouse/index.ts'
import type { BatchSections, ClickHouseContext } from '../src/agent/collectors/types.ts'
import { createLogger } from '../src/shared/log.ts'
import { type ClickHouseRig, startClickHouse } from '../test/support/clickhouse.ts'
import { createSystemLogTables, seedAsynchronousMetrics } from '../test/support/clickhouse-system-tables.ts'
import {
  type BenchServer,
  collectorWallMs,
  createAccount,
  fmt,
  healthz,
  loadLine,
  machine,
  median,
  parseArgs,
  procStat,
  startAgentProcess,
  startServer,
} from './common.ts'

const AGENT_USER = 'dbm_agent'
const AGENT_PASSWORD = 'bench-agent-password'
const TABLES_PER_DATABASE = 50
const ROWS_PER_PART = 200
const PARTITION_MIX = [1, 5, 10, 25]
/** Statement shapes; with one per table each, `--statements` may be up to 10 × `--tables`. */
const TEMPLATES = [
  "'SELECT count() FROM ', tbl, ' WHERE id > ', toString(lit)",
  "'SELECT id, v FROM ', tbl, ' WHERE id = ', toString(lit)",
  "'SELECT sum(v) FROM ', tbl, ' WHERE day >= today() - ', toString(lit % 30)",
  "'SELECT s FROM ', tbl, ' WHERE id IN (', toString(lit), ', ', toString(lit + 1), ') LIMIT 10'",
  "'SELECT max(id) FROM ', tbl",
  "'SELECT avg(v) FROM ', tbl, ' WHERE s LIKE ''', toString(lit), '%'''",
  "'SELECT uniq(s) FROM ', tbl, ' WHERE v < ', toString(lit)",
  "'SELECT day, count() FROM ', tbl, ' GROUP BY day ORDER BY day DESC LIMIT ', toString(lit % 100 + 1)",
  "'INSERT INTO ', tbl, ' (day, id, v, s) VALUES'",
  "'SELECT * FROM ', tbl, ' ORDER BY id DESC LIMIT ', toString(lit % 100 + 1)",
]
const INSERT_TEMPLATE = 8

interface Options {
  cycles: number
  interval: number
  tables: number
  partsPerTable: number
  statements: number
  calls: number
  history: number
  agentCmd: string
}

interface DataSet {
  databases: number
  tables: number
  activeParts: number
  partitions: number
  /** Tables and parts per partition for each partitioning of the mix. */
  mix: { partitions: number; tables: number; partsPerPartition: number; by: string }[]
  setupMs: number
  historyRows: number
  historyFrom: string
}

interface Snapshot {
  cpuMs: number
  rssKb: number
  hwmKb: number
  ingestBytes: number
  collectors: Record<string, string>
  lastCycleAt: number | undefined
}

/** What the in-process run of the collectors measured: engine time, queries and rows per collector. */
type Probe = Record<string, { engineMs: number; queries: number; rows: number }>

interface CycleDelta {
  cycle: number
  cycleMs: number
  cpuMs: number
  rssMb: number
  ingestKb: number
  wall: Record<string, number>
  probe: Probe
}

// ---- ClickHouse data ----

const tableName = (i: number) => `bench_${Math.floor(i / TABLES_PER_DATABASE) + 1}.t${i % TABLES_PER_DATABASE}`

function partitionsOf(i: number, partsPerTable: number): number {
  const usable = PARTITION_MIX.filter((p) => partsPerTable % p === 0)
  return usable[i % usable.length]!
}

/** The table DDL and the one INSERT that writes `partsPerTable` parts over `partitions` partitions. */
function tableStatements(
  i: number,
  partsPerTable: number,
): { create: string; insert: string; by: string; partitions: number } {
  const partitions = partitionsOf(i, partsPerTable)
  const by = partitions === 1 ? '' : partitions <= 12 ? 'toYYYYMM(day)' : 'day'
  const day =
    partitions === 1
      ? "toDate('2026-11-01')"
      : partitions <= 12
        ? `addMonths(toDate('2026-11-01'), -toInt32(number % ${partitions}))`
        : `toDate('2026-11-01') - toInt32(number % ${partitions})`
  const blockRows = ROWS_PER_PART * partitions
  const blocks = partsPerTable / partitions
  return {
    create: `CREATE TABLE ${tableName(i)} (day Date, id UInt64, v Float64, s String) ENGINE = MergeTree${by ? ` PARTITION BY ${by}` : ''} ORDER BY id`,
    // One block of the SELECT per `blockRows` rows; each block writes one part per partition it spans.
    insert: `INSERT INTO ${tableName(i)} SELECT ${day}, number, number / 7, toString(cityHash64(number) % 100000) FROM numbers(${blockRows * blocks})`,
    by: by || 'none',
    partitions,
  }
}

/** Settings that keep each block of an INSERT ... SELECT a part of its own (with max_block_size rows). */
const UNSQUASHED_INSERT = {
  min_insert_block_size_rows: 0,
  min_insert_block_size_bytes: 0,
  max_threads: 1,
  max_insert_threads: 1,
}

async function createTables(
  ch: ClickHouseRig,
  o: Options,
): Promise<Omit<DataSet, 'historyRows' | 'historyFrom' | 'setupMs'>> {
  const databases = Math.ceil(o.tables / TABLES_PER_DATABASE)
  for (let d = 1; d <= databases; d++) await ch.command(`CREATE DATABASE bench_${d}`)
  const statements = Array.from({ length: o.tables }, (_, i) => tableStatements(i, o.partsPerTable))
  for (const s of statements) await ch.command(s.create)
  // Stops merges of the tables that exist now (a later table would merge), before any part is written.
  await ch.command('SYSTEM STOP MERGES')
  for (const [i, s] of statements.entries()) {
    await ch.command(s.insert, undefined, { ...UNSQUASHED_INSERT, max_block_size: ROWS_PER_PART * s.partitions })
    if ((i + 1) % 50 === 0) console.error(`  inserted into ${i + 1} of ${o.tables} tables`)
  }
  const [counts] = await ch.query<{ parts: number | string; partitions: number | string }>(
    "SELECT count() AS parts, uniqExact(database, table, partition_id) AS partitions FROM system.parts WHERE active AND database LIKE 'bench\\_%'",
  )
  const activeParts = Number(counts!.parts)
  if (activeParts !== o.tables * o.partsPerTable)
    throw new Error(`expected ${o.tables * o.partsPerTable} active parts, found ${activeParts} (did a merge run?)`)
  const mix = PARTITION_MIX.filter((p) => o.partsPerTable % p === 0).map((p) => ({
    partitions: p,
    tables: statements.filter((s) => s.partitions === p).length,
    partsPerPartition: o.partsPerTable / p,
    by: statements.find((s) => s.partitions === p)?.by ?? '',
  }))
  return { databases, tables: o.tables, activeParts, partitions: Number(counts!.partitions), mix }
}

/**
 * Logs `calls` queries (two rows each) with end times spread evenly over (fromUs, toUs], in one INSERT ... SELECT.
 * Call c runs statement k: the first `statements` calls one each, then k falls off as 1/rank.
 */
function queryLogInsert(o: Options, calls: number, fromUs: number, toUs: number): string {
  const s = o.statements
  const rest = Math.max(1, o.calls - s)
  return `INSERT INTO system.query_log (type, event_date, event_time, event_time_microseconds, query_start_time,
      query_start_time_microseconds, query_duration_ms, read_rows, read_bytes, written_rows, written_bytes, result_rows,
      result_bytes, memory_usage, query, query_kind, exception_code, exception)
    SELECT type, toDate(t), toDateTime(t), t, toDateTime(st), st, if(start, 0, dur), if(start, 0, rr), if(start, 0, rr * 48),
      if(start OR NOT ins, 0, 100), if(start OR NOT ins, 0, 4800), if(start OR ins, 0, res), if(start OR ins, 0, res * 24),
      if(start, 0, 1048576 + rr * 8), q, if(ins, 'Insert', 'Select'), if(failed, 159, 0),
      if(failed, 'Code: 159. DB::Exception: Timeout exceeded. (TIMEOUT_EXCEEDED)', '')
    FROM (
      SELECT intDiv(number, 2) AS c, number % 2 = 0 AS start, c % ${o.calls} AS m,
        if(m < ${s}, m, toUInt32(floor(pow(${s}, (m - ${s}) / ${rest}))) - 1) AS k,
        intDiv(k, ${o.tables}) AS shape, shape = ${INSERT_TEMPLATE} AS ins,
        concat('bench_', toString(intDiv(k % ${o.tables}, ${TABLES_PER_DATABASE}) + 1), '.t', toString(k % ${TABLES_PER_DATABASE})) AS tbl,
        c * 7919 % 100000 AS lit,
        (k % 50) * 3 + c % 7 AS dur,
        NOT start AND c % 500 = 499 AS failed,
        if(start, 'QueryStart', if(failed, 'ExceptionWhileProcessing', 'QueryFinish')) AS type,
        fromUnixTimestamp64Micro(toInt64(${fromUs} + ${toUs - fromUs} * (c + 1) / ${calls})) AS finished,
        finished - toIntervalMillisecond(dur) AS st,
        if(start, st, finished) AS t,
        (k % 13 + 1) * 8192 AS rr, k % 100 AS res,
        [${TEMPLATES.map((t) => `concat(${t})`).join(', ')}][shape + 1] AS q
      FROM numbers(${calls * 2})
    )`
}

async function seedQueryLogHistory(ch: ClickHouseRig, o: Options, fromUs: number, toUs: number): Promise<number> {
  const chunk = 1_000_000
  for (let done = 0; done < o.history; done += chunk) {
    const n = Math.min(chunk, o.history - done)
    const a = fromUs + Math.floor(((toUs - fromUs) * done) / o.history)
    const b = fromUs + Math.floor(((toUs - fromUs) * (done + n)) / o.history)
    await ch.command(queryLogInsert(o, n, a, b))
  }
  return o.history * 2
}

// ---- measurements ----

async function snapshot(pid: number, healthPort: number, ingestBytes: number): Promise<Snapshot> {
  const proc = procStat(pid)
  const [db] = (await healthz(healthPort)) ?? []
  const collectors = db?.collectors ?? {}
  const lastCycleAt = db?.last_cycle_at ? Date.parse(db.last_cycle_at) : undefined
  return { ...proc, ingestBytes, collectors, lastCycleAt }
}

/**
 * The agent's collectors run in this process on their own connection, timing each query by the engine's
 * elapsed time that the rig reports in X-ClickHouse-Summary.
 */
class EngineProbe {
  private readonly state = new Map<string, unknown>()
  private current = { engineMs: 0, queries: 0 }

  private constructor(private readonly conn: ClickHouseConnection) {}

  static async open(dsn: string): Promise<EngineProbe> {
    const conn = await connectClickHouse(dsn, { requestTimeoutMs: 62_000, maxExecutionTimeS: 60 })
    const probe = new EngineProbe(conn)
    const query = conn.client.query.bind(conn.client)
    // One query at a time: the elapsed time of queries a collector sends together would include their
    // wait for the other's CPU.
    let previous: Promise<unknown> = Promise.resolve()
    conn.client.query = ((params: Parameters<typeof query>[0]) => {
      const run = previous.then(async () => {
        const result = await query({
          ...params,
          clickhouse_settings: { ...params.clickhouse_settings, use_query_condition_cache: 0 },
        })
        const summary = JSON.parse(String(result.response_headers['x-clickhouse-summary'] ?? '{}')) as {
          elapsed_ns?: string
        }
        probe.current.engineMs += Number(summary.elapsed_ns ?? 0) / 1e6
        probe.current.queries++
        return result
      })
      previous = run.catch(() => {})
      return run
    }) as typeof conn.client.query
    return probe
  }

  async run(): Promise<Probe> {
    const out: Probe = {}
    const ctx: ClickHouseContext = {
      name: 'probe',
      client: this.conn.client,
      version: this.conn.version,
      versionNum: this.conn.versionNum,
      major: this.conn.major,
      now: Date.now(),
      settings: { collectExplainPlans: false, collectReplication: false },
      state: this.state,
      notes: new Map(),
      log: createLogger('error'),
    }
    for (const c of clickhouseCollectors) {
      this.current = { engineMs: 0, queries: 0 }
      const sections: Partial<BatchSections> = await c.collect(ctx)
      const rows = Object.values(sections).reduce(
        (n, v) => n + (Array.isArray(v) ? v.length : v ? Object.keys(v).length : 0),
        0,
      )
      out[c.name] = { ...this.current, rows }
    }
    return out
  }

  close() {
    return this.conn.close()
  }
}

// ---- the run ----

interface RunResult {
  cycles: CycleDelta[]
  hwmMb: number
  startRssMb: number
  warnings: string[]
  batches: number
}

async function runAgent(
  o: Options,
  ch: ClickHouseRig,
  server: BenchServer & { ingestBytes(): number; arrivals: number[] },
  apiKey: string,
): Promise<RunResult> {
  const countBatches = async () => {
    const [row] = await server.store.driver.all<{ n: number }>(
      "SELECT COUNT(b.batch_id) AS n FROM databases d JOIN ingest_batches b ON b.database_id = d.id WHERE d.name = 'clickhouse'",
    )
    return Number(row?.n ?? 0)
  }
  const probe = await EngineProbe.open(ch.dsn)
  const agent = await startAgentProcess({
    agentCmd: o.agentCmd,
    endpoint: server.base,
    apiKey,
    interval: o.interval,
    databases: [{ name: 'clickhouse', dsn: ch.dsn }],
    tmpPrefix: 'dbm-bench-clickhouse-',
  })
  const cycles: CycleDelta[] = []
  let startRssMb = 0
  try {
    const s0 = await snapshot(agent.pid, agent.healthPort, server.ingestBytes())
    s0.cpuMs = 0 // everything the process used since it started counts towards the first cycle
    let previous = s0
    let seededUntilUs = 0
    const total = o.cycles + 1
    for (let cycle = 1; cycle <= total; cycle++) {
      // Wait for this cycle's batch, then half an interval, so the snapshot falls between cycles.
      await agent.waitForCycle(cycle, countBatches, o.interval * 3 + 60, 100)
      if (cycle === 1) startRssMb = procStat(agent.pid).rssKb / 1024
      await Bun.sleep((o.interval * 1000) / 2)
      const s = await snapshot(agent.pid, agent.healthPort, server.ingestBytes())
      const wall = collectorWallMs(s.collectors)
      const arrival = server.arrivals[cycle - 1]
      // The probe reads what the agent's cycle read (query_stats: the queries logged since its previous run).
      const probed = await probe.run()
      // Queries logged from here on come after both baselines (the agent's in cycle 1, the probe's just now).
      if (cycle === 1) seededUntilUs = Date.now() * 1000
      const d: CycleDelta = {
        cycle,
        cycleMs: arrival !== undefined && s.lastCycleAt !== undefined ? arrival - s.lastCycleAt : Number.NaN,
        cpuMs: s.cpuMs - previous.cpuMs,
        rssMb: s.rssKb / 1024,
        ingestKb: (s.ingestBytes - previous.ingestBytes) / 1024,
        wall,
        probe: probed,
      }
      cycles.push(d)
      const failed = Object.entries(s.collectors).filter(([, t]) => !t.startsWith('ok'))
      console.error(
        `cycle ${cycle}: ${fmt(d.cycleMs)} ms, cpu ${d.cpuMs} ms, rss ${d.rssMb.toFixed(1)} MB, ingest ${d.ingestKb.toFixed(0)} KiB; wall ${JSON.stringify(wall)}; engine ${JSON.stringify(Object.fromEntries(Object.entries(probed).map(([k, v]) => [k, Math.round(v.engineMs)])))}${failed.length ? `; failed ${JSON.stringify(failed)}` : ''}`,
      )
      previous = s
      // The next interval's queries, logged after the agent's watermark and this probe's.
      const nowUs = Date.now() * 1000
      const fromUs = Math.max(seededUntilUs, nowUs - o.interval * 1_000_000)
      await ch.command(queryLogInsert(o, o.calls, fromUs, nowUs))
      seededUntilUs = nowUs
    }
    const hwmMb = procStat(agent.pid).hwmKb / 1024
    return {
      cycles,
      hwmMb,
      startRssMb,
      warnings: agent.warnings(),
      batches: await countBatches(),
    }
  } finally {
    await agent.stop()
    await probe.close()
  }
}

// ---- report ----

function report(
  o: Options,
  data: DataSet,
  version: string,
  r: RunResult,
  m: { commit: string; line: string },
  loads: { before: string; after: string },
): string {
  const first = r.cycles[0]!
  const steady = r.cycles.slice(1)
  const med = (f: (c: CycleDelta) => number) => median(steady.map(f))
  const names = clickhouseCollectors.map((c) => c.name)
  const wallOf = (cs: CycleDelta[], n: string) => cs.map((c) => c.wall[n]).filter((v): v is number => v !== undefined)
  const sumWall = (c: CycleDelta) => Object.values(c.wall).reduce((a, b) => a + b, 0)
  const engineSum = (c: CycleDelta) => Object.values(c.probe).reduce((a, p) => a + p.engineMs, 0)
  const commandLine = ['bun bench/clickhouse.ts', ...process.argv.slice(2)].join(' ')
  const mixText = data.mix
    .map(
      (x) =>
        `${x.tables} with ${x.partitions === 1 ? 'no partitioning (one partition)' : `${x.partitions} partitions (\`PARTITION BY ${x.by}\`)`} of ${x.partsPerPartition} parts`,
    )
    .join(', ')
  const statementsPerCycle = median(steady.map((c) => c.probe.query_stats?.rows ?? 0))
  const lines = [
    `### ${new Date().toISOString().slice(0, 10)}: agent cycle cost against ClickHouse ${version} (chdb rig), ${fmt(data.tables)} tables, ${fmt(data.activeParts)} parts`,
    ``,
    `- Command: \`${commandLine}\``,
    `- Commit: ${m.commit}`,
    `- Machine: ${m.line}; the ClickHouse rig, the agent, the dbm server and this benchmark share the machine`,
    `- Load average (1/5/15 min) at start: ${loads.before}; at end: ${loads.after}`,
    `- ClickHouse: the ${version} engine of chdb behind the ClickHouse HTTP interface (\`test/support/clickhouse.ts\`), in its own process; each HTTP request opens a chdb session of its own`,
    `- Tables: ${fmt(data.tables)} MergeTree tables \`(day Date, id UInt64, v Float64, s String) ORDER BY id\` in ${data.databases} database${data.databases === 1 ? '' : 's'}, merges stopped (\`SYSTEM STOP MERGES\`), one unsquashed INSERT each writing ${o.partsPerTable} parts of ${ROWS_PER_PART} rows: ${mixText}; **${fmt(data.activeParts)} active parts in ${fmt(data.partitions)} partitions** (setup ${fmt(data.setupMs / 1000, 1)} s)`,
    `- query_log (the server's schema, \`ORDER BY (event_date, event_time)\`): ${fmt(o.history)} queries logged earlier today (${fmt(data.historyRows)} rows from ${data.historyFrom} UTC on), then before each cycle ${fmt(o.calls)} queries of ${fmt(o.statements)} distinct normalized statements (each at least once, the rest falling off as 1/rank; 1 in 500 failing; one shape of ten an INSERT), logged as QueryStart + QueryFinish rows: ${fmt(o.calls / o.interval)} queries/s; the agent saw ${fmt(statementsPerCycle)} statements per steady cycle`,
    `- Agent: \`${o.agentCmd || 'bun src/cli.ts'} agent --config … --log-level warn\` in its own process, every collector enabled, poll interval ${o.interval} s; it ships to the real app (createApp, SQLite store) in the benchmark process`,
    `- Wall time = the runner's \`ok in N ms\` per collector (/healthz), HTTP round trips to the rig included; cycle time = cycle start (\`last_cycle_at\`) to the batch's arrival at the server; engine time = the same collectors run once more in the benchmark process after each snapshot, on the same data, summing the engine's \`elapsed_ns\` (X-ClickHouse-Summary) of each query, run one at a time with the query condition cache off (chdb has no query_log of the agent's queries); CPU = utime + stime of the agent process (/proc/<pid>/stat, 10 ms ticks); RSS = VmRSS / VmHWM (/proc/<pid>/status)`,
    `- Cycle 1 also includes the process start and the connection; query_stats and the system.events counters take their baselines in it, so it ships no statements`,
    ``,
    `| per cycle | cycle 1 (start, connect, baselines) | steady cycles, median (${steady.length} cycles) | steady max |`,
    `|---|---:|---:|---:|`,
    `| cycle time, start to batch at the server (ms) | ${fmt(first.cycleMs)} | **${fmt(med((c) => c.cycleMs))}** | ${fmt(Math.max(...steady.map((c) => c.cycleMs)))} |`,
    `| sum of the collectors' wall times (ms) | ${fmt(sumWall(first))} | ${fmt(med(sumWall))} | ${fmt(Math.max(...steady.map(sumWall)))} |`,
    `| engine time of the collectors' queries (ms) | ${fmt(engineSum(first), 1)} | ${fmt(med(engineSum), 1)} | ${fmt(Math.max(...steady.map(engineSum)), 1)} |`,
    `| agent CPU, user + system (ms) | ${fmt(first.cpuMs)} (incl. process start) | ${fmt(med((c) => c.cpuMs))} | ${fmt(Math.max(...steady.map((c) => c.cpuMs)))} |`,
    `| agent VmRSS at the snapshot (MB) | ${fmt(first.rssMb, 1)} | ${fmt(
      med((c) => c.rssMb),
      1,
    )} | ${fmt(Math.max(...steady.map((c) => c.rssMb)), 1)} |`,
    `| ingest request body (KiB) | ${fmt(first.ingestKb)} | ${fmt(med((c) => c.ingestKb))} | ${fmt(Math.max(...steady.map((c) => c.ingestKb)))} |`,
    ``,
    `Agent peak RSS (VmHWM) over the run: **${fmt(r.hwmMb, 1)} MB**; VmRSS after the first batch: ${fmt(r.startRssMb, 1)} MB. Batches received: ${r.batches}. Warnings logged by the agent: ${r.warnings.length === 0 ? 'none' : r.warnings.length}.`,
    ``,
    `| collector | wall ms, cycle 1 | wall ms, steady median | steady max | engine ms, steady median | queries | rows per batch, steady median |`,
    `|---|---:|---:|---:|---:|---:|---:|`,
    ...names.map((n) => {
      const probes = steady.map((c) => c.probe[n]).filter((p) => p !== undefined)
      return `| ${n} | ${fmt(first.wall[n])} | ${fmt(median(wallOf(steady, n)))} | ${fmt(Math.max(...wallOf(steady, n)))} | ${fmt(median(probes.map((p) => p.engineMs)), 1)} | ${fmt(median(probes.map((p) => p.queries)))} | ${fmt(median(probes.map((p) => p.rows)))} |`
    }),
  ]
  for (const w of r.warnings.slice(0, 5)) lines.push('', `Agent warning: \`${w.slice(0, 300)}\``)
  return lines.join('\n')
}

async function main(): Promise<number> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    {
      cycles: 5,
      interval: 10,
      tables: 200,
      partsPerTable: 50,
      statements: 2000,
      calls: 10_000,
      history: 5_000_000,
      agentCmd: '',
    },
    {
      cycles: [1, 60],
      interval: [1, 60],
      tables: [1, 2000],
      partsPerTable: [1, 500],
      statements: [1, 20_000],
      calls: [1, 1_000_000],
      history: [0, 100_000_000],
    },
  )
  if (o.statements > TEMPLATES.length * o.tables)
    throw new Error(`--statements may be at most ${TEMPLATES.length} × --tables (${TEMPLATES.length * o.tables})`)
  if (o.calls < o.statements)
    throw new Error('--calls must be at least --statements (each statement runs once per interval)')
  const loadBefore = loadLine()
  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-bench-clickhouse-serve-'))
  let ch: ClickHouseRig | undefined
  let server: BenchServer | undefined
  let result: RunResult
  let data: DataSet
  let version: string
  try {
    console.error('starting the ClickHouse rig')
    ch = await startClickHouse({ user: AGENT_USER, password: AGENT_PASSWORD })
    version = ch.version
    const setupStarted = performance.now()
    console.error(`creating ${o.tables} tables with ${o.partsPerTable} parts each`)
    const tables = await createTables(ch, o)
    const setupMs = performance.now() - setupStarted
    await createSystemLogTables(ch)
    await seedAsynchronousMetrics(ch, [
      { metric: 'MemoryResident', value: 2.1e9 },
      { metric: 'OSMemoryTotal', value: 6.4e10 },
      { metric: 'OSMemoryAvailable', value: 4.2e10 },
    ])
    const nowMs = Date.now()
    const dayStartMs = Math.floor(nowMs / 86_400_000) * 86_400_000
    const historyToMs = Math.max(dayStartMs + 1000, nowMs - 60_000)
    console.error(`logging ${o.history} earlier queries in query_log`)
    const historyRows = await seedQueryLogHistory(ch, o, dayStartMs * 1000, historyToMs * 1000)
    data = { ...tables, setupMs, historyRows, historyFrom: new Date(dayStartMs).toISOString().slice(11, 16) }

    let ingestBytes = 0
    const arrivals: number[] = []
    server = await startServer({
      dataDir,
      onRequest: (request) => {
        if (request.method === 'POST' && request.url.endsWith('/api/v1/ingest')) {
          arrivals.push(Date.now())
          ingestBytes += Number(request.headers.get('content-length') ?? 0)
        }
      },
    })
    const { apiKey } = await createAccount(server)
    console.error('running the agent')
    result = await runAgent(o, ch, Object.assign(server, { ingestBytes: () => ingestBytes, arrivals }), apiKey)
  } finally {
    await server?.stop()
    await ch?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
  const m = await machine()
  console.log(report(o, data, version, result, m, { before: loadBefore, after: loadLine() }))
  return 0
}

try {
  process.exitCode = await main()
} catch (e) {
  console.error(`bench/clickhouse.ts: ${(e as Error).stack ?? e}`)
  process.exitCode = 1
}
