// API throughput benchmark (`bun run bench:api`): the real app (createApp) over a fresh SQLite store,
// plus one unauthenticated `GET /bench/hello`, on 127.0.0.1. Compares the authenticated
// `GET /api/v1/databases` (X-API-Key) against hello at the same concurrency, alternating the two for a
// few rounds, and prints a Markdown block for bench/RESULTS.md with the median req/s of each and the
// ratio databases/hello. Load comes from `wrk` when installed (its own process), else from an
// in-process fetch loop. Options: --duration S, --warmup S, --threads N, --connections N,
// --rounds N, --generator auto|wrk|fetch.
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { call, median, startServer } from './common.ts'

const GOAL_RATIO = 0.6

interface Options {
  durationS: number
  warmupS: number
  threads: number
  connections: number
  rounds: number
  generator: 'auto' | 'wrk' | 'fetch'
}

function parseOptions(argv: string[]): Options {
  const o: Options = { durationS: 10, warmupS: 2, threads: 2, connections: 32, rounds: 3, generator: 'auto' }
  const int = (flag: string, value: string | undefined, min: number, max: number) => {
    const n = Number(value)
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${flag} must be an integer from ${min} to ${max}`)
    return n
  }
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!
    const value = argv[++i]
    if (flag === '--duration') o.durationS = int(flag, value, 1, 300)
    else if (flag === '--warmup') o.warmupS = int(flag, value, 0, 60)
    else if (flag === '--threads') o.threads = int(flag, value, 1, 64)
    else if (flag === '--connections') o.connections = int(flag, value, 1, 1024)
    else if (flag === '--rounds') o.rounds = int(flag, value, 1, 20)
    else if (flag === '--generator' && (value === 'auto' || value === 'wrk' || value === 'fetch')) o.generator = value
    else throw new Error(`unknown option or bad value: ${flag} ${value ?? ''}`.trim())
  }
  if (o.connections < o.threads) throw new Error('--connections must be at least --threads')
  return o
}

interface Target {
  name: 'hello' | 'databases'
  path: string
  headers: Record<string, string>
}

interface Sample {
  target: Target['name']
  round: number
  rps: number
  requests: number
  /** Non-2xx responses plus socket errors; a run with any is reported. */
  errors: number
  p50Ms?: number
  p99Ms?: number
}

// ---- load generators ----

function wrkDuration(text: string): number | undefined {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim())
  if (!m) return undefined
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[m[2] as 'us' | 'ms' | 's' | 'm']
  return Number(m[1]) * scale
}

async function runWrk(
  base: string,
  target: Target,
  seconds: number,
  o: Options,
): Promise<Omit<Sample, 'target' | 'round'>> {
  const args = ['wrk', `-t${o.threads}`, `-c${o.connections}`, `-d${seconds}s`, '--timeout', '5s', '--latency']
  for (const [k, v] of Object.entries(target.headers)) args.push('-H', `${k}: ${v}`)
  args.push(base + target.path)
  const proc = Bun.spawn(args, { stdout: 'pipe', stderr: 'pipe' })
  const killer = setTimeout(() => proc.kill(), (seconds + 30) * 1000)
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  clearTimeout(killer)
  if (code !== 0) throw new Error(`wrk exited with ${code}: ${err.trim() || out.trim()}`)
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1])
  const requests = Number(/(\d+) requests in/.exec(out)?.[1])
  if (!Number.isFinite(rps) || !Number.isFinite(requests)) throw new Error(`cannot read wrk output:\n${out}`)
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0)
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  const socketErrors = socket ? socket.slice(1).reduce((a, b) => a + Number(b), 0) : 0
  const p50 = /^\s+50%\s+(\S+)/m.exec(out)?.[1]
  const p99 = /^\s+99%\s+(\S+)/m.exec(out)?.[1]
  return {
    rps,
    requests,
    errors: non2xx + socketErrors,
    p50Ms: p50 ? wrkDuration(p50) : undefined,
    p99Ms: p99 ? wrkDuration(p99) : undefined,
  }
}

/** `connections` concurrent workers each sending one request at a time until the deadline. */
async function runFetch(
  base: string,
  target: Target,
  seconds: number,
  o: Options,
): Promise<Omit<Sample, 'target' | 'round'>> {
  const url = base + target.path
  const started = performance.now()
  const deadline = started + seconds * 1000
  const latencies: number[] = []
  let errors = 0
  const worker = async () => {
    while (performance.now() < deadline) {
      const t0 = performance.now()
      try {
        const res = await fetch(url, { headers: target.headers, signal: AbortSignal.timeout(5000) })
        await res.arrayBuffer()
        if (res.status !== 200) errors++
      } catch {
        errors++
      }
      latencies.push(performance.now() - t0)
    }
  }
  await Promise.all(Array.from({ length: o.connections }, worker))
  const elapsedS = (performance.now() - started) / 1000
  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]
  return { rps: latencies.length / elapsedS, requests: latencies.length, errors, p50Ms: at(0.5), p99Ms: at(0.99) }
}

/** Account, organization, API key and one registered database, all through the API. */
async function seed(base: string): Promise<string> {
  const signup = await call(
    base,
    'POST',
    '/api/v1/auth/signup',
    {},
    {
      email: 'bench@example.com',
      password: 'bench password 0123',
      name: 'Bench',
      org_name: 'Bench Org',
    },
  )
  if (signup.status !== 201) throw new Error(`signup: ${signup.status} ${signup.text}`)
  const token = signup.json().access_token as string
  const key = await call(base, 'POST', '/api/v1/api-keys', { authorization: `Bearer ${token}` }, { name: 'bench' })
  if (key.status !== 201) throw new Error(`api key: ${key.status} ${key.text}`)
  const apiKey = key.json().key as string
  const db = await call(
    base,
    'POST',
    '/api/v1/databases',
    { 'x-api-key': apiKey },
    {
      name: 'bench-pg',
      engine: 'postgres',
      host: 'db.bench.invalid',
    },
  )
  if (db.status !== 201) throw new Error(`database: ${db.status} ${db.text}`)
  return apiKey
}

async function checkTargets(base: string, targets: Target[]) {
  for (const t of targets) {
    const res = await call(base, 'GET', t.path, t.headers)
    const ok = t.name === 'hello' ? res.text === 'hello' : res.status === 200 && res.json().length === 1
    if (res.status !== 200 || !ok)
      throw new Error(`${t.path}: unexpected answer ${res.status} ${res.text.slice(0, 200)}`)
  }
}

// ---- report ----

const fmt = (n: number | undefined, digits = 0) =>
  n === undefined ? 'n/a' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

async function machine() {
  const bun = Bun.version
  const cpu = cpus()[0]?.model?.trim() ?? 'unknown cpu'
  const nproc = (await Bun.$`nproc`.nothrow().quiet().text()).trim() || String(cpus().length)
  let wrk: string | undefined
  if (Bun.which('wrk'))
    wrk = (await Bun.$`wrk --version`.nothrow().quiet().text()).split('\n')[0]?.split(' [')[0]?.trim()
  const head = (await Bun.$`git rev-parse --short HEAD`.nothrow().quiet().text()).trim()
  const dirty = (await Bun.$`git status --porcelain --untracked-files=no`.nothrow().quiet().text()).trim() !== ''
  const commit = head ? `${head}${dirty ? ' (with uncommitted changes)' : ''}` : 'unknown'
  return { bun, cpu, nproc, wrk, commit, os: `${process.platform}-${process.arch}` }
}

function report(
  samples: Sample[],
  o: Options,
  generator: 'wrk' | 'fetch',
  fallbackReason: string,
  m: Awaited<ReturnType<typeof machine>>,
) {
  const of = (name: Target['name']) => samples.filter((s) => s.target === name)
  const hello = median(of('hello').map((s) => s.rps))
  const databases = median(of('databases').map((s) => s.rps))
  const ratio = databases / hello
  const command = ['bun run bench:api', ...process.argv.slice(2)].join(' ')
  const generatorLine =
    generator === 'wrk'
      ? `${m.wrk ?? 'wrk'} (separate process), ${o.threads} threads, ${o.connections} connections`
      : `in-process fetch loop (${fallbackReason}), ${o.connections} concurrent workers sharing the server's event loop (not comparable with wrk numbers)`
  const lines = [
    `### ${new Date().toISOString().slice(0, 10)}: authenticated list vs. bare route (SQLite store)`,
    ``,
    `- Command: \`${command}\``,
    `- Commit: ${m.commit}`,
    `- Machine: ${m.nproc} CPUs (nproc), ${m.cpu}, ${m.os}, bun ${m.bun}; server and load generator share the machine`,
    `- Load generator: ${generatorLine}`,
    `- Method: ${o.durationS} s per run ${o.warmupS > 0 ? `after a ${o.warmupS} s warm-up` : 'without warm-up'}, alternating hello / databases, ${o.rounds} round${o.rounds === 1 ? '' : 's'}; median of the rounds`,
    `- Routes: \`GET /bench/hello\` (text \`hello\`, no auth) vs. \`GET /api/v1/databases\` with \`X-API-Key\` (1 registered database)`,
    ``,
    `| round | route | req/s | p50 ms | p99 ms | errors |`,
    `|---:|---|---:|---:|---:|---:|`,
    ...samples.map(
      (s) => `| ${s.round} | ${s.target} | ${fmt(s.rps)} | ${fmt(s.p50Ms, 2)} | ${fmt(s.p99Ms, 2)} | ${s.errors} |`,
    ),
    ``,
    `| route | median req/s |`,
    `|---|---:|`,
    `| \`GET /bench/hello\` | ${fmt(hello)} |`,
    `| \`GET /api/v1/databases\` | ${fmt(databases)} |`,
    `| **ratio databases/hello** | **${fmt(ratio, 2)}** (goal ≥ ${GOAL_RATIO}: ${ratio >= GOAL_RATIO ? 'met' : 'not met'}) |`,
  ]
  return { markdown: lines.join('\n'), ratio }
}

// ---- main ----

async function main(): Promise<number> {
  const o = parseOptions(process.argv.slice(2))
  const hasWrk = Bun.which('wrk') !== null
  if (o.generator === 'wrk' && !hasWrk)
    throw new Error('--generator wrk: wrk is not installed (apt-get install -y wrk)')
  const generator: 'wrk' | 'fetch' = o.generator === 'fetch' || !hasWrk ? 'fetch' : 'wrk'
  const run = generator === 'wrk' ? runWrk : runFetch
  const fallbackReason = o.generator === 'fetch' ? 'chosen with --generator fetch' : 'wrk not installed'
  console.error(`load generator: ${generator === 'wrk' ? 'wrk' : `in-process fetch loop (${fallbackReason})`}`)

  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-bench-'))
  const server = await startServer({ dataDir, routes: (app) => app.get('/bench/hello', () => 'hello') })
  try {
    const apiKey = await seed(server.base)
    const targets: Target[] = [
      { name: 'hello', path: '/bench/hello', headers: {} },
      { name: 'databases', path: '/api/v1/databases', headers: { 'X-API-Key': apiKey } },
    ]
    await checkTargets(server.base, targets)
    const samples: Sample[] = []
    for (let round = 1; round <= o.rounds; round++) {
      for (const target of targets) {
        if (o.warmupS > 0) await run(server.base, target, o.warmupS, o)
        const result = await run(server.base, target, o.durationS, o)
        samples.push({ target: target.name, round, ...result })
        console.error(`round ${round} ${target.name}: ${fmt(result.rps)} req/s, errors ${result.errors}`)
      }
    }
    await checkTargets(server.base, targets)
    const { markdown, ratio } = report(samples, o, generator, fallbackReason, await machine())
    console.log(markdown)
    const errors = samples.reduce((a, s) => a + s.errors, 0)
    if (errors > 0) console.error(`warning: ${errors} failed requests during the runs; the numbers are suspect`)
    if (ratio < GOAL_RATIO) console.error(`ratio ${ratio.toFixed(2)} is below the goal of ${GOAL_RATIO}`)
    return errors > 0 ? 1 : 0
  } finally {
    await server.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

try {
  process.exitCode = await main()
} catch (e) {
  console.error(`bench:api: ${(e as Error).message}`)
  process.exitCode = 1
}
