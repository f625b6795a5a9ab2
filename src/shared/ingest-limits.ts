// The limits of one ingest request, shared by the server (which refuses a batch past them: 413 for
// the body, 400 for a section or a text) and the agent (which splits a cycle's batch into parts within
// them, src/agent/split.ts). Plain constants: the agent loads this module at runtime without TypeBox.

/** Largest request body POST /api/v1/ingest takes, in bytes (over it: 413). */
export const INGEST_BODY_LIMIT_BYTES = 16 * 1024 * 1024

/** Most entries of each array section in one batch. */
export const ingestMaxItems = {
  query_stats: 20_000,
  explain_plans: 200,
  activity: 10_000,
  locks: 20_000,
  waits: 1_000,
  tables: 50_000,
  indexes: 100_000,
  sequences: 10_000,
  unindexed_foreign_keys: 10_000,
  invalid_constraints: 10_000,
  bloat: 20_000,
  column_stats: 5_000,
  connections: 10_000,
  progress: 1_000,
  io_stats: 1_000,
  parts: 50_000,
  merges: 10_000,
  mutations: 10_000,
  collector_errors: 100,
  collector_notes: 100,
  xmin_holders: 100,
  /** log_events.entries: classified log entries sent whole (the rest are counted in log_events.counts). */
  log_events: 2_000,
  /** log_events.counts: one per minute, kind and severity. */
  log_counts: 10_000,
  host_filesystems: 64,
  host_devices: 64,
  backups: 500,
  disabled_triggers: 1_000,
  /** Each list of the security section (roles, functions, schemas, pg_hba lines). */
  security_items: 1_000,
  /** ClickHouse's users (clickhouse_users.users). */
  clickhouse_users: 1_000,
} as const
export type IngestArraySection = keyof typeof ingestMaxItems

/** Longest strings (in UTF-16 code units, as the server's validation counts them) of the fields that can grow large. */
export const ingestTextLimits = {
  /** QueryStatDelta.query_text. */
  queryText: 100_000,
  /** MutationEntry.command. */
  mutationCommand: 100_000,
  /** CollectorError.message (collector_errors and collector_notes). */
  collectorMessage: 2_000,
  /** XminHolder.query_text (the holding session's statement; the activity section carries it whole). */
  holderQueryText: 2_000,
  /** LogEvent.message and each string of LogEvent.fields. */
  logMessage: 8_000,
  /** LogEvent.statement (cut by the agent past it). */
  logStatement: 20_000,
  /** batch_id, query_hash, plan_hash, agent_version. */
  id: 64,
} as const

/**
 * Limits of a batch's server_state.settings (name → value): PostgreSQL has ~350 settings and ClickHouse
 * ~1,500 (only the changed ones are sent); a value (search_path, shared_preload_libraries) stays short.
 */
export const settingsLimits = { count: 5_000, name: 256, value: 10_000 } as const

/**
 * Limits of a database's tags, the same on the agent's config, the batch and the API. Here rather than
 * in wire.ts so that the server's limits (and with them the store) do not load TypeBox and the wire
 * schemas before `dbm serve` listens.
 */
export const tagLimits = { key: 100, value: 500, count: 50 } as const
