import type { IngestBatch } from '../../shared/wire.ts'
import type { StoreReachability } from './reachability.ts'
import type { StoreWriteFaults } from './write-faults.ts'
import type { AvailabilityReads } from './availability/types.ts'
import type { AgentClockReads } from './agent-clock/types.ts'
import type { ActionStore } from './actions/types.ts'
import type { ApiKeyStore } from './accounts/api-keys.ts'
import type { ClickHouseReads } from './clickhouse/types.ts'
import type { HostReads } from './host/types.ts'
import type { ServerSettingsReads } from './server-settings/types.ts'
import type { MonitorStore } from './monitor/evaluations.ts'
import type { DiagnosisStore } from './diagnoses/types.ts'
import type { ThresholdStore } from './thresholds/types.ts'
import type { AlertDestinationStore } from './alerts/destinations.ts'
import type { AlertRoutingStore } from './alerts/routing.ts'
import type { CustomMetricReads } from './custom-metrics/types.ts'
import type { MembersStore } from './accounts/members.ts'
import type { RetentionStore } from './retention/retention.ts'
import type { InternalsReads } from './internals/types.ts'
import type { LogEventReads } from './logs/types.ts'
import type { ObjectReads } from './objects/types.ts'
import type { ServerChangeReads } from './events/server-changes.ts'
import type { SessionReads } from './sessions/types.ts'
import type { SnapshotKind } from './snapshots.ts'
import type { DbEvent } from './events/events.ts'
import type { StoredPlan } from './statements/plans.ts'
import type { QueryDetail, QuerySort, QueryStatsRow } from './statements/reads.ts'
import type { Window } from './window.ts'
import type { AccountReads, AccountWrites } from './accounts/types.ts'
import type { DatabaseReads, DatabaseWrites, IngestResult, RegisteredDatabase } from './databases/types.ts'

// The store's records and its interface. Both backends (SQLite, PostgreSQL) implement it through
// the same SqlStore over their own driver; the contract suite in test/store runs against both.

export type { ApiKey, ApiKeyEntry, ApiKeyScope, NewApiKey } from './accounts/api-keys.ts'

export type {
  AccountReads,
  AccountWrites,
  EmailTokenKind,
  LimitResult,
  Organization,
  RefreshTokenRecord,
  RotateResult,
  User,
  UserWithPassword,
} from './accounts/types.ts'
export type {
  DatabasePatch,
  DatabaseReads,
  DatabaseWrites,
  Engine,
  IngestResult,
  NewDatabase,
  RegisteredDatabase,
} from './databases/types.ts'

/**
 * The whole store: the accounts' and registered databases' methods (accounts/types.ts, databases/types.ts,
 * API keys in accounts/api-keys.ts) and one member per other resource, each typed by its folder's interface.
 */
