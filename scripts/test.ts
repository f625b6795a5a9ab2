// The test runner behind `bun run test` and `bun run test:unit`.
//
//   bun scripts/test.ts                 every test file: type check, dist/dbm built once, files in parallel
//   bun scripts/test.ts --unit          the unit tier: files that need no database, server, process or browser
//   bun scripts/test.ts test/api ...    only these files or folders
//   --workers N (default 3, or DBM_TEST_WORKERS)   --record (write test/timings.json from this run)
//   --no-typecheck, --no-lint   skip the type check (tsc) or the lint (biome check) that the whole run starts with
//
// Each long file runs in a `bun test` process of its own (test/setup.ts preloaded, 30 s test timeout), the
// short ones a few to a process, at most N processes at once, longest first by test/timings.json, so the
// long files start early and the short ones fill the gaps; the files that measure time run alone, last. The
// build of dist/dbm and the PostgreSQL templates are made once, before the files that need them start
// (DBM_TEST_BINARY_BUILT tells test/support/binary.ts not to build again). A failed file's output is
// printed whole; at the end the ten slowest files, then the line CI reads: `N passed, N failed, N skipped`.
// The exit code is non-zero on any failed test, any file that crashed or timed out, or when no test ran.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import type { Subprocess } from 'bun'

const repoRoot = join(import.meta.dir, '..')
const timingsPath = join(repoRoot, 'test', 'timings.json')

/** Files that must not share the machine: they measure time or saturate a core on purpose (see the report). */
const serialFiles = new Set<string>(['test/loop-lag.test.ts'])

/** What makes a test file more than a unit test: a real database, a server, a process or a browser. The
 * support modules here start one; the markers are the calls that do it without them. */
const heavySupport =
  /from '\.\.?\/(?:\.\.\/)*support\/(?:postgres|postgres-install|clickhouse|browser|binary|process|server|doctor|agent|batches|smtp|webhook|replica)\.ts'/
const heavyMarkers =
  /\b(?:Bun\.spawn|Bun\.spawnSync|Bun\.serve|Bun\.listen|child_process|node:net|node:http|startTestServer|createApp|openStore|new Worker)\b|\.\.\/(?:\.\.\/)?src\/cli\.ts/
const needsBinary = /support\/binary\.ts'/

const FILE_DEADLINE_MS = 10 * 60_000

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  allowPositionals: true,
  options: {
    unit: { type: 'boolean', default: false },
    workers: { type: 'string' },
    record: { type: 'boolean', default: false },
    'no-typecheck': { type: 'boolean', default: false },
    'no-lint': { type: 'boolean', default: false },
  },
})

const workers = Math.max(1, Number(values.workers ?? process.env.DBM_TEST_WORKERS ?? 3))
if (!Number.isInteger(workers)) {
  console.error(`--workers: a whole number, not ${values.workers}`)
  process.exit(2)
}

function testFilesUnder(path: string): string[] {
  const full = join(repoRoot, path)
  if (!existsSync(full)) {
    console.error(`no such file or folder: ${path}`)
    process.exit(2)
  }
  if (statSync(full).isFile()) return [relative(repoRoot, full)]
  return readdirSync(full, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) => relative(repoRoot, join(full, name)))
}

/** A unit test file: it imports none of the support modules that start something and starts nothing itself. */
export function isUnitFile(source: string): boolean {
  return !heavySupport.test(source) && !heavyMarkers.test(source)
}

const sources = new Map<string, string>()
const sourceOf = (file: string) =>
  sources.get(file) ?? sources.set(file, readFileSync(join(repoRoot, file), 'utf8')).get(file)!

let files = [...new Set((positionals.length ? positionals : ['test']).flatMap(testFilesUnder))].sort()
if (values.unit) files = files.filter((f) => isUnitFile(sourceOf(f)))
if (files.length === 0) {
  console.error('no test files')
  process.exit(1)
}

// The matrix narrowing is read (and, under CI, refused) here too, before anything starts.
const { testedMajors, testedStoreKinds, allMajors, allStoreKinds } = await import('../test/support/matrix.ts').catch(
  (e: Error) => {
    console.error(e.message)
    process.exit(2)
  },
)

const timings: Record<string, number> = existsSync(timingsPath) ? JSON.parse(readFileSync(timingsPath, 'utf8')) : {}
const known = Object.values(timings)
// A file without a recorded time (a new one) is assumed long, so it starts early rather than last.
const unknownEstimate = known.length ? Math.max(...known) : 60
const estimate = (file: string) => timings[file] ?? unknownEstimate

const started = performance.now()
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
const elapsed = () => seconds(performance.now() - started)

interface Outcome {
  file: string
  ms: number
  pass: number
  fail: number
  skip: number
  /** Why the file failed beyond its failed tests: it crashed, timed out, or ran no test. */
  problem?: string
}
const outcomes: Outcome[] = []
const children = new Set<Subprocess>()

