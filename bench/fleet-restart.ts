// Restart benchmark (`bun bench/fleet-restart.ts`, issue 29 deliverable 2): N agents ship to one `dbm
// serve` on SQLite; serve is stopped for M seconds while the agents buffer, then started again on the
// same data directory and port. Reports the catch-up time (until every batch buffered during the gap is
// acknowledged), exactly-once (batches generated vs acknowledged vs stored), the ingest latency of
// current batches in 10-second steps after the start (goal: p99 under 250 ms within 60 s), what was shed
// (503 + Retry-After), the alerts opened for the gap (goal: none) and serve's peak RSS.
//
// Method
// - Server: `dist/dbm serve` (as bench/fleet.ts picks it; --serve-cmd to choose) on 127.0.0.1 and a port
//   chosen once, log level info, a fresh SQLite data dir, DBM_METRICS_TOKEN set. Stopped with SIGTERM
//   (graceful) and started again with the same environment.
// - Agents: one load-generator process (this file as a child) running N real shippers (src/agent/shipper.ts:
//   disk buffer, retry rounds of 30 s plus up to a 10 s jitter, Retry-After, paced drain, X-Dbm-Batch-Age),
//   each fed bench/fleet.ts's generated pgbench-shaped batch every 10 s (first batches spread over 10 s).
//   The only thing added to the agent is a wrapper around fetch that times each POST and reads its batch
//   id, age header, status and `duplicate` answer. "Current" = no age header or an age under the server's
//   own backlog mark (limits.ts ingestAdmissionLimits.backlogAgeSeconds).
// - Timeline: --warmup S steady, serve stopped for --down S, started; the agents keep collecting for
//   --after S after the start, then stop collecting and drain what is left (at most 5 more minutes).
// - After the run: serve's /metrics (shed counts, applied and duplicate batches since the restart), then
//   serve stopped and its store read: stored batch ids, alerts by rule, recorded agent silences.
// Options: --agents N (1–2,000, default 300), --down S (10–900, default 120), --warmup S (10–600,
// default 30), --after S (30–900, default 180), --moving-statements N (7–200, default 30), --serve-cmd.
import { Database } from 'bun:sqlite'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Shipper } from '../src/agent/shipper.ts'
import { ingestAdmissionLimits } from '../src/server/limits.ts'
import { BATCH_AGE_HEADER } from '../src/shared/ingest-path.ts'
import { createLogger } from '../src/shared/log.ts'
import type { IngestBatch } from '../src/shared/wire.ts'
import { fmt, loadLine, machine, parseArgs, percentile, procStat } from './common.ts'
import {
  type Options as FleetOptions,
  type ServeProcess,
  SimulatedDatabase,
  account,
  serveCommand,
  startServe,
} from './fleet.ts'

const CHILD_ENV = 'DBM_BENCH_RESTART_CHILD'
const INTERVAL_MS = 10_000
const BACKLOG_AGE_S = ingestAdmissionLimits.backlogAgeSeconds
const STEP_MS = 10_000
const GOAL = { p99Ms: 250, withinS: 60 } as const
const METRICS_TOKEN = 'bench-restart-metrics-token-0123456789'

interface ChildInput {
  base: string
  apiKeys: string[]
  agents: number
  moving: number
  startAt: number
  /** Epoch ms after which the agents stop collecting (then drain). */
  collectUntil: number
  bufferDir: string
  runId: string
}

interface Post {
  /** Epoch ms the request started, and its time. */
  at: number
  ms: number
  status: number
  /** X-Dbm-Batch-Age, seconds; -1: none (sent directly). */
  age: number
  collectedAt: number
  batchId: string
  duplicate: boolean
}

interface ChildResult {
  posts: Post[]
  generated: number
  lost: number
  dropped: number
  leftBuffered: number
  drainedAt: number
}

// ---- the agents (child process) ----

