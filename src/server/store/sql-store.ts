// The Store, written once over a SqlDriver: it composes each resource's reads and writes (their folders)
// and applies ingest batches. Dialect differences stay in the drivers (placeholders, booleans, int8
// parsing), in the dialect object (dialect.ts: SQL that differs) and in the migrations' DDL; each
// resource's row mapping evens out the rest.
import type { IngestBatch } from '../../shared/wire.ts'
import { timeStoreDriver } from '../metrics.ts'
import type { AccountReads, AccountWrites } from './accounts/types.ts'
import { accountReads } from './accounts/reads.ts'
import { accountWrites } from './accounts/writes.ts'
import type { DatabaseReads, DatabaseWrites } from './databases/types.ts'
import { databaseReads } from './databases/reads.ts'
import { databaseWrites, registerFromBatch } from './databases/writes.ts'
import { toDatabase } from './databases/rows.ts'
import type { SqlDriver } from './driver.ts'
import type { ClickHouseReads } from './clickhouse/types.ts'
import { clickhouseReads } from './clickhouse/reads.ts'
import type { HostReads } from './host/types.ts'
import { SqlHostReads } from './host/reads.ts'
import type { ServerSettingsReads } from './server-settings/types.ts'
import { SqlServerSettingsReads } from './server-settings/reads.ts'
import { type MonitorStore, monitorStore } from './monitor/evaluations.ts'
import type { DiagnosisStore } from './diagnoses/types.ts'
import { diagnosisReads } from './diagnoses/reads.ts'
import { diagnosisWrites } from './diagnoses/writes.ts'
import type { ThresholdStore } from './thresholds/types.ts'
import { thresholdReads } from './thresholds/reads.ts'
import { thresholdWrites } from './thresholds/writes.ts'
import { type MembersStore, membersStore } from './accounts/members.ts'
import { type RetentionStore, retentionStore } from './retention/retention.ts'
import type { InternalsReads } from './internals/types.ts'
import { internalsReads } from './internals/reads.ts'
import type { LogEventReads } from './logs/types.ts'
import { logEventReads } from './logs/reads.ts'
import { type AvailabilityReads, isReportOnly } from './availability/types.ts'
import { availabilityReads } from './availability/reads.ts'
import { agentClockReads } from './agent-clock/reads.ts'
import type { AgentClockReads } from './agent-clock/types.ts'
import type { ObjectReads } from './objects/types.ts'
import { objectReads } from './objects/reads.ts'
import { latestSettings, listEvents } from './events/events.ts'
import { type ServerChangeReads, serverChangeReads } from './events/server-changes.ts'
import type { SessionReads } from './sessions/types.ts'
import { sessionReads } from './sessions/reads.ts'
import { planBatch } from './ingest/plan-batch.ts'
import { listPlans } from './statements/plans.ts'
import { type IngestEffects, KnownTexts } from './statements/writes.ts'
import { ClosedHourSums, type QuerySort, listQueryStats, queryDetail } from './statements/reads.ts'
import { type SnapshotKind, latestSnapshot } from './snapshots.ts'
import type { Window } from './window.ts'
import type { ActionStore } from './actions/types.ts'
import { actionReads } from './actions/reads.ts'
import { actionWrites } from './actions/writes.ts'
import { SqlAlertDestinations } from './alerts/destinations.ts'
import { SqlAlertRouting } from './alerts/routing.ts'
import type { CustomMetricReads } from './custom-metrics/types.ts'
import { SqlCustomMetricReads } from './custom-metrics/reads.ts'
import { SqlApiKeys } from './accounts/api-keys.ts'
import type {
  DatabasePatch,
  EmailTokenKind,
  IngestResult,
  NewApiKey,
  NewDatabase,
  RegisteredDatabase,
  Store,
} from './types.ts'

/** Bound of SqlStore's ingestIds (cleared when reached): far more names than one server ingests for. */
const MAX_INGEST_IDS = 100_000

