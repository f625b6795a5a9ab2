// Cost of response validation on a big answer (`bun bench/response-validation.ts`): GET /queries with
// limit=100 (its most) over a database of `--statements` statements (seeded as bench/queries.ts seeds
// them, over `--hours` hours before now, on the SQLite store), answered in-process by app.handle from
// two apps over the same store: the real one, whose route checks its answer against QueryStats
// (src/shared/api/queries.ts), and one built while `t.Array(QueryStats)` gave `t.Any()` instead, the
// same route otherwise. Runs alternate between the two after a warm-up; medians and their ratio. Since
// the route's time varies with the machine's load by more than a check costs, the check alone is timed
// too: Elysia's validator of t.Array(QueryStats) on the parsed answer, 1,000 times.
// Options: --statements N, --hours N, --runs N, --limit N.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { t } from 'elysia'
import { getSchemaValidator } from 'elysia/schema'
import { createApp } from '../src/server/app.ts'
import { QueryStats } from '../src/shared/api/queries.ts'
import { benchDeps, call, createAccount, fmt, loadLine, machine, median, parseArgs, startServer } from './common.ts'
import { seed } from './queries.ts'

const HOUR = 3_600_000

interface Options {
  statements: number
  hours: number
  runs: number
  limit: number
}

/** The app with /queries' list answer unchecked: t.Array(QueryStats) gives t.Any() while the routes are built. */
function appWithoutListSchema(deps: ReturnType<typeof benchDeps>) {
  const array = t.Array
  let swapped = 0
  t.Array = ((schema: Parameters<typeof array>[0], options?: Parameters<typeof array>[1]) => {
    if (schema !== QueryStats) return array(schema, options)
    swapped++
    return t.Any()
  }) as typeof array
  try {
    const app = createApp(deps)
    if (swapped !== 1) throw new Error(`expected to replace one schema, replaced ${swapped}`)
    return app
  } finally {
    t.Array = array
  }
}

async function main() {
  const o = parseArgs<Options>(
    process.argv.slice(2),
    { statements: 10_000, hours: 3, runs: 20, limit: 100 },
    {
      statements: [100, 20_000],
      hours: [1, 24],
      runs: [1, 1000],
      limit: [1, 100],
    },
  )
  const loadBefore = loadLine()
  const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-validation-'))
  const server = await startServer({ dataDir: dir })
  try {
    const { apiKey } = await createAccount(server)
    const db = await call(
      server.base,
      'POST',
      '/api/v1/databases',
      { 'x-api-key': apiKey },
      { name: 'bench-pg', engine: 'postgres', host: 'db.bench.invalid' },
    )
    if (db.status !== 201) throw new Error(`database: ${db.status} ${db.text}`)
    const databaseId = db.json().id as string
    const end = Date.now()
    const t0 = performance.now()
    const { minuteRows } = await seed(server.store.driver, databaseId, o.statements, end, o.hours * HOUR)
    console.error(`seeded ${fmt(minuteRows)} minute rows in ${((performance.now() - t0) / 1000).toFixed(1)} s`)

    const deps = benchDeps(server.store)
    const checked = createApp(deps)
    const unchecked = appWithoutListSchema(deps)
    const url = `http://localhost/api/v1/databases/${databaseId}/queries?limit=${o.limit}`
    const request = () => new Request(url, { headers: { 'x-api-key': apiKey } })
    const time = async (app: ReturnType<typeof createApp>) => {
      const started = performance.now()
      const res = await app.handle(request())
      const body = await res.text()
      const ms = performance.now() - started
      if (res.status !== 200) throw new Error(`${res.status} ${body.slice(0, 200)}`)
      return { ms, body }
    }
    // Warm-up (compiles each route's handler and validator); both answer the same bytes.
    let bytes = 0
    for (let i = 0; i < 5; i++) {
      const [a, b] = [await time(checked), await time(unchecked)]
      if (a.body !== b.body) throw new Error('the two apps answered differently')
      bytes = a.body.length
    }
    const withSchema: number[] = []
    const without: number[] = []
    for (let i = 0; i < o.runs; i++) {
      // Alternate which goes first, so that neither always follows the other.
      if (i % 2 === 0) {
        withSchema.push((await time(checked)).ms)
        without.push((await time(unchecked)).ms)
      } else {
        without.push((await time(unchecked)).ms)
        withSchema.push((await time(checked)).ms)
      }
    }
    // The check alone, as Elysia builds it for a response (normalize off, extra fields refused).
    const checker = getSchemaValidator(t.Array(QueryStats), { modules: t.Module({}), normalize: false })!
    const answer = JSON.parse((await time(checked)).body)
    if (!checker.Check(answer)) throw new Error('the answer does not pass its schema')
    const checks = 1000
    const checkStarted = performance.now()
    for (let i = 0; i < checks; i++) checker.Check(answer)
    const checkMs = (performance.now() - checkStarted) / checks
    const a = median(withSchema)
    const b = median(without)
    const m = await machine()
    console.log(
      [
        `### ${new Date().toISOString().slice(0, 10)}: response validation of GET /queries (limit ${o.limit}, ${fmt(o.statements)} statements)`,
        ``,
        `- Command: \`${['bun bench/response-validation.ts', ...process.argv.slice(2)].join(' ')}\``,
        `- Commit: ${m.commit}`,
        `- Machine: ${m.line}; load average at start ${loadBefore}, at end ${loadLine()}`,
        `- Data: SQLite store, ${fmt(o.statements)} statements over the last ${o.hours} h (${fmt(minuteRows)} minute rows, seeded as bench/queries.ts does); the answer is ${fmt(bytes)} bytes`,
        `- ${o.runs} runs each, alternating, in-process (app.handle), after 5 warm-up runs each`,
        ``,
        `| | median ms | min ms | max ms |`,
        `|---|---:|---:|---:|`,
        `| with the response schema | ${a.toFixed(2)} | ${Math.min(...withSchema).toFixed(2)} | ${Math.max(...withSchema).toFixed(2)} |`,
        `| without | ${b.toFixed(2)} | ${Math.min(...without).toFixed(2)} | ${Math.max(...without).toFixed(2)} |`,
        ``,
        `Difference of the medians: ${(a - b).toFixed(2)} ms, ${(((a - b) / b) * 100).toFixed(1)} % of the route's time without the schema.`,
        `The check alone: ${(checkMs * 1000).toFixed(1)} µs per answer (mean of ${fmt(checks)}), ${((checkMs / b) * 100).toFixed(3)} % of the route's median time without the schema.`,
      ].join('\n'),
    )
  } finally {
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
