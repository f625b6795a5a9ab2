import type { IngestBatch } from '../../shared/wire.ts'
import type { StoreAvailability } from './reachability.ts'
import type { AvailabilityReads } from './availability/availability.ts'
import type { ActionStore } from './actions/actions.ts'
import type { ApiKeyStore } from './accounts/api-keys.ts'
import type { ClickHouseReader } from './clickhouse/clickhouse.ts'
import type { HostReads } from './host/host.ts'
import type { ServerSettingsReads } from './server-settings/server-settings.ts'
import type { HealthStore } from './monitor/evaluations.ts'
import type { AlertDestinationStore } from './alerts/destinations.ts'
import type { AlertRoutingStore } from './alerts/routing.ts'
import type { CustomMetricReads } from './custom-metrics/custom-metrics.ts'
import type { MembersStore } from './accounts/members.ts'
import type { RetentionStore } from './retention/retention.ts'
import type { InternalsReader } from './internals/internals.ts'
import type { LogEventReads } from './logs/log-events.ts'
import type { ObjectsReader } from './objects/objects.ts'
import type { ServerChangeReads } from './events/server-changes.ts'
import type { SessionHistoryReader } from './sessions/history.ts'
import type { SnapshotKind } from './snapshots.ts'
import type { DbEvent } from './events/events.ts'
import type { StoredPlan } from './statements/plans.ts'
import type { QuerySort, QueryStatsRow, queryDetail } from './statements/reads.ts'
import type { Window } from './window.ts'

// The store's records and its interface. Both backends (SQLite, PostgreSQL) implement it through
// the same SqlStore over their own driver; the contract suite in test/store runs against both.

export interface Organization {
  id: string
  name: string
  slug: string
  plan: string
  verified: boolean
  created_at: number
}

export interface User {
  id: string
  org_id: string
  email: string
  name: string
  role: string
  email_verified_at: number | null
  created_at: number
}

export interface UserWithPassword extends User {
  password_hash: string
}

export type { ApiKey, ApiKeyEntry, ApiKeyScope, NewApiKey } from './accounts/api-keys.ts'

export type Engine = 'postgres' | 'clickhouse'

export interface RegisteredDatabase {
  id: string
  org_id: string
  name: string
  engine: Engine
  engine_version: string | null
  host: string
  port: number
  tags: Record<string, string>
  poll_interval_seconds: number
  collect_explain_plans: boolean
  collect_replication: boolean
  disabled_collectors: string[]
  created_at: number
  updated_at: number
  last_seen_at: number | null
}

export type NewDatabase = Pick<RegisteredDatabase, 'name' | 'engine' | 'host' | 'port' | 'tags'> & {
  engine_version: string | null
}

export type DatabasePatch = Partial<
  Pick<
    RegisteredDatabase,
    | 'name'
    | 'host'
    | 'port'
    | 'tags'
    | 'poll_interval_seconds'
    | 'collect_explain_plans'
    | 'collect_replication'
    | 'disabled_collectors'
  >
>

export type EmailTokenKind = 'verify' | 'reset'

export interface RefreshTokenRecord {
  id: string
  user_id: string
  family_id: string
  expires_at: number
  revoked_at: number | null
}

/** Outcome of presenting a refresh token for rotation; `sessionId` is the token's family. */
export type RotateResult =
  | { ok: true; userId: string; sessionId: string }
  | { ok: false; reason: 'unknown' | 'expired' | 'revoked' | 'reused' }

/** Outcome of counting a request against a limit. */
export interface LimitResult {
  allowed: boolean
  /** When not allowed: milliseconds until a request would be allowed again. */
  retryAfterMs: number
}

export type IngestResult =
  | { kind: 'applied' | 'duplicate'; database: RegisteredDatabase }
  | { kind: 'limit' }
  | { kind: 'engine_mismatch'; database: RegisteredDatabase }

/** API keys: ApiKeyStore (accounts/api-keys.ts), reads and writes declared there. */
export interface Store extends ApiKeyStore {
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
  readonly availability?: StoreAvailability
  /** Reads of tables, indexes, active queries and locks (objects/objects.ts). */
  readonly objects: ObjectsReader
  /** Session and lock history: snapshots at a time, their times, lock chains (sessions/history.ts). */
  readonly history: SessionHistoryReader
  /** Reads of waits, replication, bgwriter, WAL, I/O and database statistics (internals/internals.ts). */
  readonly internals: InternalsReader
  /** Whether each database answers its agent: its state, outages and agent silences (availability/availability.ts; ingest writes them in planBatch). */
  readonly databaseAvailability: AvailabilityReads
  /** Reads of the server log's entries and their counts (logs/log-events.ts; ingest writes them in planBatch). */
  readonly logEvents: LogEventReads
  /** Reads of the server's restarts, version and setting changes, and its start (events/server-changes.ts; ingest derives them in events/events.ts). */
  readonly serverChanges: ServerChangeReads
  /** Reads of ClickHouse parts, merges, mutations and server metrics (clickhouse/clickhouse.ts). */
  readonly clickhouse: ClickHouseReader
  /** The database host's latest figures and their series (host/host.ts). */
  readonly host: HostReads
  /** The monitored server's settings with their details, for the Configuration page (server-settings/server-settings.ts; ingest writes them in planBatch). */
  readonly serverSettings: ServerSettingsReads
  /** Recommendations, alerts, their notifications and organization webhooks (monitor/evaluations.ts). */
  readonly health: HealthStore
  /** An organization's members, their roles, and its invites (accounts/members.ts). */
  readonly members: MembersStore
  /** Retention and minute-bucket compaction (retention/retention.ts). */
  readonly retention: RetentionStore
  /** Actions the dashboard asks an agent to run: cancel, terminate, explain (actions/actions.ts). */
  readonly actions: ActionStore
  /** An organization's alert destinations: email, webhook, Slack, Teams, PagerDuty, Opsgenie, Alertmanager (alerts/destinations.ts). */
  readonly alertDestinations: AlertDestinationStore
  /** Alert routes, silences, and the holds and repeats of notifications they bring (alerts/routing.ts). */
  readonly alertRouting: AlertRoutingStore
  /** The operator's own SQL checks: definitions, series, values over time (custom-metrics/custom-metrics.ts; ingest writes them in planBatch). */
  readonly customMetrics: CustomMetricReads

