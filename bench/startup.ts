// Start-up benchmark (`bun bench/startup.ts`): the time from spawning `dbm serve` to its first 200 on
// GET /healthz, on a fresh data directory (the store created and migrated) and on an existing one (the
// schema current), alternating, `--runs` times each; reports the median and the spread. The server
// listens on a loopback port the OS assigned (probed once per run); /healthz is asked every millisecond
// from the spawn on, so the figure includes the process's own start (the binary's runtime, the
// imports), opening the store and the first request. Goal (issue 13): median at most 50 ms with dist/dbm.
// Options: --runs N (default 15), --serve-cmd "COMMAND" (default dist/dbm when built, else `bun src/cli.ts`).
// --serve-cmd may be given several times (say a copy of the previous binary and dist/dbm): the commands
// then take turns within each run, so all of them see the same machine load, and each gets its own rows.
// --floor adds the floor of this method on this machine as one more command taking turns: a compiled
// binary (same build flags as dist/dbm) that parses the same arguments, opens a SQLite file in WAL mode,
// listens and answers /healthz with one query, and nothing else: the runtime's own start, the spawn and
// the polling.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../test/support/postgres.ts'
import { fmt, loadLine, machine, median, parseArgs } from './common.ts'

const GOAL_MS = 50

const argv = process.argv.slice(2)
const serveCmds: string[][] = []
for (let at = argv.indexOf('--serve-cmd'); at >= 0; at = argv.indexOf('--serve-cmd')) {
  const command = argv.splice(at, 2)[1]
  if (!command) throw new Error('--serve-cmd: expected a command')
  serveCmds.push(command.split(' '))
}
if (serveCmds.length === 0) serveCmds.push(existsSync('dist/dbm') ? ['dist/dbm'] : ['bun', 'src/cli.ts'])
const floorAt = argv.indexOf('--floor')
if (floorAt >= 0) argv.splice(floorAt, 1)
const options = parseArgs(argv, { runs: 15 }, { runs: [1, 200] })

const FLOOR_SOURCE = `import { Database } from 'bun:sqlite'
import { mkdirSync } from 'node:fs'
const args = process.argv.slice(3)
const [hostname, port] = args[args.indexOf('--listen') + 1].split(':')
const dir = args[args.indexOf('--data-dir') + 1]
mkdirSync(dir, { recursive: true, mode: 0o700 })
const db = new Database(dir + '/floor.sqlite', { create: true })
db.exec('PRAGMA journal_mode = WAL')
const server = Bun.serve({ hostname, port: Number(port), fetch: () => (db.query('SELECT 1').get(), Response.json({ status: 'ok' })) })
process.once('SIGTERM', () => (server.stop(true), db.close(), process.exit(0)))
`

/** Builds the floor binary (see the header) into `dir`; returns its command. */
async function buildFloor(dir: string): Promise<string[]> {
  const source = join(dir, 'floor.ts')
  const binary = join(dir, 'dbm-floor')
  await Bun.write(source, FLOOR_SOURCE)
  const flags = ['--minify-syntax', '--minify-whitespace', '--bytecode', '--format=esm']
  const build = Bun.spawnSync(['bun', 'build', '--compile', ...flags, source, '--outfile', binary], {
    stdout: 'ignore',
    stderr: 'pipe',
  })
  if (build.exitCode !== 0) throw new Error(`the floor binary does not build: ${build.stderr.toString()}`)
  return [binary]
}

/** Milliseconds from the spawn to the first 200 on /healthz, and to the answer of the API request sent right after it. */
interface Start {
  healthz: number
  api: number
}

