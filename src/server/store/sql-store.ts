// The Store, written once over a SqlDriver. Dialect differences stay in the drivers (placeholders,
// booleans, int8 parsing), in the dialect object (dialect.ts: SQL that differs) and in the migrations'
// DDL; row mapping below evens out the rest.
import type { IngestBatch } from '../../shared/wire.ts'
import { timeStoreDriver } from '../metrics.ts'
import { num, numOrNull, toOrg, toUser } from './accounts/rows.ts'
import type { SqlDriver } from './driver.ts'
import { type ClickHouseReader, clickhouseReader } from './clickhouse/clickhouse.ts'
import { type HostReads, SqlHostReads } from './host/host.ts'
import { type ServerSettingsReads, SqlServerSettingsReads } from './server-settings/server-settings.ts'
import { type MonitorStore, monitorStore } from './monitor/evaluations.ts'
import type { DiagnosisStore } from './diagnoses/types.ts'
import { diagnosisReads } from './diagnoses/reads.ts'
import { diagnosisWrites } from './diagnoses/writes.ts'
import type { ThresholdStore } from './thresholds/types.ts'
import { thresholdReads } from './thresholds/reads.ts'
import { thresholdWrites } from './thresholds/writes.ts'
import { type MembersStore, membersStore } from './accounts/members.ts'
import { type RetentionStore, retentionStore } from './retention/retention.ts'
import { type InternalsReader, internalsReader } from './internals/internals.ts'
import { type LogEventReads, logEventStore } from './logs/log-events.ts'
import { type AvailabilityReads, availabilityStore, isReportOnly } from './availability/availability.ts'
import { type ObjectsReader, objectsReader } from './objects/objects.ts'
import { latestSettings, listEvents } from './events/events.ts'
import { type ServerChangeReads, serverChangeReads } from './events/server-changes.ts'
import { type SessionHistoryReader, sessionHistoryReader } from './sessions/history.ts'
import { planBatch } from './ingest/plan-batch.ts'
import { listPlans } from './statements/plans.ts'
import { type IngestEffects, KnownTexts } from './statements/writes.ts'
import { ClosedHourSums, type QuerySort, listQueryStats, queryDetail } from './statements/reads.ts'
import { type SnapshotKind, latestSnapshot } from './snapshots.ts'
import { type Fragment, ident, join, sql } from './sql.ts'
import type { Window } from './window.ts'
import { SqlActions } from './actions/actions.ts'
import { SqlAlertDestinations } from './alerts/destinations.ts'
import { SqlAlertRouting } from './alerts/routing.ts'
import { type CustomMetricReads, SqlCustomMetrics } from './custom-metrics/custom-metrics.ts'
import { SqlApiKeys } from './accounts/api-keys.ts'
import type {
  NewApiKey,
  DatabasePatch,
  EmailTokenKind,
  IngestResult,
  LimitResult,
  NewDatabase,
  Organization,
  RegisteredDatabase,
  RotateResult,
  Store,
  User,
  UserWithPassword,
} from './types.ts'

/** Bound of SqlStore's ingestIds (cleared when reached): far more names than one server ingests for. */
const MAX_INGEST_IDS = 100_000

/** Raised by createAccount when the e-mail address already has an account. */
export class EmailTakenError extends Error {
  constructor() {
    super('email is already registered')
    this.name = 'EmailTakenError'
  }
}

/** Raised by createAccount with `onlyFirst` when the store already has an organization. */
export class SignupClosedError extends Error {
  constructor() {
    super('signup is closed on this server')
    this.name = 'SignupClosedError'
  }
}

function toDatabase(r: any): RegisteredDatabase {
  return {
    id: r.id,
    org_id: r.org_id,
    name: r.name,
    engine: r.engine,
    engine_version: r.engine_version ?? null,
    host: r.host,
    port: num(r.port),
    tags: JSON.parse(r.tags),
    poll_interval_seconds: num(r.poll_interval_seconds),
    collect_explain_plans: Boolean(r.collect_explain_plans),
    collect_replication: Boolean(r.collect_replication),
    disabled_collectors: JSON.parse(r.disabled_collectors),
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
    last_seen_at: numOrNull(r.last_seen_at),
  }
}