export interface Store extends ApiKeyStore, AccountReads, AccountWrites, DatabaseReads, DatabaseWrites {
  readonly dialect: 'sqlite' | 'postgres'
  /**
   * SQLite only: a number that changes with every write to the store; undefined on PostgreSQL (which
   * several processes may share) and while a transaction is open. Lets callers keep derived results.
   */
  generation(): number | undefined
  /**
   * A number that moves whenever this process applies a batch of the database or retention changes its
   * telemetry (with last_seen_at, which batches landing in other processes move, it tells whether a
   * result derived from the database's telemetry may be reused).
   */
  telemetryVersion(databaseId: string): number
  /** A trivial query, for health checks: resolves when the store answers it. */
  ping(): Promise<void>
  /** PostgreSQL only: the store's outage episodes (the SQLite file is this process's own). */
  readonly reachability?: StoreReachability
  /** Episodes of writes the store refuses for a while (a full disk, a standby: write-faults.ts). */
  readonly writeFaults?: StoreWriteFaults
  /** A small write that leaves nothing behind, for /healthz while writes are refused (SqlDriver.probeWrite). */
  probeWrite?(): Promise<void>
  /** Reads of tables and indexes (objects/). */
  readonly objects: ObjectReads
  /** Sessions and locks: the latest snapshot, the kept ones at a time, their times, lock chains (sessions/). */
  readonly sessions: SessionReads
  /** Reads of waits, replication, bgwriter, WAL, I/O and database statistics (internals/). */
  readonly internals: InternalsReads
  /** Whether each database answers its agent: its state, outages and agent silences (availability/; ingest writes them in planBatch). */
  readonly databaseAvailability: AvailabilityReads
  /** How far each database's agent's clock is from the server's, as ingest measured it (agent-clock/). */
  readonly agentClocks: AgentClockReads
  /** Reads of the server log's entries and their counts (logs/; ingest writes them in planBatch). */
  readonly logEvents: LogEventReads
  /** Reads of the server's restarts, version and setting changes, and its start (events/server-changes.ts; ingest derives them in events/events.ts). */
  readonly serverChanges: ServerChangeReads
  /** Reads of ClickHouse parts, merges, mutations and server metrics (clickhouse/). */
  readonly clickhouse: ClickHouseReads
  /** The database host's latest figures and their series (host/). */
  readonly host: HostReads
  /** The monitored server's settings with their details, for the Configuration page (server-settings/; ingest writes them in planBatch). */
  readonly serverSettings: ServerSettingsReads
  /** The monitor's per-database state (claims, evaluation times, recommendations, the webhook) with the alerts (monitor/, alerts/). */
  readonly monitor: MonitorStore
  /** Each database's latest diagnosis, the one every reader shows (diagnoses/). */
  readonly diagnoses: DiagnosisStore
  /** The doctor's thresholds an operator set for each database (thresholds/). */
  readonly thresholds: ThresholdStore
  /** An organization's members, their roles, and its invites (accounts/members.ts). */
  readonly members: MembersStore
  /** Retention and minute-bucket compaction (retention/retention.ts). */
  readonly retention: RetentionStore
  /** Actions the dashboard asks an agent to run: cancel, terminate, explain (actions/). */
  readonly actions: ActionStore
  /** An organization's alert destinations: email, webhook, Slack, Teams, PagerDuty, Opsgenie, Alertmanager (alerts/destinations.ts). */
  readonly alertDestinations: AlertDestinationStore
  /** Alert routes, silences, and the holds and repeats of notifications they bring (alerts/routing.ts). */
  readonly alertRouting: AlertRoutingStore
  /** The operator's own SQL checks: definitions, series, values over time (custom-metrics/; ingest writes them in planBatch). */
  readonly customMetrics: CustomMetricReads

  // telemetry
  /**
   * Applies an agent's batch once: maps it to the organization's database of that name (registering
   * it, within `limit` when given), skips a batch_id already applied, records last_seen_at. `now`: its
   * receipt time; `ageMs`: how long before that the agent says it collected it (X-Dbm-Batch-Age, a batch
   * from its buffer; 0: current), which orders the latest snapshots; `sentAt`: the agent's clock when it
   * sent the batch (X-Dbm-Sent-At; undefined from an older agent), which measures the agent's clock.
   */
  ingest(
    orgId: string,
    batch: IngestBatch,
    now: number,
    limit?: number,
    ageMs?: number,
    sentAt?: number,
  ): Promise<IngestResult>
  /**
   * A batch another connection applied (the ingest writer's thread, src/server/ingest-writer/) was
   * committed: this store's caches learn it as they learn their own ingests.
   */
  ingestCommitted(databaseId: string, closedHoursChanged: boolean): void
  listQueryStats(databaseId: string, window: Window, sort: QuerySort, limit: number): Promise<QueryStatsRow[]>
  queryDetail(databaseId: string, hash: string, window: Window): Promise<QueryDetail | undefined>
  latestSnapshot(databaseId: string, kind: SnapshotKind): Promise<{ ts: number; payload: unknown } | undefined>
  listPlans(databaseId: string, hash: string, window: Window, limit: number): Promise<StoredPlan[]>
  /** The database's events timeline in the window, newest first (events/events.ts). */
  listEvents(db: RegisteredDatabase, window: Window, limit: number, now: number): Promise<DbEvent[]>
  /** The server's settings (name → SHOW's text) as the latest batch carrying them gave them; null when none did (events/events.ts). */
  latestSettings(databaseId: string): Promise<Record<string, string> | null>

  close(): Promise<void>
}