async function startOnce(serveCmd: string[], dataDir: string): Promise<Start> {
  const port = await freePort()
  const started = performance.now()
  const proc = Bun.spawn([...serveCmd, 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir], {
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: 'ignore',
    env: { ...process.env, DBM_LOG_LEVEL: 'warn' },
  })
  try {
    const deadline = started + 10_000
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        async (r) => (await r.arrayBuffer(), r.status === 200),
        () => false,
      )
      if (ok) {
        const healthz = performance.now() - started
        // The first API request (401 without credentials): answered once the API is built, which dbm
        // serve does after it listens (src/server/serve.ts).
        await fetch(`http://127.0.0.1:${port}/api/v1/auth/me`).then((r) => r.arrayBuffer())
        return { healthz, api: performance.now() - started }
      }
      if (performance.now() > deadline)
        throw new Error(`dbm serve did not answer /healthz within 10 s (${serveCmd.join(' ')})`)
      if (proc.exitCode !== null) throw new Error(`dbm serve exited with ${proc.exitCode}`)
      await Bun.sleep(1)
    }
  } finally {
    proc.kill('SIGTERM')
    await proc.exited
  }
}

const root = mkdtempSync(join(tmpdir(), 'dbm-bench-startup-'))
const cleanup = () => rmSync(root, { recursive: true, force: true })
process.once('SIGINT', () => {
  cleanup()
  process.exit(130)
})
try {
  const floor = floorAt >= 0 ? await buildFloor(root) : undefined
  if (floor) serveCmds.push(floor)
  const load = loadLine()
  const results = serveCmds.map((command, c) => ({
    command,
    existing: join(root, `existing-${c}`),
    fresh: [] as Start[],
    again: [] as Start[],
  }))
  // Creates and migrates each command's existing directory; also warms the page cache for the binaries.
  for (const r of results) await startOnce(r.command, r.existing)
  for (let i = 0; i < options.runs; i++) {
    for (const r of results) {
      r.fresh.push(await startOnce(r.command, join(root, `fresh-${results.indexOf(r)}-${i}`)))
      r.again.push(await startOnce(r.command, r.existing))
    }
  }
  const { commit, line } = await machine()
  const many = results.length > 1
  const row = (name: string, starts: Start[]) => {
    const v = starts.map((s) => s.healthz)
    return `| ${name} | ${fmt(median(v), 1)} | ${fmt(Math.min(...v), 1)} | ${fmt(Math.max(...v), 1)} | ${fmt(median(starts.map((s) => s.api)), 1)} |`
  }
  const healthzMedian = (starts: Start[]) => median(starts.map((s) => s.healthz))
  const label = (r: (typeof results)[number]) =>
    r.command === floor ? 'floor (a minimal compiled server, --floor)' : `\`${r.command.join(' ')}\``
  const commands = results.map(label).join(', ')
  console.log(`### ${new Date().toISOString().slice(0, 10)}: dbm serve start-up\n`)
  console.log(`- Command: \`bun run bench:startup\` (serve command${many ? 's, taking turns' : ''}: ${commands})`)
  console.log(`- Commit: ${commit}`)
  console.log(`- Machine: ${line}; load average before: ${load}, after: ${loadLine()}`)
  console.log(
    `- Method: spawn to the first 200 on GET /healthz (asked every 1 ms), ${options.runs} runs each, alternating;`,
  )
  console.log('  then one GET /api/v1/auth/me (a 401), timed from the same spawn (last column)\n')
  console.log(
    `| ${many ? 'serve command | ' : ''}data directory | /healthz median ms | min ms | max ms | first API answer, median ms |\n|${many ? '---|' : ''}---|---:|---:|---:|---:|`,
  )
  for (const r of results) {
    const prefix = many ? `${label(r)} | ` : ''
    console.log(row(`${prefix}fresh (store created and migrated)`, r.fresh))
    console.log(row(`${prefix}existing (schema current)`, r.again))
  }
  console.log('')
  for (const r of results) {
    const worst = Math.max(healthzMedian(r.fresh), healthzMedian(r.again))
    console.log(
      `Result${many ? ` (${label(r)})` : ''}: the slower of the two medians is ${fmt(worst, 1)} ms (goal ≤ ${GOAL_MS} ms: ${worst <= GOAL_MS ? 'met' : 'missed'}).`,
    )
  }
} finally {
  cleanup()
}
