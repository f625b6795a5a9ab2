// `dbm agent --check`: validates the config, connects to every database once and prints one line
// per database (engine, server version, the collectors that will run, and why the others will not).
// Succeeds only when every database answered.
import postgres from 'postgres'
import type { AgentConfig, DatabaseConfig } from './config.ts'
import { planCollectors } from './postgres-runner.ts'

export interface CheckLine {
  ok: boolean
  line: string
}

async function checkPostgres(db: DatabaseConfig, timeoutS: number): Promise<CheckLine> {
  const sql = postgres(db.dsn, { max: 1, connect_timeout: timeoutS, onnotice: () => {}, connection: { statement_timeout: timeoutS * 1000, application_name: 'dbm-agent-check' } })
  try {
    const [row] = await sql`SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version`
    const major = Math.floor(row!.num / 10_000)
    const plans = planCollectors(db, major)
    const running = plans.filter((p) => p.run).map((p) => p.collector.name)
    const skipped = plans.filter((p) => !p.run).map((p) => `${p.collector.name} (${(p as { reason: string }).reason})`)
    return {
      ok: true,
      line: `ok    ${db.name}: postgres ${row!.version}; collectors: ${running.join(', ')}${skipped.length ? `; skipped: ${skipped.join(', ')}` : ''}`,
    }
  } catch (e) {
    return { ok: false, line: `FAIL  ${db.name}: postgres: ${(e as Error).message}` }
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {})
  }
}

export async function checkConfig(config: AgentConfig, timeoutS = 10): Promise<CheckLine[]> {
  return Promise.all(
    config.databases.map((db) =>
      db.engine === 'postgres'
        ? checkPostgres(db, timeoutS)
        : Promise.resolve({ ok: false, line: `FAIL  ${db.name}: clickhouse: not supported by this version of the agent yet` }),
    ),
  )
}