// users.tokens_valid_after (schema version 2) is no longer read or written: access tokens name their
// session (refresh-token family) instead, which revokes them without a clock's precision.
const USER_COLUMNS = 'id, org_id, email, name, role, email_verified_at, created_at'
/** The only columns updateDatabase writes; the patch's keys never reach the SQL text otherwise. */
const PATCHABLE_COLUMNS = [
  'name',
  'host',
  'port',
  'tags',
  'poll_interval_seconds',
  'collect_explain_plans',
  'collect_replication',
  'disabled_collectors',
] as const satisfies readonly (keyof DatabasePatch)[]
/** The lock held while a user's e-mail tokens are replaced. */
const emailTokensLock = (userId: string) => `dbm:email-tokens:${userId}`

/** Removes the user's reset tokens that were never used (a newer one replaces them, or one was used). */
function dropUnusedResetTokens(tx: SqlDriver, userId: string) {
  return tx.run("DELETE FROM email_tokens WHERE user_id = $1 AND kind = 'reset' AND used_at IS NULL", [userId])
}

/** The lock held while an organization's set of databases changes (registration within a limit). */
const databasesLock = (orgId: string) => `dbm:databases:${orgId}`
const DB_DEFAULTS = { poll_interval_seconds: 10, collect_explain_plans: true, collect_replication: true }

export class SqlStore implements Store {
  readonly objects: ObjectsReader
  readonly history: SessionHistoryReader
  readonly internals: InternalsReader
  readonly logEvents: LogEventReads
  readonly serverChanges: ServerChangeReads
  readonly databaseAvailability: AvailabilityReads
  readonly clickhouse: ClickHouseReader
  readonly host: HostReads
  readonly serverSettings: ServerSettingsReads
  readonly monitor: MonitorStore
  readonly diagnoses: DiagnosisStore
  readonly thresholds: ThresholdStore
  readonly members: MembersStore
  readonly retention: RetentionStore
  readonly actions: SqlActions
  readonly alertDestinations: SqlAlertDestinations
  readonly alertRouting: SqlAlertRouting
  readonly customMetrics: CustomMetricReads
  /** API keys, cached by key_id on SQLite (accounts/api-keys.ts). */
  private readonly apiKeys: SqlApiKeys
  /**
   * Each organization's databases as last read, with the store's generation at that read (SQLite
   * only): any write to the store changes the generation, so a stale list is never served.
   */
  private readonly databaseLists = new Map<string, { generation: number; rows: RegisteredDatabase[] }>()
  /** Statement texts written lately (ingest rewrites each at most once in TEXT_REFRESH_MS); both stores. */
  private readonly knownTexts = new KnownTexts()
  /**
   * The database id each (organization, database name) had at its latest ingest here: the id ingest plans
   * its reads for before the database's row is read (SqlStore.ingest checks it against the row).
   */
  private readonly ingestIds = new Map<string, string>()
  /** Statement sums over closed hours, SQLite only (this process sees every write to the file). */
  private readonly closedHours: ClosedHourSums | undefined