export class SqlStore implements Store {
  readonly objects: ObjectReads
  readonly sessions: SessionReads
  readonly internals: InternalsReads
  readonly logEvents: LogEventReads
  readonly serverChanges: ServerChangeReads
  readonly databaseAvailability: AvailabilityReads
  readonly agentClocks: AgentClockReads
  readonly clickhouse: ClickHouseReads
  readonly host: HostReads
  readonly serverSettings: ServerSettingsReads
  readonly monitor: MonitorStore
  readonly diagnoses: DiagnosisStore
  readonly thresholds: ThresholdStore
  readonly members: MembersStore
  readonly retention: RetentionStore
  readonly actions: ActionStore
  readonly alertDestinations: SqlAlertDestinations
  readonly alertRouting: SqlAlertRouting
  readonly customMetrics: CustomMetricReads
  /** API keys, cached by key_id on SQLite (accounts/api-keys.ts). */
  private readonly apiKeys: SqlApiKeys
  private readonly accountReads: AccountReads
  private readonly accountWrites: AccountWrites
  /** The registered databases; the list cached on SQLite (databases/reads.ts). */
  private readonly databaseReads: DatabaseReads
  private readonly databaseWrites: DatabaseWrites
  /** Statement texts written lately (ingest rewrites each at most once in TEXT_REFRESH_MS); both stores. */
  private readonly knownTexts = new KnownTexts()
  /**
   * The database id each (organization, database name) had at its latest ingest here: the id ingest plans
   * its reads for before the database's row is read (SqlStore.ingest checks it against the row).
   */
  private readonly ingestIds = new Map<string, string>()
  /** Statement sums over closed hours, SQLite only (this process sees every write to the file). */
  private readonly closedHours: ClosedHourSums | undefined
  /** See the constructor. */
  private readonly rollupSpreadMs: number

  /**
   * `options.reader`: a second connection that only reads (the diagnosis worker's), which cannot see
   * this process's writes happen: it keeps none of the caches that rely on seeing every write.
   * `options.rollupSpreadMs`: how long after a span or hour closes the databases' rollups of it are spread
   * (limits.ts rollupSpreadMs; `dbm serve` sets it, 0 otherwise: each rolls up with its first batch after).
   */
  constructor(
    readonly driver: SqlDriver,
    options: { reader?: boolean; rollupSpreadMs?: number } = {},
  ) {
    this.rollupSpreadMs = options.rollupSpreadMs ?? 0
    // Every call's time into dbm_store_query_duration_seconds (GET /metrics).
    timeStoreDriver(driver)
    const ownsFile = driver.sqlDialect.soleWriter && !options.reader
    this.apiKeys = new SqlApiKeys(driver, ownsFile ? new Map() : undefined)
    this.closedHours = ownsFile ? new ClosedHourSums() : undefined
    this.accountReads = accountReads(driver)
    this.accountWrites = accountWrites(driver)
    this.databaseReads = databaseReads(driver)
    // A deleted database's cached texts and closed-hour sums go with it.
    this.databaseWrites = databaseWrites(driver, (databaseId) => {
      this.knownTexts.forget(databaseId)
      this.closedHours?.changed(databaseId)
    })
    this.objects = objectReads(driver)
    this.sessions = sessionReads(driver)
    this.internals = internalsReads(driver)
    this.logEvents = logEventReads(driver)
    this.serverChanges = serverChangeReads(driver)
    this.databaseAvailability = availabilityReads(driver)
    this.agentClocks = agentClockReads(driver)
    this.clickhouse = clickhouseReads(driver)
    this.host = new SqlHostReads(driver)
    this.serverSettings = new SqlServerSettingsReads(driver)
    this.actions = { ...actionReads(driver), ...actionWrites(driver) }
    this.alertDestinations = new SqlAlertDestinations(driver)
    this.alertRouting = new SqlAlertRouting(driver)
    this.customMetrics = new SqlCustomMetricReads(driver)
    this.monitor = monitorStore(driver)
    this.diagnoses = { ...diagnosisReads(driver), ...diagnosisWrites(driver) }
    this.thresholds = { ...thresholdReads(driver), ...thresholdWrites(driver) }
    // A removal or demotion revokes the user's keys in its own transaction: they leave the cache with it.
    this.members = membersStore(driver, (keyIds) => this.apiKeys.evict(keyIds))
    this.retention = retentionStore(driver, (databaseId) => {
      this.closedHours?.changed(databaseId)
      this.telemetryChanged(databaseId)
    })
  }

  /** telemetryVersion's counts, by database (bounded: cleared past 100,000 databases, which only moves them). */
  private readonly telemetryVersions = new Map<string, number>()
  private telemetryVersionBase = 0

  private telemetryChanged(databaseId: string): void {
    if (this.telemetryVersions.size >= 100_000) {
      this.telemetryVersionBase += 1_000_000_000
      this.telemetryVersions.clear()
    }
    this.telemetryVersions.set(databaseId, (this.telemetryVersions.get(databaseId) ?? 0) + 1)
  }

  telemetryVersion(databaseId: string): number {
    return this.telemetryVersionBase + (this.telemetryVersions.get(databaseId) ?? 0)
  }

  generation(): number | undefined {
    return this.driver.generation?.()
  }

  ping() {
    return this.driver.ping()
  }

  get reachability() {
    return this.driver.reachability
  }

  get writeFaults() {
    return this.driver.writeFaults
  }

  async probeWrite() {
    await this.driver.probeWrite?.()
  }

  get dialect() {
    return this.driver.dialect
  }

  // ---- accounts (accounts/reads.ts, accounts/writes.ts) ----

  hasOrganization() {
    return this.accountReads.hasOrganization()
  }

