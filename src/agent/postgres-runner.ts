// The PostgreSQL side of the runner: a small postgres.js pool per database with statement_timeout,
// lock_timeout and application_name set; the server's identity is its system identifier plus its
// start time, and its lineage the system identifier alone: another node behind the DSN restarts the
// deltas, a restart of the same server does not (the collectors tell a reset from the counters).
// Deadlines cancel on the server: the pool is a CancellablePool (postgres-pool.ts).
import type { DatabaseSettings } from '../shared/wire.ts'
import { postgresCollectors } from './collectors/postgres/index.ts'
import type { PostgresCollector, PostgresContext } from './collectors/types.ts'
import type { DatabaseConfig } from './config.ts'
import { type ArrayTypes, addArrayTypes, agentPostgres, fetchArrayTypes } from './own-statements.ts'
import { postgresHost } from './postgres-dsn.ts'
import { CancellablePool } from './postgres-pool.ts'
import { SettingsCache, postgresFacts } from './server-state.ts'
import {
  type CollectorPlan,
  Runner,
  type Session,
  type SessionBase,
  abortable,
  planFor,
  withDeadline,
} from './runner.ts'

export { type RunnerStatus, type RunnerTimings, defaultTimings } from './runner.ts'

/** Which PostgreSQL collectors run against a server of `major`, and why the others do not. */
export function planCollectors(
  config: Pick<DatabaseConfig, 'enabledCollectors'> & Partial<DatabaseConfig>,
  major: number,
  settings?: DatabaseSettings,
): CollectorPlan<PostgresContext>[] {
  return planFor(postgresCollectors, config, major, settings)
}

/** Host and port of a postgres:// DSN, for the batch's database description. */
export function dsnEndpoint(dsn: string): { host: string; port: number } {
  try {
    const url = new URL(dsn)
    return { host: postgresHost(dsn), port: Number(url.port) || 5432 }
  } catch {
    return { host: 'localhost', port: 5432 }
  }
}

/** Host, port, database and user of a postgres:// DSN (never its password), for the saved state's owner. */
export function postgresTarget(dsn: string): string {
  const { host, port } = dsnEndpoint(dsn)
  try {
    const url = new URL(dsn)
    return `postgres://${decodeURIComponent(url.username)}@${host}:${port}/${decodeURIComponent(url.pathname.slice(1))}`
  } catch {
    return `postgres://${host}:${port}`
  }
}

export class PostgresRunner extends Runner<PostgresContext> {
  protected readonly collectors: PostgresCollector[] = postgresCollectors

  protected endpoint() {
    return dsnEndpoint(this.config.dsn)
  }

  protected target() {
    return postgresTarget(this.config.dsn)
  }

  protected async open(base: SessionBase, signal: AbortSignal): Promise<Session<PostgresContext>> {
    const { timings, config } = this
    /** The server's array types, read once per session; every pool of the session gets them. */
    let arrayTypes: ArrayTypes | undefined
    const pool = new CancellablePool(
      () =>
        // Every statement the agent sends carries the marker that query_stats leaves out (own-statements.ts).
        agentPostgres(
          config.dsn,
          {
            max: 3,
            connect_timeout: timings.connectTimeoutS,
            idle_timeout: 120,
            max_lifetime: 60 * 60,
            onnotice: () => {},
            connection: {
              application_name: 'dbm-agent',
              statement_timeout: timings.statementTimeoutMs,
              lock_timeout: Math.min(1000, timings.statementTimeoutMs),
              idle_in_transaction_session_timeout: 10_000,
            },
          },
          arrayTypes,
        ),
      this.cancelGraceMs,
      timings.collectorDeadlineMs,
    )
    const sql = pool.sql
    /** The settings read per session of the pool, reused while the session's configuration stays (server-state.ts). */
    const settingsCache = new SettingsCache()
    try {
      const [info] = await abortable(
        withDeadline(
          sql`SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version,
                     current_database() AS database, pg_postmaster_start_time()::text AS started`,
          timings.connectTimeoutS * 1000,
          `no PostgreSQL answered at ${dsnEndpoint(config.dsn).host}:${dsnEndpoint(config.dsn).port} within ${timings.connectTimeoutS} s`,
          true,
        ),
        signal,
      )
      // What postgres.js's fetch_types would read unmarked on every connection: read once, marked.
      arrayTypes = await abortable(fetchArrayTypes(sql), signal)
      addArrayTypes(sql, arrayTypes)
      let systemId = '?'
      try {
        const [row] = await abortable(sql`SELECT system_identifier::text AS id FROM pg_control_system()`, signal)
        systemId = row?.id ?? '?'
      } catch (e) {
        if (signal.aborted) throw e
        // pg_control_system() needs superuser or pg_monitor-like grants; the start time still tells restarts apart.
      }
      const started: string = info!.started
      const major = Math.floor(info!.num / 10_000)
      return {
        version: info!.version,
        major,
        identity: `${systemId}@${started}`,
        lineage: systemId === '?' ? null : systemId,
        context: (now, settings, run) => ({
          ...base,
          database: info!.database,
          sql: pool.view(run),
          versionNum: info!.num,
          major,
          pgLogDir: config.pgLogDir,
          backup: config.backup,
          explainTrustedRoles: config.explainTrustedRoles,
          explainTrustsOwner: config.explainTrustsOwner,
          local: config.local,
          logText: config.logText,
          customMetrics: config.customMetrics,
          now,
          settings: {
            collectExplainPlans: settings?.collect_explain_plans ?? true,
            collectReplication: settings?.collect_replication ?? true,
          },
        }),
        ping: async (run) => {
          await pool.view(run)`SELECT 1`
        },
        sameServer: async (run) => {
          const [row] = await pool.view(run)`SELECT pg_postmaster_start_time()::text AS started`
          return row!.started === started
        },
        facts: (run) => postgresFacts(pool.view(run), major, settingsCache),
        close: () => pool.close(),
      }
    } catch (e) {
      // Destroyed at once: a connection stuck in its handshake (a port that is not PostgreSQL, a stopped server).
      await pool.destroy()
      throw e
    }
  }
}
