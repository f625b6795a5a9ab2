// What a collector is: a plain object with its name (from src/shared/collectors.ts), engine, default
// on/off, and collect(ctx) that returns its part of the batch and never sends it; registered once in
// registry.ts, which adds the table's lowest server version and server-side switch. The runner calls each collector under a deadline and reports a failure for that collector alone.
import type { ClickHouseClient } from '@clickhouse/client'
import type postgres from 'postgres'
import type { Logger } from '../../shared/log.ts'
import type { BackupConfig, CustomMetricConfig, DatabaseConfig } from '../config.ts'
import type { LogTextMode } from '../../shared/log-kinds.ts'
import type { IngestBatch } from '../../shared/wire.ts'
import type { CollectorName } from '../../shared/collectors.ts'

/** The sections of a batch a collector may fill. */
export type BatchSections = Omit<
  IngestBatch,
  | 'batch_id'
  | 'collected_at'
  | 'interval_seconds'
  | 'covered_seconds'
  | 'agent_version'
  | 'database'
  | 'collector_errors'
>

export type AgentLogger = Logger

/**
 * A collector's memory across cycles, keyed by the collector's own names. Written values are kept only
 * when the run finishes within its deadline (src/agent/state.ts), so store new objects instead of
 * changing the ones read from it; keys starting with `cache:` (texts that can be fetched again) are
 * kept at once, may be changed in place and are never saved to disk. A Map satisfies it.
 */
export interface CollectorState {
  get(key: string): unknown
  has(key: string): boolean
  set(key: string, value: unknown): unknown
  delete(key: string): boolean
}

export interface PostgresContext {
  /** The database's name in the agent config. */
  name: string
  /** The PostgreSQL database the DSN connects to (current_database()). */
  database: string
  /** A small pool to this one database; every statement runs under statement_timeout. */
  sql: postgres.Sql
  /** server_version_num, e.g. 170002. */
  versionNum: number
  /** Major version, e.g. 17. */
  major: number
  /** Epoch ms at the start of this cycle. */
  now: number
  /** Server-side settings from the last ingest response. */
  settings: { collectExplainPlans: boolean; collectReplication: boolean }
  /** Memory of this collector across cycles (previous samples for deltas); cleared when the server changes identity. */
  state: CollectorState
  /** pg_log_dir from the agent config, when set. */
  pgLogDir?: string
  /** backup_command and its companions from the agent config (backups.ts); absent when not configured. */
  backup?: BackupConfig
  /** explain_trusted_roles from the agent config (explain-plans.ts). */
  explainTrustedRoles?: string[]
  /** dbm local: the database's owner is trusted for EXPLAIN too (explain-plans.ts). */
  explainTrustsOwner?: boolean
  /** dbm local: notes name its flags rather than the agent config, which it does not have. */
  local?: boolean
  /** log_text from the agent config (log-events.ts): what log entries keep of statements; absent = redacted. */
  logText?: LogTextMode
  /** custom_metrics from the agent config (custom-metrics.ts). */
  customMetrics?: CustomMetricConfig[]
  /** Most bytes of server log read per cycle (log-events.ts); absent = 16 MB. */
  logReadBudgetBytes?: number
  /** A background sample failed (the waits sampler): the runner marks the database down on a failed connection attempt and stops the samplers. */
  sampleFailed?(error: unknown): void
  /**
   * What a collector wants shown after its `ok in N ms` in the health status (statements it could not
   * explain, sequences it cannot read), keyed by collector name; the collector sets and clears its own.
   */
  notes: Map<string, string>
  /**
   * Notes of what the agent leaves out by design rather than for something to fix (write statements the
   * read-only role may not explain), keyed by collector name: sent with level 'info', shown on the page
   * they concern and not as a warning on every page. Set and cleared by the collector as its notes are.
   */
  infos?: Map<string, string>
  log: AgentLogger
}

