// Start-up benchmark (`bun bench/startup.ts`): the time from spawning `dbm serve` to its first 200 on
// GET /healthz, on a fresh data directory (the store created and migrated) and on an existing one (the
// schema current), alternating, `--runs` times each; reports the median and the spread. The server
// listens on a loopback port the OS assigned (probed once per run); /healthz is asked every millisecond
// from the spawn on, so the figure includes the process's own start (the binary's runtime, the
// imports), opening the store and the first request. Goal (issue 13): median at most 50 ms with dist/dbm.
// Options: --runs N (default 15), --serve-cmd "COMMAND" (default dist/dbm when built, else `bun src/cli.ts`).
// --serve-cmd may be given several times (say a copy of the previous binary and dist/dbm): the commands
// then take turns within each run, so all of them see the same machine load, and each gets its own rows.
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
const options = parseArgs(argv, { runs: 15 }, { runs: [1, 200] })

async function startOnce(serveCmd: string[], dataDir: string): Promise<number> {
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
      if (ok) return performance.now() - started
      if (performance.now() > deadline) throw new Error(`dbm serve did not answer /healthz within 10 s (${serveCmd.join(' ')})`)
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
  const load = loadLine()
  const results = serveCmds.map((command, c) => ({ command, existing: join(root, `existing-${c}`), fresh: [] as number[], again: [] as number[] }))
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
  const row = (name: string, v: number[]) => `| ${name} | ${fmt(median(v), 1)} | ${fmt(Math.min(...v), 1)} | ${fmt(Math.max(...v), 1)} |`
  const commands = results.map((r) => `\`${r.command.join(' ')}\``).join(', ')
  console.log(`### ${new Date().toISOString().slice(0, 10)}: dbm serve start-up\n`)
  console.log(`- Command: \`bun run bench:startup\` (serve command${many ? 's, taking turns' : ''}: ${commands})`)
  console.log(`- Commit: ${commit}`)
  console.log(`- Machine: ${line}; load average before: ${load}, after: ${loadLine()}`)
  console.log(`- Method: spawn to the first 200 on GET /healthz (asked every 1 ms), ${options.runs} runs each, alternating\n`)
  console.log(`| ${many ? 'serve command | ' : ''}data directory | median ms | min ms | max ms |\n|${many ? '---|' : ''}---|---:|---:|---:|`)
  for (const r of results) {
    const prefix = many ? `\`${r.command.join(' ')}\` | ` : ''
    console.log(row(`${prefix}fresh (store created and migrated)`, r.fresh))
    console.log(row(`${prefix}existing (schema current)`, r.again))
  }
  console.log('')
  for (const r of results) {
    const worst = Math.max(median(r.fresh), median(r.again))
    console.log(`Result${many ? ` (\`${r.command.join(' ')}\`)` : ''}: the slower of the two medians is ${fmt(worst, 1)} ms (goal ≤ ${GOAL_MS} ms: ${worst <= GOAL_MS ? 'met' : 'missed'}).`)
  }
} finally {
  cleanup()
}
