// `dbm agent --check`: validates the config, connects to every database once and prints one line
// per database (engine, server version, the collectors that will run, and why the others will not).
// Succeeds only when every database answered.
import postgres from 'postgres'
import type { AgentConfig, DatabaseConfig } from './config.ts'
import { planCollectors } from './postgres-runner.ts'
import { type CollectorPlan, defaultTimings } from './runner.ts'

export interface CheckLine {
  ok: boolean
  line: string
}

async function checkPostgres(db: DatabaseConfig, timeoutS: number): Promise<CheckLine> {
  const sql = postgres(db.dsn, { max: 1, connect_timeout: timeoutS, onnotice: () => {}, connection: { statement_timeout: timeoutS * 1000, application_name: 'dbm-agent-check' } })
  try {
    const [row] = await sql`SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version`
    const major = Math.floor(row!.num / 10_000)
    return { ok: true, line: okLine(db, `postgres ${row!.version}`, planCollectors(db, major)) }
  } catch (e) {
    return { ok: false, line: `FAIL  ${db.name}: postgres: ${(e as Error).message}` }
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {})
  }
}

/** `ok    name: engine version; collectors: …; skipped: name (reason), …` */
function okLine(db: DatabaseConfig, server: string, plans: CollectorPlan<unknown>[]): string {
  const running = plans.filter((p) => p.run).map((p) => p.collector.name)
  const skipped = plans.filter((p) => !p.run).map((p) => `${p.collector.name} (${(p as { reason: string }).reason})`)
  return `ok    ${db.name}: ${server}; collectors: ${running.join(', ')}${skipped.length ? `; skipped: ${skipped.join(', ')}` : ''}`
}

async function checkClickHouse(db: DatabaseConfig, timeoutS: number): Promise<CheckLine> {
  try {
    // Loaded only for ClickHouse entries, like the agent's runner: a PostgreSQL-only agent never loads the HTTP client.
    const { clickhouseOptions, planClickHouseCollectors } = await import('./clickhouse-runner.ts')
    const { connectClickHouse } = await import('./clickhouse-connection.ts')
    const options = clickhouseOptions({ ...defaultTimings, statementTimeoutMs: timeoutS * 1000 })
    const conn = await connectClickHouse(db.dsn, options)
    try {
      const plans = planClickHouseCollectors(db, conn.major) as CollectorPlan<unknown>[]
      const notes: string[] = []
      try {
        await conn.client.query({ query: 'SELECT 1 FROM system.query_log LIMIT 0' })
      } catch {
        notes.push('system.query_log is missing: query_stats stays empty until <query_log> is enabled')
      }
      return { ok: true, line: okLine(db, `clickhouse ${conn.version}`, plans) + (notes.length ? `; note: ${notes.join('; ')}` : '') }
    } finally {
      await conn.close().catch(() => {})
    }
  } catch (e) {
    return { ok: false, line: `FAIL  ${db.name}: clickhouse: ${(e as Error).message}` }
  }
}

export async function checkConfig(config: AgentConfig, timeoutS = 10): Promise<CheckLine[]> {
  return Promise.all(
    config.databases.map((db) =>
      db.engine === 'postgres' ? checkPostgres(db, timeoutS) : checkClickHouse(db, timeoutS),
    ),
  )
}