  findUserByEmail(email: string) {
    return this.accountReads.findUserByEmail(email)
  }

  getUser(id: string) {
    return this.accountReads.getUser(id)
  }

  getOrganization(id: string) {
    return this.accountReads.getOrganization(id)
  }

  usedEmailTokenUser(tokenHash: string, kind: EmailTokenKind) {
    return this.accountReads.usedEmailTokenUser(tokenHash, kind)
  }

  getSessionUser(userId: string, sessionId: string) {
    return this.accountReads.getSessionUser(userId, sessionId)
  }

  createAccount(input: Parameters<Store['createAccount']>[0]) {
    return this.accountWrites.createAccount(input)
  }

  setPassword(userId: string, passwordHash: string) {
    return this.accountWrites.setPassword(userId, passwordHash)
  }

  markEmailVerified(userId: string, at: number) {
    return this.accountWrites.markEmailVerified(userId, at)
  }

  createEmailToken(input: Parameters<Store['createEmailToken']>[0]) {
    return this.accountWrites.createEmailToken(input)
  }

  consumeEmailToken(tokenHash: string, kind: EmailTokenKind, now: number) {
    return this.accountWrites.consumeEmailToken(tokenHash, kind, now)
  }

  createRefreshToken(record: Parameters<Store['createRefreshToken']>[0]) {
    return this.accountWrites.createRefreshToken(record)
  }

  rotateRefreshToken(id: string, next: { id: string; expires_at: number }, now: number) {
    return this.accountWrites.rotateRefreshToken(id, next, now)
  }

  revokeRefreshToken(id: string, now: number) {
    return this.accountWrites.revokeRefreshToken(id, now)
  }

  revokeSession(userId: string, sessionId: string, now: number) {
    return this.accountWrites.revokeSession(userId, sessionId, now)
  }

  revokeUserSessions(userId: string, now: number) {
    return this.accountWrites.revokeUserSessions(userId, now)
  }

  hitRateLimit(key: string, limit: number, windowMs: number, now: number) {
    return this.accountWrites.hitRateLimit(key, limit, windowMs, now)
  }

  takeCooldown(key: string, cooldownMs: number, now: number) {
    return this.accountWrites.takeCooldown(key, cooldownMs, now)
  }

  sweepRateEvents(before: number) {
    return this.accountWrites.sweepRateEvents(before)
  }

  // ---- API keys (accounts/api-keys.ts) ----

  createApiKey(input: NewApiKey) {
    return this.apiKeys.createApiKey(input)
  }

  listApiKeys(orgId: string, includeRevoked: boolean) {
    return this.apiKeys.listApiKeys(orgId, includeRevoked)
  }

  findApiKey(keyId: string) {
    return this.apiKeys.findApiKey(keyId)
  }

  revokeApiKey(orgId: string, id: string, now: number) {
    return this.apiKeys.revokeApiKey(orgId, id, now)
  }

  touchApiKey(id: string, now: number, minIntervalMs: number) {
    return this.apiKeys.touchApiKey(id, now, minIntervalMs)
  }

  // ---- registered databases (databases/reads.ts, databases/writes.ts) ----

  listDatabases(orgId: string) {
    return this.databaseReads.listDatabases(orgId)
  }

  countDatabases(orgId: string) {
    return this.databaseReads.countDatabases(orgId)
  }

  getDatabase(orgId: string, id: string) {
    return this.databaseReads.getDatabase(orgId, id)
  }

  createDatabase(orgId: string, input: NewDatabase, now: number, limit?: number) {
    return this.databaseWrites.createDatabase(orgId, input, now, limit)
  }

  updateDatabase(orgId: string, id: string, patch: DatabasePatch, now: number) {
    return this.databaseWrites.updateDatabase(orgId, id, patch, now)
  }

  deleteDatabase(orgId: string, id: string) {
    return this.databaseWrites.deleteDatabase(orgId, id)
  }

  // ---- telemetry ----