export interface ClickHouseContext {
  /** The database's name in the agent config. */
  name: string
  /** An HTTP client to this one server; every query runs under max_execution_time. */
  client: ClickHouseClient
  /** version(), e.g. `26.7.2.1`. */
  version: string
  /** major * 1000 + minor, e.g. 26007. */
  versionNum: number
  /** Major version, e.g. 26. */
  major: number
  /** Epoch ms at the start of this cycle. */
  now: number
  /** Server-side settings from the last ingest response. */
  settings: { collectExplainPlans: boolean; collectReplication: boolean }
  /** Memory of this collector across cycles (watermarks, previous samples); cleared when the server changes identity. */
  state: CollectorState
  /**
   * What a collector wants shown after its `ok in N ms` in the health status (statements it could not
   * explain, sequences it cannot read), keyed by collector name; the collector sets and clears its own.
   */
  notes: Map<string, string>
  /** Info-level notes (see PostgresContext.infos): what the server's configuration leaves out by design. */
  infos?: Map<string, string>
  /** custom_metrics from the agent config (custom-metrics.ts). */
  customMetrics?: CustomMetricConfig[]
  log: AgentLogger
}

/** What `dbm agent --check` gives a PostgreSQL collector that would run, to say what keeps it from working. */
export interface PostgresCheck {
  sql: postgres.Sql
  db: DatabaseConfig
  major: number
  /** The check's own deadline for the whole database line, in seconds. */
  timeoutS: number
}

/** What `dbm agent --check` gives a ClickHouse collector that would run. */
export interface ClickHouseCheck {
  client: ClickHouseClient
  db: DatabaseConfig
  /** major * 1000 + minor, e.g. 26007. */
  versionNum: number
  /** The system tables the server has (system.tables), looked up once for every collector. */
  systemTables: ReadonlySet<string>
}

export interface Collector<Ctx> {
  name: string
  engine: 'postgres' | 'clickhouse'
  /** Lowest server major the collector supports, from the table (src/shared/collectors.ts): below it the collector is skipped. */
  readonly minVersion?: number
  /** The server-side database setting that turns it off, from the table. */
  readonly serverSwitch?: CollectorName['serverSwitch']
  /** Runs unless enabled_collectors leaves it out or the server disables it. */
  defaultEnabled: boolean
  /**
   * 'object_stats': per-object statistics (one row per table or index), run at the database's
   * object_stats_interval rather than every cycle, and in the first cycle of a runner (runner.ts,
   * cadenceDue). Absent: every cycle.
   */
  cadence?: 'object_stats'
  /** Why the database's config gives this collector nothing to do (backups without backup_command); undefined when it can run. */
  unconfigured?(config: Partial<DatabaseConfig>): string | undefined
  /** Deadline of one run when the config asks for longer than the runner's (custom metrics' own timeouts). */
  deadlineMs?(config: Partial<DatabaseConfig>): number
  collect(ctx: Ctx): Promise<Partial<BatchSections>>
  /**
   * Optional background work between cycles (the waits sampler), started once per connection; returns
   * the function that stops it. Collectors are shared by every database, so keep its state in ctx.state.
   */
  start?(ctx: Ctx): () => void
  /**
   * For `dbm agent --check`, when the collector would run: notes on what keeps it from doing its work
   * (settings, grants, a command that fails), each a clause of the database's line. The check asks every
   * collector that has one, so no code names collectors to pick their checks.
   */
  checkNotes?(check: Ctx extends ClickHouseContext ? ClickHouseCheck : PostgresCheck): Promise<string[]>
  /** For `dbm agent --check`: a part of the database's line of its own (`host: …`), after the collectors. */
  checkPart?(check: Ctx extends ClickHouseContext ? ClickHouseCheck : PostgresCheck): Promise<string>
}

export type PostgresCollector = Collector<PostgresContext>

export type ClickHouseCollector = Collector<ClickHouseContext>
