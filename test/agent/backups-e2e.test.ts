// Backups end to end with a real pgBackRest (Debian's package; scripts/ensure-packages.ts installs it
// for `bun run test`): a repository in a temp directory, a stanza for a real PostgreSQL 14 (Debian bookworm's pgBackRest 2.45 refuses 17; 15 is not among the embedded majors), one full
// backup; the real agent runs `pgbackrest info --output=json` as its backup_command and GET /backups
// reports the backup's label and times exactly as `pgbackrest info` says, with no doctor finding for a
// fresh backup. Without pgbackrest the test is skipped with a message, except under CI=true, where it fails.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { spawnSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { PASSWORD, installation } from '../support/postgres-install.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'
import { until } from '../support/wait.ts'

const PGBACKREST = '/usr/bin/pgbackrest'
const available = existsSync(PGBACKREST)
if (!available && process.env.CI !== 'true')
  console.warn(
    `skipping the pgBackRest test: ${PGBACKREST} is missing (apt-get install pgbackrest, or bun scripts/ensure-packages.ts)`,
  )

let server: PostgresServer
let rig: AgentRig
let dir: string
let repoOptions: string[]
let info: {
  label: string
  type: string
  timestamp: { start: number; stop: number }
  info: { size: number; repository: { delta: number } }
}

/** Runs pgbackrest as the user the servers run as (root may read the repository; the backup must write it as PostgreSQL's owner). */
function pgbackrest(args: string[], owner?: { uid: number; gid: number }): string {
  const run = spawnSync(PGBACKREST, [...repoOptions, ...args], {
    ...owner,
    env: { ...process.env, PGPASSWORD: PASSWORD },
    encoding: 'utf8',
    timeout: 60_000,
  })
  if (run.status !== 0)
    throw new Error(`pgbackrest ${args.join(' ')} failed (${run.status}): ${run.stdout}${run.stderr}`)
  return run.stdout
}

beforeAll(async () => {
  if (!available) return
  const { owner } = await installation(14)
  dir = mkdtempSync(join(tmpdir(), 'dbm-pgbackrest-'))
  chmodSync(dir, 0o755)
  const socketDir = join(dir, 'socket')
  const repo = join(dir, 'repo')
  const lock = join(dir, 'lock')
  for (const d of [socketDir, repo, lock]) {
    mkdirSync(d)
    if (owner) chownSync(d, owner.uid, owner.gid)
  }
  server = await startPostgres(14, ['-c', `unix_socket_directories=${socketDir}`])
  const sql = postgres(server.url(), { max: 1, onnotice: () => {} })
  const [{ data_directory: dataDir }] =
    (await sql`SELECT current_setting('data_directory') AS data_directory`) as unknown as [{ data_directory: string }]
  await sql.end()
  repoOptions = [
    '--stanza=dbm',
    `--repo1-path=${repo}`,
    `--lock-path=${lock}`,
    '--log-level-file=off',
    '--log-level-console=warn',
  ]
  const pgOptions = [
    `--pg1-path=${dataDir}`,
    `--pg1-port=${server.port}`,
    `--pg1-socket-path=${socketDir}`,
    '--pg1-user=postgres',
  ]
  pgbackrest([...pgOptions, 'stanza-create'], owner)
  // No archive_command in this test: the backup does not wait for its WAL to be archived.
  pgbackrest([...pgOptions, '--type=full', '--start-fast', '--no-archive-check', 'backup'], owner)
  const [stanza] = JSON.parse(pgbackrest(['info', '--output=json']))
  info = stanza.backup[0]
  const command = JSON.stringify([PGBACKREST, ...repoOptions, 'info', '--output=json'])
  rig = await startAgentRig(server.url(), 'backed-up', dir, undefined, `    backup_command: ${command}\n`)
}, 120_000)

afterAll(async () => {
  await rig?.stop()
  await server?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test.skipIf(!available && process.env.CI !== 'true')(
  'a real pgBackRest full backup: GET /backups reports its label, type, times and sizes as `pgbackrest info` says',
  async () => {
    expect(available).toBe(true)
    expect(info.type).toBe('full')
    const backups = await until('GET /backups to show the backup', async () => {
      const body = await rig.api('/backups')
      return body.last_full ? body : undefined
    })
    const expected = {
      label: info.label,
      type: 'full',
      started_at: new Date(info.timestamp.start * 1000).toISOString(),
      finished_at: new Date(info.timestamp.stop * 1000).toISOString(),
      size_bytes: info.info.size,
      stored_bytes: info.info.repository.delta,
      stanza: 'dbm',
      ok: true,
    }
    expect(backups).toMatchObject({
      tool: 'pgbackrest',
      error: null,
      latest: expected,
      last_successful: expected,
      last_full: expected,
      backups: [expected],
    })
    // A backup made a moment ago: the doctor has nothing to say about it.
    const doctor = await rig.api('/doctor')
    expect((doctor.top_issues as { rule: string }[]).filter((f) => f.rule === 'pg_backup_age')).toEqual([])
  },
  60_000,
)