async function runChild(input: ChildInput): Promise<ChildResult> {
  const posts: Post[] = []
  const realFetch = globalThis.fetch
  // Times each POST the shippers make; reads what it carried and what the server answered.
  globalThis.fetch = (async (url: string | URL | Request, init?: RequestInit) => {
    const at = Date.now()
    const t0 = performance.now()
    const body = String(init?.body ?? '')
    const head = body.slice(0, 200)
    const batchId = /"batch_id":"([^"]+)"/.exec(head)?.[1] ?? ''
    const collectedAt = Number(/"collected_at":(\d+)/.exec(head)?.[1] ?? 0)
    const ageHeader = (init?.headers as Record<string, string> | undefined)?.[BATCH_AGE_HEADER]
    const post: Post = {
      at,
      ms: 0,
      status: 0,
      age: ageHeader === undefined ? -1 : Number(ageHeader),
      collectedAt,
      batchId,
      duplicate: false,
    }
    posts.push(post)
    try {
      const res = await realFetch(url, init)
      const text = await res.text()
      post.ms = performance.now() - t0
      post.status = res.status
      post.duplicate = res.ok && text.includes('"duplicate":true')
      return new Response(text, { status: res.status, headers: res.headers })
    } catch (e) {
      post.ms = performance.now() - t0
      throw e
    }
  }) as typeof fetch

  const log = createLogger('error', () => {})
  let generated = 0
  const shippers: Shipper[] = []
  const agent = async (i: number) => {
    const db = new SimulatedDatabase(i, input.moving, input.runId)
    const shipper = new Shipper({
      endpoint: input.base,
      apiKey: input.apiKeys[Math.floor(i / 100) % input.apiKeys.length]!,
      databaseName: db.name,
      bufferDir: input.bufferDir,
      retryIntervalMs: 30_000,
      jitterMs: INTERVAL_MS,
      bufferMaxAgeMs: 3_600_000,
      requestTimeoutMs: 15_000,
      log,
    })
    shippers.push(shipper)
    shipper.start()
    let next = input.startAt + Math.floor((i * INTERVAL_MS) / input.agents)
    for (;;) {
      const wait = next - Date.now()
      if (wait > 0) await Bun.sleep(wait)
      const now = Date.now()
      if (now >= input.collectUntil) return
      const body = db.next(now)
      generated++
      await shipper.send({ batch_id: /"batch_id":"([^"]+)"/.exec(body)![1]! } as IngestBatch, body)
      next += INTERVAL_MS
      if (next < Date.now()) next = Date.now()
    }
  }
  await Promise.all(Array.from({ length: input.agents }, (_, i) => agent(i)))
  // Collection over: the buffers drain at the shippers' own pace (at most 5 minutes).
  const deadline = Date.now() + 5 * 60_000
  while (shippers.some((s) => s.buffered() > 0) && Date.now() < deadline) await Bun.sleep(500)
  const drainedAt = Date.now()
  const leftBuffered = shippers.reduce((n, s) => n + s.buffered(), 0)
  let lost = 0
  let dropped = 0
  for (const s of shippers) {
    const status = s.status()
    lost += status.lost_batches
    dropped += status.dropped_batches
  }
  await Promise.all(shippers.map((s) => s.stop()))
  return { posts, generated, lost, dropped, leftBuffered, drainedAt }
}

// ---- the run (parent) ----

async function freePort(): Promise<number> {
  const probe = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = probe.port
  probe.stop(true)
  return port
}

