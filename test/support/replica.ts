// A streaming hot standby of a test PostgreSQL 17 server, for the replication collector, the
// replication doctor rule and the replication end-to-end test. The embedded packages ship no
// pg_basebackup, so the standby is made from a copy of the primary's data directory taken between
// pg_backup_start and pg_backup_stop.
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { type PostgresServer, freePort } from './postgres.ts'
import { giveToServerUser, installation, startPostmaster } from './postgres-install.ts'
import { until } from './wait.ts'

export interface Standby {
  /** Superuser URL of the standby's postgres database. */
  url: string
  stop(): Promise<void>
}

/**
 * Starts a hot standby of `server` (reached through `sql`, a superuser connection to it) that streams
 * as application_name dbm_replica, through the physical slot `slot` when given, with `flags` added to
 * its server flags (e.g. `-c hot_standby_feedback=on`); resolves once it streams.
 */
export async function startStandby(
  server: PostgresServer,
  sql: postgres.Sql,
  slot?: string,
  flags: string[] = [],
): Promise<Standby> {
  const [{ data_directory }] = (await sql`SHOW data_directory`) as unknown as [{ data_directory: string }]
  const dir = mkdtempSync(join(tmpdir(), 'dbm-replica-'))
  const dataDir = join(dir, 'data')
  const backup = await sql.reserve()
  try {
    await backup`SELECT pg_backup_start('dbm-test', true)`
    const copy = Bun.spawnSync(['cp', '-a', data_directory, dataDir])
    if (copy.exitCode !== 0) throw new Error(`copying the data directory failed: ${copy.stderr}`)
    const [{ labelfile }] = (await backup`SELECT labelfile FROM pg_backup_stop(false)`) as unknown as [
      { labelfile: string },
    ]
    writeFileSync(join(dataDir, 'backup_label'), labelfile)
  } finally {
    backup.release()
  }
  rmSync(join(dataDir, 'postmaster.pid'), { force: true })
  rmSync(join(dataDir, 'postmaster.opts'), { force: true })
  // As pg_basebackup does: the primary's slots stay on the primary.
  rmSync(join(dataDir, 'pg_replslot'), { recursive: true, force: true })
  mkdirSync(join(dataDir, 'pg_replslot'), { mode: 0o700 })
  writeFileSync(join(dataDir, 'standby.signal'), '')
  appendFileSync(
    join(dataDir, 'postgresql.auto.conf'),
    `primary_conninfo = 'host=127.0.0.1 port=${server.port} user=postgres password=dbm-test application_name=dbm_replica'\n` +
      (slot ? `primary_slot_name = '${slot}'\n` : ''),
  )
  const install = await installation(server.major)
  await giveToServerUser(install, dir)
  const port = await freePort()
  // Its start is not awaited: the "ready" line of a standby says "read-only connections", so this waits
  // for it to stream instead (polling through the refusals while it starts).
  const standby = startPostmaster(
    install,
    dataDir,
    port,
    ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', ...flags],
    () => {},
  )
  const url = `postgres://postgres:dbm-test@127.0.0.1:${port}/postgres`
  const probe = postgres(url, { max: 1, onnotice: () => {} })
  try {
    await until(
      'the standby to stream',
      async () => {
        const [row] = await probe`SELECT status FROM pg_stat_wal_receiver`
        return row?.status === 'streaming' ? true : undefined
      },
      { ignoreErrors: true, timeoutMs: 25_000 },
    )
  } finally {
    await probe.end({ timeout: 1 }).catch(() => {})
  }
  return {
    url,
    async stop() {
      // An immediate shutdown (SIGQUIT), as test/support/postgres.ts stops its servers: the data directory
      // is removed next, so the restartpoint a fast shutdown writes first would be time spent for nothing.
      await standby.halt()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
