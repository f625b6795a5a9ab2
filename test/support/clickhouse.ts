// Real ClickHouse for tests: starts clickhouse-server.ts (the ClickHouse 26.x engine from chdb behind
// the ClickHouse HTTP interface) as a child process on a free loopback port, with a data directory of
// its own, and hands back its address plus @clickhouse/client conveniences. stop() ends the process and
// removes the data directory; a test process that dies takes its servers with it.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import type { Subprocess } from 'bun'

type ClientOptions = NonNullable<Parameters<typeof createClient>[0]>

export interface ClickHouseRig {
  /** `http://127.0.0.1:<port>`, the address @clickhouse/client takes. */
  url: string
  port: number
  user: string
  password: string
  /** A DSN the agent accepts: `clickhouse://user:password@127.0.0.1:<port>/default` (a non-standard port is used as given). */
  dsn: string
  /** The engine's version, e.g. `26.7.2.1`. */
  version: string
  dataDir: string
  /** Milliseconds from spawning the process to its first answered query. */
  startupMs: number
  /** A new client on this server as the configured user (closed by stop()); `options` override. */
  createClient(options?: ClientOptions): ClickHouseClient
  /** Runs a SELECT-like statement and returns its rows (JSONEachRow). */
  query<T = Record<string, unknown>>(sql: string, params?: Record<string, unknown>): Promise<T[]>
  /** Runs a statement without result rows (DDL, INSERT ... SELECT, SYSTEM, ALTER ...). */
  command(sql: string, params?: Record<string, unknown>, settings?: Record<string, string | number>): Promise<void>
  /** Inserts rows as JSONEachRow. */
  insert(table: string, rows: Record<string, unknown>[]): Promise<void>
  stop(): Promise<void>
}

const serverScript = join(import.meta.dir, 'clickhouse-server.ts')
const live = new Set<{ proc: Subprocess; dataDir: string }>()
process.on('exit', () => {
  for (const { proc, dataDir } of live) {
    proc.kill('SIGKILL')
    rmSync(dataDir, { recursive: true, force: true })
  }
})

/** Reads the first line the server prints (its port and version), or fails with its stderr. */
async function readReadyLine(
  proc: Subprocess<'pipe', 'pipe', 'pipe'>,
  stderr: () => string,
  timeoutMs: number,
): Promise<{ port: number; version: string }> {
  const reader = proc.stdout.getReader()
  const decoder = new TextDecoder()
  let text = ''
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs)
  try {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) throw new Error(`the ClickHouse test server exited before it was ready:\n${stderr()}`)
      text += decoder.decode(value, { stream: true })
      const newline = text.indexOf('\n')
      if (newline >= 0) return JSON.parse(text.slice(0, newline))
    }
  } finally {
    clearTimeout(timer)
    reader.releaseLock()
  }
}

/** `configFile`: a server config file for the engine (e.g. one declaring users in users.xml). */
export async function startClickHouse(
  options: { user?: string; password?: string; configFile?: string } = {},
): Promise<ClickHouseRig> {
  const user = options.user ?? 'default'
  const password = options.password ?? ''
  const started = performance.now()
  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-clickhouse-'))
  const proc = Bun.spawn([process.execPath, serverScript, '--data-dir', dataDir], {
    env: {
      ...process.env,
      UV_THREADPOOL_SIZE: '16',
      CLICKHOUSE_RIG_USER: user,
      CLICKHOUSE_RIG_PASSWORD: password,
      ...(options.configFile ? { CLICKHOUSE_RIG_CONFIG: options.configFile } : {}),
    },
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const entry = { proc, dataDir }
  live.add(entry)
  let stderr = ''
  void (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of proc.stderr) stderr += decoder.decode(chunk, { stream: true })
  })()

  let ready: { port: number; version: string }
  try {
    ready = await readReadyLine(proc, () => stderr, 30_000)
  } catch (e) {
    proc.kill('SIGKILL')
    await proc.exited
    live.delete(entry)
    rmSync(dataDir, { recursive: true, force: true })
    throw e
  }
  void proc.stdout.pipeTo(new WritableStream()).catch(() => {})

  const url = `http://127.0.0.1:${ready.port}`
  const clients: ClickHouseClient[] = []
  const newClient = (overrides: ClientOptions = {}) => {
    const client = createClient({ url, username: user, password, request_timeout: 30_000, ...overrides })
    clients.push(client)
    return client
  }
  const own = newClient()
  await own.query({ query: 'SELECT 1', format: 'JSONEachRow' }).then((r) => r.json())
  const startupMs = Math.round(performance.now() - started)

  return {
    url,
    port: ready.port,
    user,
    password,
    dsn: `clickhouse://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${ready.port}/default`,
    version: ready.version,
    dataDir,
    startupMs,
    createClient: newClient,
    async query<T>(sql: string, params?: Record<string, unknown>) {
      const result = await own.query({ query: sql, format: 'JSONEachRow', query_params: params })
      return (await result.json()) as T[]
    },
    async command(sql, params, settings) {
      await own.command({ query: sql, query_params: params, clickhouse_settings: settings })
    },
    async insert(table, rows) {
      await own.insert({ table, values: rows, format: 'JSONEachRow' })
    },
    async stop() {
      await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})))
      proc.kill('SIGTERM')
      const ended = await Promise.race([proc.exited.then(() => true), Bun.sleep(5_000).then(() => false)])
      if (!ended) {
        proc.kill('SIGKILL')
        await proc.exited
      }
      live.delete(entry)
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