async function scrape(base: string): Promise<string> {
  return (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
}

function metric(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `))
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0
}

async function main(): Promise<number> {
  const o = parseArgs(
    process.argv.slice(2),
    { agents: 300, down: 120, warmup: 30, after: 180, movingStatements: 30, serveCmd: '' },
    {
      agents: [1, 2000],
      down: [10, 900],
      warmup: [10, 600],
      after: [30, 900],
      movingStatements: [7, 200],
    },
  )
  const info = await machine()
  const { cmd, label } = serveCommand({ serveCmd: o.serveCmd } as FleetOptions)
  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-restart-'))
  const port = await freePort()
  const env: Record<string, string> = {
    ...(Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DBM_'))) as Record<
      string,
      string
    >),
    DBM_LISTEN: `127.0.0.1:${port}`,
    DBM_DATA_DIR: join(dir, 'serve'),
    DBM_LOG_LEVEL: 'info',
    DBM_PUBLIC_URL: 'http://127.0.0.1',
    DBM_METRICS_TOKEN: METRICS_TOKEN,
    DBM_JWT_SECRET: Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url'),
  }
  let serve: ServeProcess | undefined
  let child: ReturnType<typeof Bun.spawn> | undefined
  try {
    serve = await startServe(cmd, env)
    const acct = await account(serve, Math.ceil(o.agents / 100))
    const startAt = Date.now() + 1_000
    const stopAt = startAt + o.warmup * 1000
    const input: ChildInput = {
      base: serve.base,
      apiKeys: acct.apiKeys,
      agents: o.agents,
      moving: o.movingStatements,
      startAt,
      collectUntil: stopAt + (o.down + o.after) * 1000,
      bufferDir: join(dir, 'buffers'),
      runId: crypto.randomUUID().slice(0, 8),
    }
    console.error(
      `${label} on ${serve.base}; ${o.agents} agents; warm-up ${o.warmup} s, serve down ${o.down} s, then ${o.after} s`,
    )
    child = Bun.spawn([process.execPath, import.meta.path], {
      env: { ...process.env, [CHILD_ENV]: JSON.stringify(input) },
      stdout: 'pipe',
      stderr: 'inherit',
    })
    const childOut = new Response(child.stdout as ReadableStream).text()

    await Bun.sleep(Math.max(0, stopAt - Date.now()))
    const loadBefore = loadLine()
    const beforeStop = await scrape(serve.base)
    const appliedFirst = metric(beforeStop, 'dbm_ingest_batches_total', 'result="applied"')
    const stoppedAt = Date.now()
    await serve.stop()
    console.error(
      `serve stopped at +${((stoppedAt - startAt) / 1000).toFixed(0)} s (${fmt(appliedFirst)} batches applied); down for ${o.down} s`,
    )
    await Bun.sleep(Math.max(0, stoppedAt + o.down * 1000 - Date.now()))
    const spawnedAt = Date.now()
    serve = await startServe(cmd, env)
    const readyAt = Date.now()
    console.error(`serve started again: /healthz 200 after ${readyAt - spawnedAt} ms`)
    let peakRssKb = 0
    const pid = serve.proc.pid
    const sampler = setInterval(() => {
      try {
        peakRssKb = Math.max(peakRssKb, procStat(pid).hwmKb)
      } catch {}
    }, 500)
    const cpuStart = procStat(pid).cpuMs
    const result = JSON.parse(await childOut) as ChildResult
    clearInterval(sampler)
    const cpuMs = procStat(pid).cpuMs - cpuStart
    const loadAfter = loadLine()
    const afterText = await scrape(serve.base)
    const shed = {
      backlog: metric(afterText, 'dbm_ingest_shed_total', 'kind="backlog"'),
      current: metric(afterText, 'dbm_ingest_shed_total', 'kind="current"'),
    }
    const appliedSecond = metric(afterText, 'dbm_ingest_batches_total', 'result="applied"')
    const duplicateSecond = metric(afterText, 'dbm_ingest_batches_total', 'result="duplicate"')
    await serve.stop()
    const store = new Database(join(dir, 'serve', 'dbm.sqlite'), { readonly: true })
    const stored = (store.query('SELECT COUNT(*) AS n FROM ingest_batches').get() as { n: number }).n
    const alerts = store.query('SELECT rule, COUNT(*) AS n FROM alerts GROUP BY rule').all() as {
      rule: string
      n: number
    }[]
    const silences = (store.query('SELECT COUNT(*) AS n FROM agent_silences').get() as { n: number }).n
    store.close()

    // ---- figures ----
    const posts = result.posts
    const acked = new Set(posts.filter((p) => p.status >= 200 && p.status < 300).map((p) => p.batchId))
    const sentIds = new Set(posts.map((p) => p.batchId))
    const gapBatches = new Set(
      posts.filter((p) => p.collectedAt >= stoppedAt && p.collectedAt < readyAt).map((p) => p.batchId),
    )
    const lastGapAck = Math.max(
      0,
      ...posts.filter((p) => gapBatches.has(p.batchId) && p.status >= 200 && p.status < 300).map((p) => p.at + p.ms),
    )
    const isCurrent = (p: Post) => p.age < BACKLOG_AGE_S
    console.log(`\n## Restart: ${o.agents} agents, serve down ${o.down} s`)
    console.log(
      `machine: ${info.line}; commit ${info.commit}; load ${loadBefore} before the stop, ${loadAfter} at the end`,
    )
    console.log(`command: bun bench/fleet-restart.ts ${process.argv.slice(2).join(' ')}; serve ${label}`)
    console.log(`restart: /healthz 200 ${readyAt - spawnedAt} ms after the spawn`)
    console.log(
      `catch-up: every batch collected while serve was down (${gapBatches.size}) acknowledged ${fmt((lastGapAck - readyAt) / 1000, 1)} s after the start`,
    )
    console.log(
      `exactly once: generated ${result.generated}, sent ${sentIds.size}, acknowledged ${acked.size}, stored ${stored} (applied ${fmt(appliedFirst)} before the stop + ${fmt(appliedSecond)} after), ` +
        `acknowledged as duplicates ${duplicateSecond}, lost ${result.lost}, dropped ${result.dropped}, left buffered ${result.leftBuffered}`,
    )
    console.log(
      `shed (503 + Retry-After): backlog ${shed.backlog}, current ${shed.current}; requests after the start ${posts.filter((p) => p.at >= readyAt).length}`,
    )
    console.log(
      `alerts opened: ${alerts.length === 0 ? 'none' : alerts.map((a) => `${a.rule} ${a.n}`).join(', ')}; agent silences recorded: ${silences}`,
    )
    console.log(
      `serve after the start: peak RSS ${fmt(peakRssKb / 1024)} MB (VmHWM), CPU ${fmt((cpuMs / Math.max(1, result.drainedAt - readyAt)) * 100)} % of a core`,
    )
    console.log('\n| s after start | current: n | p50 ms | p99 ms | max ms | backlog: n | p99 ms | 503 |')
    console.log('|---|---|---|---|---|---|---|---|')
    let metSince: number | null = null
    const end = result.drainedAt
    for (let from = readyAt, step = 0; from < end; from += STEP_MS, step++) {
      const inStep = posts.filter((p) => p.at >= from && p.at < from + STEP_MS && p.status !== 0)
      const current = inStep.filter((p) => isCurrent(p) && p.status !== 503).map((p) => p.ms)
      const backlog = inStep.filter((p) => !isCurrent(p) && p.status !== 503).map((p) => p.ms)
      const p99 = current.length ? percentile(current, 0.99) : null
      if (p99 !== null && p99 < GOAL.p99Ms) metSince ??= step * 10
      else if (p99 !== null) metSince = null
      console.log(
        `| ${step * 10}–${step * 10 + 10} | ${current.length} | ${current.length ? fmt(percentile(current, 0.5)) : '–'} | ${p99 === null ? '–' : fmt(p99)} | ${current.length ? fmt(Math.max(...current)) : '–'} | ` +
          `${backlog.length} | ${backlog.length ? fmt(percentile(backlog, 0.99)) : '–'} | ${inStep.filter((p) => p.status === 503).length} |`,
      )
    }
    console.log(
      `\ncurrent batches' p99 under ${GOAL.p99Ms} ms from ${metSince === null ? 'never' : `${metSince} s`} after the start (goal: within ${GOAL.withinS} s)`,
    )
    return 0
  } finally {
    if (child && child.exitCode === null) child.kill()
    await serve?.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.env[CHILD_ENV] && import.meta.main) {
  const result = await runChild(JSON.parse(process.env[CHILD_ENV]!) as ChildInput)
  process.stdout.write(JSON.stringify(result))
} else if (import.meta.main) {
  process.exitCode = await main()
}