  /**
   * `options.reader`: a second connection that only reads (the diagnosis worker's), which cannot see
   * this process's writes happen: it keeps none of the caches that rely on seeing every write.
   */
  constructor(
    readonly driver: SqlDriver,
    options: { reader?: boolean } = {},
  ) {
    // Every call's time into dbm_store_query_duration_seconds (GET /metrics).
    timeStoreDriver(driver)
    const ownsFile = driver.sqlDialect.soleWriter && !options.reader
    this.apiKeys = new SqlApiKeys(driver, ownsFile ? new Map() : undefined)
    this.closedHours = ownsFile ? new ClosedHourSums() : undefined
    this.objects = objectsReader(driver)
    this.history = sessionHistoryReader(driver)
    this.internals = internalsReader(driver)
    this.logEvents = logEventStore(driver)
    this.serverChanges = serverChangeReads(driver)
    this.databaseAvailability = availabilityStore(driver)
    this.clickhouse = clickhouseReader(driver)
    this.host = new SqlHostReads(driver)
    this.serverSettings = new SqlServerSettingsReads(driver)
    this.actions = new SqlActions(driver)
    this.alertDestinations = new SqlAlertDestinations(driver)
    this.alertRouting = new SqlAlertRouting(driver)
    this.customMetrics = new SqlCustomMetrics(driver)
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

  get availability() {
    return this.driver.availability
  }

  get dialect() {
    return this.driver.dialect
  }

  // ---- accounts ----

  async createAccount(input: Parameters<Store['createAccount']>[0]) {
    const now = Date.now()
    return this.driver.transaction(async (tx) => {
      if (input.onlyFirst && (await tx.get('SELECT 1 AS x FROM organizations LIMIT 1'))) throw new SignupClosedError()
      if (await tx.get('SELECT 1 AS x FROM users WHERE email = $1', [input.user.email])) throw new EmailTakenError()
      const taken = new Set(
        (
          await tx.all<{ slug: string }>('SELECT slug FROM organizations WHERE slug = $1 OR slug LIKE $2', [
            input.org.slug,
            `${input.org.slug}-%`,
          ])
        ).map((r) => r.slug),
      )
      let slug = input.org.slug
      for (let n = 2; taken.has(slug); n++) slug = `${input.org.slug}-${n}`
      const org: Organization = { id: Bun.randomUUIDv7(), name: input.org.name, slug, plan: input.org.plan, verified: false, created_at: now }
      await tx.run('INSERT INTO organizations (id, name, slug, plan, verified, created_at) VALUES ($1, $2, $3, $4, $5, $6)', [
        org.id,
        org.name,
        org.slug,
        org.plan,
        false,
        now,
      ])
      const user: User = {
        id: Bun.randomUUIDv7(),
        org_id: org.id,
        email: input.user.email,
        name: input.user.name,
        role: input.user.role,
        email_verified_at: null,
        created_at: now,
      }
      await tx.run(
        'INSERT INTO users (id, org_id, email, name, role, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [user.id, org.id, user.email, user.name, user.role, input.user.passwordHash, now],
      )
      return { org, user }
    }, 'dbm:signup')
  }

  async findUserByEmail(email: string) {
    const r = await this.driver.get(`SELECT ${USER_COLUMNS}, password_hash FROM users WHERE email = $1`, [email])
    return r ? ({ ...toUser(r), password_hash: String(r.password_hash) } as UserWithPassword) : undefined
  }

  async getUser(id: string) {
    const r = await this.driver.get(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [id])
    return r ? toUser(r) : undefined
  }

  async getSessionUser(userId: string, sessionId: string) {
    // Rotation revokes a family's newest token and inserts its successor in one transaction, so a live
    // session always shows exactly one unrevoked token to any reader.
    const r = await this.driver.get(
      `SELECT ${USER_COLUMNS} FROM users WHERE users.id = $1
         AND EXISTS (SELECT 1 FROM refresh_tokens WHERE family_id = $2 AND user_id = $1 AND revoked_at IS NULL)`,
      [userId, sessionId],
    )
    return r ? toUser(r) : undefined
  }

  async hasOrganization() {
    return (await this.driver.get('SELECT 1 AS x FROM organizations LIMIT 1', [])) !== undefined
  }

  async getOrganization(id: string) {
    const r = await this.driver.get('SELECT id, name, slug, plan, verified, created_at FROM organizations WHERE id = $1', [id])
    return r ? toOrg(r) : undefined
  }

  async setPassword(userId: string, passwordHash: string) {
    await this.driver.run('UPDATE users SET password_hash = $1 WHERE id = $2', [passwordHash, userId])
  }

  async markEmailVerified(userId: string, at: number) {
    await this.driver.transaction(async (tx) => {
      await tx.run('UPDATE users SET email_verified_at = COALESCE(email_verified_at, $1) WHERE id = $2', [at, userId])
      await tx.run('UPDATE organizations SET verified = $1 WHERE id = (SELECT org_id FROM users WHERE id = $2)', [true, userId])
    })
  }

  // ---- e-mail tokens ----

  async createEmailToken(input: { tokenHash: string; userId: string; kind: EmailTokenKind; expiresAt: number; now: number }) {
    await this.driver.transaction(async (tx) => {
      // Only the newest reset link works: the older unused ones are removed.
      if (input.kind === 'reset') await dropUnusedResetTokens(tx, input.userId)
      await tx.run('INSERT INTO email_tokens (token_hash, user_id, kind, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)', [
        input.tokenHash,
        input.userId,
        input.kind,
        input.expiresAt,
        input.now,
      ])
    }, emailTokensLock(input.userId))
  }

  async consumeEmailToken(tokenHash: string, kind: EmailTokenKind, now: number) {
    const consume = (d: SqlDriver) =>
      d.get<{ user_id: string }>(
        `UPDATE email_tokens SET used_at = $1
         WHERE token_hash = $2 AND kind = $3 AND used_at IS NULL AND expires_at > $1
         RETURNING user_id`,
        [now, tokenHash, kind],
      )
    if (kind !== 'reset') return (await consume(this.driver))?.user_id
    return this.driver.transaction(async (tx) => {
      const r = await consume(tx)
      // A used reset link ends every other one of that user (links issued before this rule, say).
      if (r) await dropUnusedResetTokens(tx, r.user_id)
      return r?.user_id
    })
  }

  async usedEmailTokenUser(tokenHash: string, kind: EmailTokenKind) {
    const r = await this.driver.get<{ user_id: string }>(
      'SELECT user_id FROM email_tokens WHERE token_hash = $1 AND kind = $2 AND used_at IS NOT NULL',
      [tokenHash, kind],
    )
    return r?.user_id
  }

  // ---- refresh tokens ----

  async createRefreshToken(record: { id: string; user_id: string; family_id: string; expires_at: number; now: number }) {
    await this.driver.run(
      'INSERT INTO refresh_tokens (id, user_id, family_id, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)',
      [record.id, record.user_id, record.family_id, record.expires_at, record.now],
    )
  }

  /** The lock every write to one user's refresh tokens takes, so a revocation never misses a rotation. */
  private refreshLock(userId: string) {
    return `dbm:refresh:${userId}`
  }

  private async refreshTokenOwner(id: string): Promise<string | undefined> {
    // A token's owner never changes, so reading it before taking the owner's lock is safe.
    return (await this.driver.get<{ user_id: string }>('SELECT user_id FROM refresh_tokens WHERE id = $1', [id]))?.user_id
  }

  async rotateRefreshToken(id: string, next: { id: string; expires_at: number }, now: number): Promise<RotateResult> {
    const owner = await this.refreshTokenOwner(id)
    if (!owner) return { ok: false, reason: 'unknown' }
    return this.driver.transaction(async (tx) => {
      const row = await tx.get<{ user_id: string; family_id: string; expires_at: number; revoked_at: number | null; replaced_by: string | null }>(
        'SELECT user_id, family_id, expires_at, revoked_at, replaced_by FROM refresh_tokens WHERE id = $1',
        [id],
      )
      if (!row) return { ok: false, reason: 'unknown' } as const
      if (row.revoked_at !== null && row.replaced_by === null) return { ok: false, reason: 'revoked' } as const
      if (row.revoked_at !== null) {
        // A token that was already rotated is being replayed, perhaps by whoever stole it: end its
        // session, with every access token issued to it (the user's other sessions go on).
        await tx.run('UPDATE refresh_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL', [now, row.family_id])
        return { ok: false, reason: 'reused' } as const
      }
      if (num(row.expires_at) <= now) return { ok: false, reason: 'expired' } as const
      await tx.run('UPDATE refresh_tokens SET revoked_at = $1, replaced_by = $2 WHERE id = $3', [now, next.id, id])
      await tx.run(
        'INSERT INTO refresh_tokens (id, user_id, family_id, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)',
        [next.id, row.user_id, row.family_id, next.expires_at, now],
      )
      return { ok: true, userId: row.user_id, sessionId: row.family_id } as const
    }, this.refreshLock(owner))
  }

  async revokeRefreshToken(id: string, now: number) {
    const owner = await this.refreshTokenOwner(id)
    if (!owner) return
    await this.driver.transaction(
      (tx) => tx.run('UPDATE refresh_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, id]),
      this.refreshLock(owner),
    )
  }

  async revokeSession(userId: string, sessionId: string, now: number) {
    await this.driver.transaction(
      (tx) => tx.run('UPDATE refresh_tokens SET revoked_at = $1 WHERE family_id = $2 AND user_id = $3 AND revoked_at IS NULL', [now, sessionId, userId]),
      this.refreshLock(userId),
    )
  }

  async revokeUserSessions(userId: string, now: number) {
    await this.driver.transaction(
      (tx) => tx.run('UPDATE refresh_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL', [now, userId]),
      this.refreshLock(userId),
    )
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

  // ---- registered databases ----

  async listDatabases(orgId: string) {
    const generation = this.driver.generation?.()
    if (generation !== undefined) {
      const cached = this.databaseLists.get(orgId)
      if (cached?.generation === generation) return cached.rows.map((db) => ({ ...db }))
    }
    // CAST: SQLite re-prepares a statement on every run when a bare parameter meets an index and an
    // ORDER BY (7x slower here); the cast keeps the plan cached and changes nothing on PostgreSQL.
    const rows = (await this.driver.all('SELECT * FROM databases WHERE org_id = CAST($1 AS TEXT) ORDER BY name, id', [orgId])).map(toDatabase)
    // Kept only when nothing was written between the two readings of the generation.
    if (generation !== undefined && this.driver.generation?.() === generation) {
      if (this.databaseLists.size >= 10_000) this.databaseLists.clear()
      this.databaseLists.set(orgId, { generation, rows: rows.map((db) => ({ ...db })) })
    }
    return rows
  }

  async countDatabases(orgId: string) {
    const r = await this.driver.get<{ n: number }>('SELECT COUNT(*) AS n FROM databases WHERE org_id = $1', [orgId])
    return num(r?.n ?? 0)
  }

  async createDatabase(orgId: string, input: NewDatabase, now: number, limit?: number) {
    return this.driver.transaction(async (tx) => {
      if (limit !== undefined) {
        const r = await tx.get<{ n: number }>('SELECT COUNT(*) AS n FROM databases WHERE org_id = $1', [orgId])
        if (num(r?.n ?? 0) >= limit) return 'limit' as const
      }
      const db: RegisteredDatabase = {
        id: Bun.randomUUIDv7(),
        org_id: orgId,
        ...input,
        ...DB_DEFAULTS,
        disabled_collectors: [],
        created_at: now,
        updated_at: now,
        last_seen_at: null,
      }
      await tx.run(
        `INSERT INTO databases (id, org_id, name, engine, engine_version, host, port, tags, poll_interval_seconds,
           collect_explain_plans, collect_replication, disabled_collectors, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
        [
          db.id,
          orgId,
          db.name,
          db.engine,
          db.engine_version,
          db.host,
          db.port,
          JSON.stringify(db.tags),
          db.poll_interval_seconds,
          db.collect_explain_plans,
          db.collect_replication,
          JSON.stringify(db.disabled_collectors),
          now,
          now,
        ],
      )
      return db
    }, databasesLock(orgId))
  }

  async getDatabase(orgId: string, id: string) {
    const r = await this.driver.get('SELECT * FROM databases WHERE id = $1 AND org_id = $2', [id, orgId])
    return r ? toDatabase(r) : undefined
  }

  async updateDatabase(orgId: string, id: string, patch: DatabasePatch, now: number) {
    const sets: Fragment[] = []
    for (const column of PATCHABLE_COLUMNS) {
      const value = patch[column]
      if (value === undefined) continue
      sets.push(sql`${ident(column, PATCHABLE_COLUMNS)} = ${column === 'tags' || column === 'disabled_collectors' ? JSON.stringify(value) : value}`)
    }
    sets.push(sql`updated_at = ${now}`)
    const q = sql`UPDATE databases SET ${join(sets)} WHERE id = ${id} AND org_id = ${orgId}`
    const changed = await this.driver.run(q.sql, q.params)
    return changed > 0 ? this.getDatabase(orgId, id) : undefined
  }

  async deleteDatabase(orgId: string, id: string) {
    const deleted = (await this.driver.run('DELETE FROM databases WHERE id = $1 AND org_id = $2', [id, orgId])) > 0
    if (deleted) {
      this.knownTexts.forget(id)
      this.closedHours?.changed(id)
    }
    return deleted
  }

  // ---- rate limits ----

  async hitRateLimit(key: string, limit: number, windowMs: number, now: number): Promise<LimitResult> {
    return this.driver.transaction(async (tx) => {
      await tx.run('DELETE FROM rate_events WHERE key = $1 AND at <= $2', [key, now - windowMs])
      const r = await tx.get<{ n: number; oldest: number | null }>(
        'SELECT COUNT(*) AS n, MIN(at) AS oldest FROM rate_events WHERE key = $1',
        [key],
      )
      if (num(r?.n ?? 0) >= limit) {
        return { allowed: false, retryAfterMs: Math.max(1, num(r?.oldest ?? now) + windowMs - now) }
      }
      await tx.run('INSERT INTO rate_events (key, at) VALUES ($1, $2)', [key, now])
      return { allowed: true, retryAfterMs: 0 }
    }, `dbm:rate:${key}`)
  }

  async takeCooldown(key: string, cooldownMs: number, now: number): Promise<LimitResult> {
    return this.hitRateLimit(key, 1, cooldownMs, now)
  }

  /** Removes rate-limit events older than `before` (housekeeping; keys never seen again). */
  async sweepRateEvents(before: number) {
    return this.driver.run('DELETE FROM rate_events WHERE at < $1', [before])
  }

  // ---- telemetry ----

  async ingest(orgId: string, batch: IngestBatch, now: number, limit?: number): Promise<IngestResult> {
    let effects: IngestEffects | undefined
    const named = `${orgId}\n${batch.database.name}`
    const result = await this.driver.transaction(async (tx): Promise<IngestResult> => {
      // One exchange (PostgreSQL) for the database's row, the batch's record and the reads its writes
      // depend on, planned for the database id this name had last time (ingestIds): the reads are only
      // used when the row found has that id, else planned and sent again. The record is inserted only for
      // a registered database of the batch's engine; one not registered yet is recorded after registering.
      const guess = this.ingestIds.get(named)
      const guessed = guess === undefined ? undefined : planBatch(tx.sqlDialect, guess, batch, this.knownTexts, now)
      const first = [
        { sql: 'SELECT * FROM databases WHERE org_id = $1 AND name = $2', params: [orgId, batch.database.name] },
        {
          sql: `INSERT INTO ingest_batches (database_id, batch_id, collected_at, received_at)
                SELECT id, $3, $4, $5 FROM databases WHERE org_id = $1 AND name = $2 AND engine = $6 ON CONFLICT DO NOTHING`,
          params: [orgId, batch.database.name, batch.batch_id, batch.collected_at, now, batch.database.engine],
        },
      ]
      const [found, recorded] = guessed ? await guessed.reads.send(tx, first) : await tx.runAll(first)
      const row = found!.rows[0] ?? (await this.registerFromBatch(tx, orgId, batch, now, limit))
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
          : found!.rows[0] && (await tx.get('SELECT 1 AS seen FROM ingest_batches WHERE database_id = $1 AND batch_id = $2', [database.id, batch.batch_id]))
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
        plan = planBatch(tx.sqlDialect, database.id, batch, this.knownTexts, now)
        await plan.reads.send(tx)
      }
      // The database's last_seen_at goes with the batch's writes, the transaction's last statements (one
      // exchange with COMMIT on PostgreSQL).
      // A report that the database is down (the header and availability only) carries no data: last_seen_at
      // stays the time of the latest data, and the report's own time is kept by availability/availability.ts.
      if (isReportOnly(batch)) {
        effects = await plan.write(tx, database, [], true)
        return { kind: 'applied', database }
      }
      const seen = {
        sql: 'UPDATE databases SET last_seen_at = $1, engine_version = COALESCE($2, engine_version) WHERE id = $3',
        params: [now, batch.database.engine_version ?? null, database.id],
      }
      effects = await plan.write(tx, database, [seen], true)
      return { kind: 'applied', database: { ...database, last_seen_at: now, engine_version: batch.database.engine_version ?? database.engine_version } }
    }, `dbm:ingest:${orgId}:${batch.database.name}`)
    // Caches learn what the batch wrote once it is committed (a rolled-back batch wrote nothing).
    if (effects && result.kind === 'applied') {
      this.telemetryChanged(result.database.id)
      if (effects.closedHoursChanged) this.closedHours?.changed(result.database.id)
      if (effects.texts.length > 0) this.knownTexts.remember(result.database.id, effects.texts, effects.textsAt)
    }
    return result
  }

  /**
   * Registers the batch's database, or finds it registered meanwhile, under the organization's lock:
   * the lock createDatabase takes, so concurrent registrations of different names (agents, POST
   * /databases) count each other against `limit`, and one of the same name is found, not duplicated.
   */
  private registerFromBatch(tx: SqlDriver, orgId: string, batch: IngestBatch, now: number, limit: number | undefined) {
    return tx.transaction(async (locked): Promise<Record<string, unknown> | 'limit'> => {
      const registered = await locked.get('SELECT * FROM databases WHERE org_id = $1 AND name = $2', [orgId, batch.database.name])
      if (registered) return registered
      if (limit !== undefined) {
        const r = await locked.get<{ n: number }>('SELECT COUNT(*) AS n FROM databases WHERE org_id = $1', [orgId])
        if (num(r?.n ?? 0) >= limit) return 'limit'
      }
      const id = Bun.randomUUIDv7()
      await locked.run(
        `INSERT INTO databases (id, org_id, name, engine, engine_version, host, port, tags, poll_interval_seconds,
           collect_explain_plans, collect_replication, disabled_collectors, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $12, $8, $9, $10, '[]', $11, $11)`,
        [
          id,
          orgId,
          batch.database.name,
          batch.database.engine,
          batch.database.engine_version ?? null,
          batch.database.host,
          batch.database.port,
          Math.max(1, Math.round(batch.interval_seconds)) || DB_DEFAULTS.poll_interval_seconds,
          DB_DEFAULTS.collect_explain_plans,
          DB_DEFAULTS.collect_replication,
          now,
          // The agent config's tags apply on registration only: later edits through the API stay.
          JSON.stringify(batch.database.tags ?? {}),
        ],
      )
      return (await locked.get('SELECT * FROM databases WHERE id = $1', [id]))!
    }, databasesLock(orgId))
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