  async ingest(
    orgId: string,
    batch: IngestBatch,
    now: number,
    limit?: number,
    ageMs = 0,
    sentAt?: number,
  ): Promise<IngestResult> {
    let effects: IngestEffects | undefined
    const named = `${orgId}\n${batch.database.name}`
    const result = await this.driver.transaction(async (tx): Promise<IngestResult> => {
      // One exchange (PostgreSQL) for the database's row, the batch's record and the reads its writes
      // depend on, planned for the database id this name had last time (ingestIds): the reads are only
      // used when the row found has that id, else planned and sent again. The record is inserted only for
      // a registered database of the batch's engine; one not registered yet is recorded after registering.
      const guess = this.ingestIds.get(named)
      const guessed =
        guess === undefined
          ? undefined
          : planBatch(tx.sqlDialect, guess, batch, this.knownTexts, now, ageMs, sentAt, this.rollupSpreadMs)
      const first = [
        { sql: 'SELECT * FROM databases WHERE org_id = $1 AND name = $2', params: [orgId, batch.database.name] },
        {
          sql: `INSERT INTO ingest_batches (database_id, batch_id, collected_at, received_at)
                SELECT id, $3, $4, $5 FROM databases WHERE org_id = $1 AND name = $2 AND engine = $6 ON CONFLICT DO NOTHING`,
          params: [orgId, batch.database.name, batch.batch_id, batch.collected_at, now, batch.database.engine],
        },
      ]
      const [found, recorded] = guessed ? await guessed.reads.send(tx, first) : await tx.runAll(first)
      const row = found!.rows[0] ?? (await registerFromBatch(tx, orgId, batch, now, limit))
      if (row === 'limit') return { kind: 'limit' }
      const database = toDatabase(row)
      if (database.engine !== batch.database.engine) return { kind: 'engine_mismatch', database }
      // Not recorded by the insert above: a duplicate, or a database registered just now (by this batch or,
      // between the two statements, by another), or one deleted or renamed between them (each statement
      // sees the data as of its own start on PostgreSQL). Only a batch_id already recorded for this id is a
      // duplicate; otherwise it is recorded here (a deleted database's id fails its foreign key: an error the
      // agent retries, never a batch dropped as a duplicate).
      const fresh =
        recorded!.changed > 0
          ? recorded!.changed
          : found!.rows[0] &&
              (await tx.get('SELECT 1 AS seen FROM ingest_batches WHERE database_id = $1 AND batch_id = $2', [
                database.id,
                batch.batch_id,
              ]))
            ? 0
            : await tx.run(
                'INSERT INTO ingest_batches (database_id, batch_id, collected_at, received_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
                [database.id, batch.batch_id, batch.collected_at, now],
              )
      if (fresh === 0) return { kind: 'duplicate', database }
      if (this.ingestIds.size >= MAX_INGEST_IDS) this.ingestIds.clear()
      this.ingestIds.set(named, database.id)
      let plan = guess === database.id ? guessed : undefined
      if (!plan) {
        plan = planBatch(tx.sqlDialect, database.id, batch, this.knownTexts, now, ageMs, sentAt, this.rollupSpreadMs)
        await plan.reads.send(tx)
      }
      // The database's last_seen_at goes with the batch's writes, the transaction's last statements (one
      // exchange with COMMIT on PostgreSQL).
      // A report that the database is down (the header and availability only) carries no data: last_seen_at
      // stays the time of the latest data, and the report's own time is kept by availability/writes.ts.
      if (isReportOnly(batch)) {
        effects = await plan.write(tx, database, [], true)
        return { kind: 'applied', database }
      }
      const seen = {
        sql: 'UPDATE databases SET last_seen_at = $1, engine_version = COALESCE($2, engine_version) WHERE id = $3',
        params: [now, batch.database.engine_version ?? null, database.id],
      }
      effects = await plan.write(tx, database, [seen], true)
      return {
        kind: 'applied',
        database: {
          ...database,
          last_seen_at: now,
          engine_version: batch.database.engine_version ?? database.engine_version,
        },
      }
    }, `dbm:ingest:${orgId}:${batch.database.name}`)
    // Caches learn what the batch wrote once it is committed (a rolled-back batch wrote nothing).
    if (effects && result.kind === 'applied') {
      this.ingestCommitted(result.database.id, effects.closedHoursChanged)
      if (effects.texts.length > 0) this.knownTexts.remember(result.database.id, effects.texts, effects.textsAt)
      return { ...result, closedHoursChanged: effects.closedHoursChanged }
    }
    return result
  }

  ingestCommitted(databaseId: string, closedHoursChanged: boolean): void {
    this.telemetryChanged(databaseId)
    if (closedHoursChanged) this.closedHours?.changed(databaseId)
  }

  listQueryStats(databaseId: string, window: Window, sort: QuerySort, limit: number) {
    return listQueryStats(this.driver, databaseId, window, sort, limit, this.closedHours)
  }

  queryDetail(databaseId: string, hash: string, window: Window) {
    return queryDetail(this.driver, databaseId, hash, window)
  }

  latestSnapshot(databaseId: string, kind: SnapshotKind) {
    return latestSnapshot(this.driver, databaseId, kind)
  }

  listPlans(databaseId: string, hash: string, window: Window, limit: number) {
    return listPlans(this.driver, databaseId, hash, window, limit)
  }

  listEvents(db: RegisteredDatabase, window: Window, limit: number, now: number) {
    return listEvents(this.driver, db, window, limit, now)
  }

  latestSettings(databaseId: string) {
    return latestSettings(this.driver, databaseId)
  }

  close() {
    return this.driver.close()
  }
}