  // accounts
  /**
   * Creates an organization and its owner; EmailTakenError when the address has an account. With
   * `onlyFirst`, SignupClosedError when any organization exists (checked in the same transaction).
   */
  createAccount(input: {
    org: { name: string; slug: string; plan: string }
    user: { email: string; name: string; passwordHash: string; role: string }
    onlyFirst?: boolean
  }): Promise<{ org: Organization; user: User }>
  /** True once any organization exists (DBM_SIGNUP=closed then refuses signups). */
  hasOrganization(): Promise<boolean>
  findUserByEmail(email: string): Promise<UserWithPassword | undefined>
  getUser(id: string): Promise<User | undefined>
  getOrganization(id: string): Promise<Organization | undefined>
  setPassword(userId: string, passwordHash: string): Promise<void>
  markEmailVerified(userId: string, at: number): Promise<void>

  // single-use e-mail tokens (verification, password reset), stored as hashes. A user has at most one
  // live reset token: issuing one ends the older ones, and consuming one ends any other.
  createEmailToken(input: { tokenHash: string; userId: string; kind: EmailTokenKind; expiresAt: number; now: number }): Promise<void>
  /** Marks the token used and returns its user when it exists, is unused and unexpired. */
  consumeEmailToken(tokenHash: string, kind: EmailTokenKind, now: number): Promise<string | undefined>
  /** The user of a token that has already been used (a verification link opened twice), else undefined. */
  usedEmailTokenUser(tokenHash: string, kind: EmailTokenKind): Promise<string | undefined>

  // refresh tokens: rotated on use, reuse revokes the family. A family is one session (one sign-in),
  // live while it holds an unrevoked token; access tokens name their session and die with it.
  createRefreshToken(record: Omit<RefreshTokenRecord, 'revoked_at'> & { now: number }): Promise<void>
  /** Revokes `id` and records `next` in the same family when `id` is live; detects reuse. */
  rotateRefreshToken(id: string, next: { id: string; expires_at: number }, now: number): Promise<RotateResult>
  revokeRefreshToken(id: string, now: number): Promise<void>
  /** Ends the user's session `sessionId` (a family): its refresh and access tokens are refused from now on. */
  revokeSession(userId: string, sessionId: string, now: number): Promise<void>
  /** Signs the user out everywhere: ends every session of the user. */
  revokeUserSessions(userId: string, now: number): Promise<void>
  /** The user when `sessionId` is one of their live sessions, else undefined. */
  getSessionUser(userId: string, sessionId: string): Promise<User | undefined>

  // registered databases
  listDatabases(orgId: string): Promise<RegisteredDatabase[]>
  countDatabases(orgId: string): Promise<number>
  /** Creates the database; `limit` (when given) is checked in the same transaction. */
  createDatabase(orgId: string, input: NewDatabase, now: number, limit?: number): Promise<RegisteredDatabase | 'limit'>
  getDatabase(orgId: string, id: string): Promise<RegisteredDatabase | undefined>
  updateDatabase(orgId: string, id: string, patch: DatabasePatch, now: number): Promise<RegisteredDatabase | undefined>
  deleteDatabase(orgId: string, id: string): Promise<boolean>

  // rate limits and cooldowns, shared by every process on the store
  /** Counts one request under `key`; allowed while at most `limit` fall in the trailing window. */
  hitRateLimit(key: string, limit: number, windowMs: number, now: number): Promise<LimitResult>
  /** Allowed when no allowed request under `key` happened in the last `cooldownMs`; records it then. */
  takeCooldown(key: string, cooldownMs: number, now: number): Promise<LimitResult>
  /** Housekeeping: removes rate-limit events older than `before`; returns how many. */
  sweepRateEvents(before: number): Promise<number>

  // telemetry
  /**
   * Applies an agent's batch once: maps it to the organization's database of that name (registering
   * it, within `limit` when given), skips a batch_id already applied, records last_seen_at.
   */
  ingest(orgId: string, batch: IngestBatch, now: number, limit?: number): Promise<IngestResult>
  listQueryStats(databaseId: string, window: Window, sort: QuerySort, limit: number): Promise<QueryStatsRow[]>
  queryDetail(databaseId: string, hash: string, window: Window): ReturnType<typeof queryDetail>
  latestSnapshot(databaseId: string, kind: SnapshotKind): Promise<{ ts: number; payload: unknown } | undefined>
  listPlans(databaseId: string, hash: string, window: Window, limit: number): Promise<StoredPlan[]>
  /** The database's events timeline in the window, newest first (events/events.ts). */
  listEvents(db: RegisteredDatabase, window: Window, limit: number, now: number): Promise<DbEvent[]>
  /** The server's settings (name → SHOW's text) as the latest batch carrying them gave them; null when none did (events/events.ts). */
  latestSettings(databaseId: string): Promise<Record<string, string> | null>

  close(): Promise<void>
}