function stopAll(signal: NodeJS.Signals) {
  for (const child of children) child.kill(signal)
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    stopAll('SIGTERM')
    process.exit(130)
  })
}

async function runStep(name: string, cmd: string[]): Promise<{ ok: boolean; output: string; ms: number }> {
  const t0 = performance.now()
  const proc = Bun.spawn(cmd, { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe', stdin: 'ignore' })
  children.add(proc)
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  const code = await proc.exited
  children.delete(proc)
  const ms = performance.now() - t0
  if (code !== 0) console.log(`\n✗ ${name} failed (exit ${code}) after ${seconds(ms)}:\n${out}${err}`)
  else console.log(`✓ ${name} (${seconds(ms)})`)
  return { ok: code === 0, output: out + err, ms }
}

const count = (output: string, word: string) => Number(output.match(new RegExp(`^\\s*(\\d+) ${word}$`, 'm'))?.[1] ?? 0)

/** One `bun test` process with `args` (30 s test timeout), killed at FILE_DEADLINE_MS: its output (stdout then stderr), exit and whether it was killed. */
async function bunTest(args: string[], env: Record<string, string>) {
  const proc = Bun.spawn(['bun', 'test', '--timeout', '30000', ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdout: 'pipe',
    stderr: 'pipe',
    stdin: 'ignore',
  })
  children.add(proc)
  let timedOut = false
  const deadline = setTimeout(() => {
    timedOut = true
    proc.kill('SIGKILL')
  }, FILE_DEADLINE_MS)
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  const code = (await proc.exited) ?? proc.signalCode
  clearTimeout(deadline)
  children.delete(proc)
  return { output: out + err, code, timedOut }
}

async function runFile(file: string, env: Record<string, string>): Promise<void> {
  const t0 = performance.now()
  const { output, code, timedOut } = await bunTest([file], env)
  const outcome: Outcome = {
    file,
    ms: performance.now() - t0,
    pass: count(output, 'pass'),
    // An error outside any test (bun's "N errors") fails the file as a test would.
    fail: count(output, 'fail') + count(output, 'errors?'),
    skip: count(output, 'skip'),
  }
  if (timedOut) outcome.problem = `killed after ${seconds(FILE_DEADLINE_MS)}`
  else if (code !== 0 && outcome.fail === 0) outcome.problem = `exited ${code} without a failed test (a crash)`
  else if (outcome.pass + outcome.fail + outcome.skip === 0) outcome.problem = 'ran no test'
  outcomes.push(outcome)
  const bad = outcome.fail > 0 || outcome.problem !== undefined
  const counts = `${outcome.pass} pass${outcome.fail ? `, ${outcome.fail} fail` : ''}${outcome.skip ? `, ${outcome.skip} skip` : ''}`
  console.log(
    `${bad ? '✗' : '✓'} ${file} ${seconds(outcome.ms)} (${counts}${outcome.problem ? `; ${outcome.problem}` : ''}) [${elapsed()}]`,
  )
  if (bad) console.log(`----- output of ${file} -----\n${output.trimEnd()}\n----- end of ${file} -----`)
}

/** One run of `bun test`: a file of its own, or several short ones together (see runTogether). */
type Job = { file: string } | { group: string[]; label: string }

const usesBrowser = /support\/browser\.ts'/
/** Whether the job drives Chromium: at most one such job runs at a time (each starts a browser, the
 * hungriest process of the suite, and their waits for a page are the first to run out on a busy machine). */
const browserJob = (job: Job) => ('file' in job ? [job.file] : job.group).some((f) => usesBrowser.test(sourceOf(f)))

/** Runs `queue` on `slots` parallel workers, each taking the first job it may start; `gate(file)` may hold a file back. */
async function runQueue(
  queue: Job[],
  slots: number,
  env: Record<string, string>,
  gate: (file: string) => Promise<void>,
) {
  let browserBusy = false
  let released: () => void = () => {}
  let release = new Promise<void>((r) => (released = r))
  const next = async (): Promise<Job | undefined> => {
    for (;;) {
      if (queue.length === 0) return undefined
      const at = queue.findIndex((job) => !browserBusy || !browserJob(job))
      if (at >= 0) return queue.splice(at, 1)[0]
      await release
    }
  }
  await Promise.all(
    Array.from({ length: Math.min(slots, queue.length) }, async () => {
      for (let job = await next(); job; job = await next()) {
        const browser = browserJob(job)
        if (browser) browserBusy = true
        try {
          if ('group' in job) {
            for (const file of job.group) await gate(file)
            await runTogether(job.group, job.label, env)
          } else {
            await gate(job.file)
            await runFile(job.file, env)
          }
        } finally {
          if (browser) {
            browserBusy = false
            released()
            release = new Promise<void>((r) => (released = r))
          }
        }
      }
    }),
  )
}

console.log(
  `${values.unit ? 'unit tier' : 'tests'}: ${files.length} files, ${workers} workers, ${availableParallelism()} cores` +
    (testedMajors.length < allMajors.length ? `; PostgreSQL ${testedMajors.join(', ')} only (DBM_TEST_PG)` : '') +
    (testedStoreKinds.length < allStoreKinds.length
      ? `; ${testedStoreKinds.join(', ')} store only (DBM_TEST_STORES)`
      : ''),
)

const steps: Promise<{ ok: boolean }>[] = []
const env: Record<string, string> = {}
let binaryReady: Promise<unknown> = Promise.resolve()
let postgresReady: Promise<unknown> = Promise.resolve()
if (!values.unit) {
  if (!values['no-typecheck']) steps.push(runStep('type check (tsc)', ['bunx', 'tsc', '--noEmit', '-p', '.']))
  if (!values['no-lint']) steps.push(runStep('lint (biome)', ['bunx', 'biome', 'check', '.']))
  if (files.some((f) => needsBinary.test(sourceOf(f)))) {
    const build = runStep('build dist/dbm once', ['bun', 'run', 'build'])
    steps.push(build)
    binaryReady = build
    env.DBM_TEST_BINARY_BUILT = '1'
  }
  const { preparePostgres } = await import('../test/support/postgres-install.ts')
  const t0 = performance.now()
  postgresReady = preparePostgres(testedMajors).then(
    () =>
      console.log(
        `✓ PostgreSQL ${testedMajors.join(', ')} binaries and templates (${seconds(performance.now() - t0)})`,
      ),
    (e: Error) =>
      console.log(`✗ PostgreSQL binaries and templates: ${e.message} (each file will try again and say why)`),
  )
}

const byLength = (a: string, b: string) => estimate(b) - estimate(a) || a.localeCompare(b)
// Short files run several to a process: alone, each would spend more time starting (bun, the modules
// under test, a PostgreSQL server for the postgres store) than testing. The unit files make one group;
// the other short ones, in path order (a folder's files share what they start), groups of about
// GROUP_SECONDS. A group is scheduled like one file as long as its files together.
const SHORT_SECONDS = 8
const GROUP_SECONDS = 25
const parallelFiles = files.filter((f) => !serialFiles.has(f))
const unitGroup = parallelFiles.filter((f) => isUnitFile(sourceOf(f)))
const short = parallelFiles.filter((f) => !unitGroup.includes(f) && estimate(f) < SHORT_SECONDS)
const jobs: Job[] = parallelFiles.filter((f) => !unitGroup.includes(f) && !short.includes(f)).map((file) => ({ file }))
if (unitGroup.length) jobs.push({ group: unitGroup, label: `${unitGroup.length} unit files` })
for (let i = 0, n = 1; i < short.length; n++) {
  const group: string[] = []
  for (let sum = 0; i < short.length && (group.length === 0 || sum + estimate(short[i]!) <= GROUP_SECONDS); i++) {
    sum += estimate(short[i]!)
    group.push(short[i]!)
  }
  jobs.push(
    group.length === 1
      ? { file: group[0]! }
      : { group, label: `group ${n} (${group.length} short files, ${relative('test', group[0]!)} ...)` },
  )
}
const jobLength = (job: Job) => ('file' in job ? estimate(job.file) : job.group.reduce((t, f) => t + estimate(f), 0))
const parallel = jobs.sort((x, y) => jobLength(y) - jobLength(x))
const serial: Job[] = files
  .filter((f) => serialFiles.has(f))
  .sort(byLength)
  .map((file) => ({ file }))
let buildFailed = false
const gate = async (file: string) => {
  await postgresReady
  if (needsBinary.test(sourceOf(file))) {
    const result = (await binaryReady) as { ok?: boolean } | undefined
    if (result && result.ok === false) buildFailed = true
  }
}

if (values.unit) await runTogether(files, `${files.length} unit files`, env)
else {
  await runQueue(parallel, workers, env, gate)
  await runQueue(serial, 1, env, gate)
}
const stepResults = await Promise.all(steps)

/** Runs `list` in one `bun test` process, one file after another. Per-file times and counts come from bun's
 * JUnit report; its summary decides: a total the report does not account for (an error outside any test,
 * a crash) fails the group. The output is printed whole when anything failed. */
async function runTogether(list: string[], label: string, env: Record<string, string>) {
  const t0 = performance.now()
  const report = join(tmpdir(), `dbm-tests-${process.pid}-${Math.random().toString(36).slice(2, 8)}.xml`)
  const { output, code, timedOut } = await bunTest(['--reporter=junit', `--reporter-outfile=${report}`, ...list], env)
  const xml = existsSync(report) ? readFileSync(report, 'utf8') : ''
  rmSync(report, { force: true })
  const found: Outcome[] = []
  for (const m of xml.matchAll(
    /^ {2}<testsuite name="[^"]*" file="([^"]+)" tests="(\d+)" assertions="\d+" failures="(\d+)" skipped="(\d+)" time="([\d.]+)"/gm,
  )) {
    const [, file, tests, failures, skipped, time] = m
    found.push({
      file: file!,
      ms: Number(time) * 1000,
      pass: Number(tests) - Number(failures) - Number(skipped),
      fail: Number(failures),
      skip: Number(skipped),
    })
  }
  const summary = {
    pass: count(output, 'pass'),
    fail: count(output, 'fail') + count(output, 'errors?'),
    skip: count(output, 'skip'),
  }
  const listed = found.reduce((t, o) => ({ pass: t.pass + o.pass, fail: t.fail + o.fail, skip: t.skip + o.skip }), {
    pass: 0,
    fail: 0,
    skip: 0,
  })
  const accounted = listed.pass === summary.pass && listed.fail === summary.fail && listed.skip === summary.skip
  outcomes.push(...found)
  let problem: string | undefined
  if (timedOut) problem = `killed after ${seconds(FILE_DEADLINE_MS)}`
  else if (!accounted)
    problem = `bun counted ${summary.pass} pass, ${summary.fail} fail (errors included), ${summary.skip} skip; its report ${listed.pass}, ${listed.fail}, ${listed.skip}`
  else if (code !== 0 && summary.fail === 0) problem = `exited ${code} without a failed test (a crash)`
  else if (summary.pass + summary.fail + summary.skip === 0) problem = 'ran no test'
  // The group's own entry carries what the report does not: the difference to bun's summary, and why.
  if (problem) {
    outcomes.push({
      file: label,
      ms: 0,
      pass: Math.max(0, summary.pass - listed.pass),
      fail: Math.max(0, summary.fail - listed.fail),
      skip: Math.max(0, summary.skip - listed.skip),
      problem,
    })
  }
  const bad = summary.fail > 0 || problem !== undefined
  const counts = `${summary.pass} pass${summary.fail ? `, ${summary.fail} fail` : ''}${summary.skip ? `, ${summary.skip} skip` : ''}`
  console.log(
    `${bad ? '✗' : '✓'} ${label} ${seconds(performance.now() - t0)} (${counts}${problem ? `; ${problem}` : ''}) [${elapsed()}]`,
  )
  if (bad) console.log(`----- output of ${label} -----\n${output.trimEnd()}\n----- end of ${label} -----`)
}

const total = outcomes.reduce((t, o) => ({ pass: t.pass + o.pass, fail: t.fail + o.fail, skip: t.skip + o.skip }), {
  pass: 0,
  fail: 0,
  skip: 0,
})
const broken = outcomes.filter((o) => o.problem)
const failedSteps = stepResults.filter((r) => !r.ok).length

console.log('\nslowest files:')
for (const o of outcomes
  .filter((o) => files.includes(o.file))
  .sort((a, b) => b.ms - a.ms)
  .slice(0, 10))
  console.log(`  ${seconds(o.ms).padStart(8)}  ${o.file}`)
console.log(
  `\nwall time ${elapsed()}; ${files.length} files; ${broken.length} crashed, timed out or miscounted; ${failedSteps} failed steps`,
)
if (buildFailed) console.log('the build of dist/dbm failed: the end-to-end files failed with it')

if (values.record) {
  const recorded = { ...timings }
  for (const o of outcomes)
    if (files.includes(o.file) && !o.problem && o.fail === 0) recorded[o.file] = Math.round(o.ms / 100) / 10
  const sorted = Object.fromEntries(
    Object.entries(recorded)
      .filter(([f]) => existsSync(join(repoRoot, f)))
      .sort(([a], [b]) => a.localeCompare(b)),
  )
  writeFileSync(timingsPath, `${JSON.stringify(sorted, null, 2)}\n`)
  console.log(`recorded the files' times in ${relative(repoRoot, timingsPath)}`)
}

// Every file's counts and time, for comparing runs (test-artifacts/ is git-ignored).
mkdirSync(join(repoRoot, 'test-artifacts'), { recursive: true })
writeFileSync(
  join(repoRoot, 'test-artifacts', 'test-run.json'),
  `${JSON.stringify({ seconds: Math.round(performance.now() - started) / 1000, outcomes }, null, 1)}\n`,
)

// A crashed or miscounted file or group is one failure, unless its failed tests already count.
const failed = total.fail + broken.filter((o) => o.fail === 0).length + failedSteps
console.log(`${total.pass} passed, ${failed} failed${total.skip ? `, ${total.skip} skipped` : ''}`)
process.exit(failed > 0 || total.pass === 0 ? 1 : 0)
