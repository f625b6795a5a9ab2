// The stored telemetry of one database as the doctor's rules read it: each part is loaded at most once
// per diagnosis, and only when a rule asks for it, so a ClickHouse diagnosis never reads PostgreSQL
// tables and the other way round.
import type { WriteRefusalSpan } from '../store/write-faults.ts'
import type {
  ActiveQuery,
  ClickHouseUsers,
  ColumnStat,
  DisabledTrigger,
  LockEntry,
  MergeEntry,
  MutationEntry,
  PartStat,
  ReplicationStatus,
  SecurityStatus,
  SequenceStat,
  UnindexedForeignKey,
  WalDirStatus,
  XminHolder,
} from '../../shared/wire.ts'
import type { Latest, MetricSource } from '../store/internals/types.ts'
import type { ClickHouseSource } from '../store/clickhouse/types.ts'
import type { IndexRow, TableRow } from '../store/objects/types.ts'
import type { StoredPlan } from '../store/statements/plans.ts'
import type { QuerySort, QueryStatsRow } from '../store/statements/reads.ts'
import { minuteFloor } from '../store/window.ts'
import type { RegisteredDatabase, Store } from '../store/types.ts'
import type { AvailabilityState } from '../store/availability/types.ts'

/** Everything a diagnosis may read about more objects than this is cut (the largest first). */
const MAX_OBJECTS = 100_000

/** Thresholds set over the rules' defaults, by rule then key: numbers, and lists of names (doctor/thresholds.ts). */
export type ThresholdOverrides = Record<string, Record<string, number | readonly string[]>>

export interface Snapshot<T> {
  ts: number | null
  entries: T[]
}

/** Sums of counters and latest gauges over a trailing window, by subject then metric. */
export type Totals = Map<string, Record<string, number>>

/**
 * When the data read was collected: a snapshot's or latest section's `ts`, the latest `ts` of rows that
 * carry one (tables, indexes); null for data without a time of its own (and for nothing read: an empty
 * snapshot's null ts, no latest section).
 */
function collectedAt(value: unknown): number | null | 'nothing' {
  // A snapshot that was never collected ({ ts: null, entries: [] }) dates nothing: a rule that reads the
  // locks only to name a table in a title keeps the time of the activity it judged.
  if (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    'entries' in value &&
    (value as { ts?: unknown }).ts === null
  )
    return 'nothing'
  const tsOf = (v: unknown) =>
    v !== null && typeof v === 'object' && typeof (v as { ts?: unknown }).ts === 'number'
      ? (v as { ts: number }).ts
      : null
  if (Array.isArray(value)) {
    let latest: number | null = null
    for (const row of value) {
      const ts = tsOf(row)
      if (ts !== null && (latest === null || ts > latest)) latest = ts
    }
    return latest
  }
  return tsOf(value)
}

export class DoctorContext {
  private readonly memo = new Map<string, Promise<unknown>>()

  constructor(
    readonly store: Store,
    readonly db: RegisteredDatabase,
    /** Evaluation time (epoch ms). */
    readonly now: number,
    /** The database's thresholds over the rules' defaults (and the server's, a test hook: Deps.doctorThresholds). */
    private readonly overrides: ThresholdOverrides = {},
    /**
     * `local`: the server is `dbm local`'s, whose agent runs in its process on the DSNs of its command line
     * (no config file). `servingSince`: when the serving process started (Deps.servingSince).
     * `storeRefusals`: the store's refused writes under way or last ended (store/write-faults.ts);
     * `ingestShedding`: this process's batches shed for want of room, likewise (ingest-admission.ts).
     */
    readonly setup: {
      local: boolean
      servingSince?: number
      storeRefusals?: WriteRefusalSpan
      ingestShedding?: WriteRefusalSpan
    } = { local: false },
  ) {}

  /** The rule's thresholds, with the database's values applied. */
  thresholds<T extends Record<string, number>>(rule: { id: string; thresholds: T }): T {
    const override = this.overrides[rule.id]
    if (!override) return rule.thresholds
    const merged: Record<string, number> = { ...rule.thresholds }
    for (const [key, value] of Object.entries(override)) if (typeof value === 'number') merged[key] = value
    return merged as T
  }

  /** The rule's lists of names (an allowlist), with the database's lists in place of the defaults. */
  names<L extends Record<string, readonly string[]>>(rule: { id: string; lists?: L }): L {
    const lists = (rule.lists ?? {}) as L
    const override = this.overrides[rule.id]
    if (!override) return lists
    const merged: Record<string, readonly string[]> = { ...lists }
    for (const [key, value] of Object.entries(override))
      if (Array.isArray(value) && Object.hasOwn(lists, key)) merged[key] = value
    return merged as L
  }

  /**
   * This context as one rule (or the figures) reads it: the same memoised data, and `asOf()`, the
   * collected_at of the latest data it read (a snapshot's or latest section's time, a table's or
   * index's latest row); for data that has no time of its own (statement windows, summed counters),
   * the time of the database's latest batch. Null when it read nothing and no batch has arrived.
   */
  forRule(): DoctorContext & { asOf(): number | null } {
    const view = Object.create(this) as DoctorContext & { asOf(): number | null }
    let latest: number | null = null
    let untimed = false
    const note = (ts: number | null | 'nothing') => {
      if (ts === 'nothing') return
      if (ts === null) untimed = true
      else if (latest === null || ts > latest) latest = ts
    }
    view.once = <T>(key: string, load: () => Promise<T>) =>
      this.once(key, load).then((value) => {
        note(collectedAt(value))
        return value
      })
    view.asOf = () => {
      const lastBatch = this.db.last_seen_at === null ? null : Math.min(this.db.last_seen_at, this.now)
      if (latest === null) return lastBatch
      return untimed && lastBatch !== null && lastBatch > latest ? lastBatch : latest
    }
    return view
  }

  /** `load()` once per diagnosis under `key`. */
  once<T>(key: string, load: () => Promise<T>): Promise<T> {
    let found = this.memo.get(key) as Promise<T> | undefined
    if (!found) {
      found = load()
      this.memo.set(key, found)
    }
    return found
  }

  /** The database's latest availability as its agent reported it; undefined before any report. */
  availability(): Promise<AvailabilityState | undefined> {
    return this.once('availability', () => this.store.databaseAvailability.state(this.db.id))
  }

  activity(): Promise<Snapshot<ActiveQuery>> {
    return this.once('activity', () => this.store.sessions.activeQueries(this.db.id, MAX_OBJECTS))
  }

  locks(): Promise<Snapshot<LockEntry>> {
    return this.once('locks', () => this.store.sessions.locks(this.db.id, MAX_OBJECTS))
  }

  tables(): Promise<TableRow[]> {
    return this.once('tables', () => this.store.objects.listTables(this.db.id, 'size', MAX_OBJECTS))
  }

  indexes(): Promise<IndexRow[]> {
    return this.once('indexes', () => this.store.objects.listIndexes(this.db.id, 'size', MAX_OBJECTS))
  }

  /** The latest sequences (collected by `tables`), the most used first; none from agents that do not send them. */
  sequences(): Promise<Snapshot<SequenceStat>> {
    return this.once('sequences', async () => {
      const found = await this.store.latestSnapshot(this.db.id, 'sequences')
      return { ts: found?.ts ?? null, entries: Array.isArray(found?.payload) ? (found.payload as SequenceStat[]) : [] }
    })
  }

  /** The latest foreign keys without an index on their referencing columns (collected by `tables`). */
  unindexedForeignKeys(): Promise<Snapshot<UnindexedForeignKey>> {
    return this.once('unindexed_foreign_keys', async () => {
      const found = await this.store.latestSnapshot(this.db.id, 'unindexed_foreign_keys')
      return {
        ts: found?.ts ?? null,
        entries: Array.isArray(found?.payload) ? (found.payload as UnindexedForeignKey[]) : [],
      }
    })
  }

  /** The latest column statistics (collected by `column_stats`: the tables most read by sequential scans); none from agents that do not send them. */
  columnStats(): Promise<Snapshot<ColumnStat>> {
    return this.once('column_stats', async () => {
      const found = await this.store.latestSnapshot(this.db.id, 'column_stats')
      return { ts: found?.ts ?? null, entries: Array.isArray(found?.payload) ? (found.payload as ColumnStat[]) : [] }
    })
  }

  /** The latest disabled triggers (collected by `triggers`); null from agents that do not send them. */
  disabledTriggers(): Promise<{ ts: number; entries: DisabledTrigger[] } | null> {
    return this.once('disabled_triggers', async () => {
      const found = await this.store.latestSnapshot(this.db.id, 'disabled_triggers')
      return found && Array.isArray(found.payload)
        ? { ts: found.ts, entries: found.payload as DisabledTrigger[] }
        : null
    })
  }

  /** The latest size of pg_wal and last checkpoint (collected by `wal_dir`); null from agents that do not send them. */
  walDir(): Promise<{ ts: number; status: WalDirStatus } | null> {
    return this.once('wal_dir', async () => {
      const found = await this.store.latestSnapshot(this.db.id, 'wal_dir')
      return found && found.payload !== null && typeof found.payload === 'object'
        ? { ts: found.ts, status: found.payload as WalDirStatus }
        : null
    })
  }

  /** The latest roles, settings, functions, schemas and pg_hba lines (collected by `security`); null from agents that do not send them. */
  security(): Promise<{ ts: number; status: SecurityStatus } | null> {
    return this.once('security', async () => {
      const found = await this.store.latestSnapshot(this.db.id, 'security')
      return found && found.payload !== null && typeof found.payload === 'object'
        ? { ts: found.ts, status: found.payload as SecurityStatus }
        : null
    })
  }

  /** ClickHouse: the latest users with their authentication and hosts (collected by `security`); null from agents that do not send them. */
  clickhouseUsers(): Promise<{ ts: number; status: ClickHouseUsers } | null> {
    return this.once('clickhouse_users', async () => {
      const found = await this.store.latestSnapshot(this.db.id, 'clickhouse_users')
      return found && found.payload !== null && typeof found.payload === 'object'
        ? { ts: found.ts, status: found.payload as ClickHouseUsers }
        : null
    })
  }

  /** The latest named holders of the xmin horizon (collected by database_stats); null from agents that do not send them. */
  xminHolders(): Promise<{ ts: number; entries: XminHolder[] } | null> {
    return this.once('xmin_holders', async () => {
      const found = await this.store.latestSnapshot(this.db.id, 'xmin_holders')
      return found && Array.isArray(found.payload) ? { ts: found.ts, entries: found.payload as XminHolder[] } : null
    })
  }

  replication(): Promise<Latest<ReplicationStatus> | undefined> {
    return this.once('replication', () => this.store.internals.latestReplication(this.db.id))
  }

  /** The latest database_stats section: gauges (connections, settings, wraparound ages) and the last cycle's deltas. */
  databaseStats(): Promise<Latest<Record<string, number | null>> | undefined> {
    return this.once('database_stats', () => this.store.internals.latestCounters(this.db.id, 'database_stats'))
  }

  /** Statement statistics over the trailing `windowMs`. */
  queries(windowMs: number, sort: QuerySort = 'total_time', limit = 100): Promise<QueryStatsRow[]> {
    return this.once(`queries:${windowMs}:${sort}:${limit}`, () =>
      this.store.listQueryStats(
        this.db.id,
        { since: this.now - windowMs, until: this.now, minuteFloor: minuteFloor(this.now) },
        sort,
        limit,
      ),
    )
  }

  plans(hash: string, windowMs: number, limit = 50): Promise<StoredPlan[]> {
    return this.once(`plans:${hash}:${windowMs}`, () =>
      this.store.listPlans(this.db.id, hash, { since: this.now - windowMs, until: this.now }, limit),
    )
  }

  /**
   * Counters summed and gauges at their latest over the trailing `windowMs`, per subject, for a metric
   * family of either engine (`bgwriter`, `database`, `wal`, `io`; ClickHouse `server`, `disk`, `parts`).
   */
  totals(source: MetricSource | ClickHouseSource, windowMs: number): Promise<Totals> {
    return this.once(`totals:${source}:${windowMs}`, async () => {
      const intervals = {
        since: this.now - windowMs,
        until: this.now,
        minuteFloor: minuteFloor(this.now),
        bucketSeconds: Math.ceil(windowMs / 1000),
      }
      const points =
        source === 'server' || source === 'disk' || source === 'parts'
          ? await this.store.clickhouse.metricSeries(this.db.id, source, intervals)
          : await this.store.internals.metricSeries(this.db.id, source as MetricSource, intervals)
      const totals: Totals = new Map()
      // Points come in time order: counters add up, and a later gauge value replaces an earlier one.
      // (Which keys are gauges is the caller's knowledge; summing is right for counters only.)
      for (const p of points) {
        const into = totals.get(p.subject) ?? {}
        for (const [k, v] of Object.entries(p.values)) into[k] = (into[k] ?? 0) + v
        totals.set(p.subject, into)
      }
      return totals
    })
  }

  /** totals() added up over every subject, by metric (the database-wide families have a single subject). */
  async sums(source: MetricSource | ClickHouseSource, windowMs: number): Promise<Record<string, number>> {
    const sums: Record<string, number> = {}
    for (const values of (await this.totals(source, windowMs)).values()) {
      for (const [metric, value] of Object.entries(values)) sums[metric] = (sums[metric] ?? 0) + value
    }
    return sums
  }

  parts(): Promise<Latest<PartStat[]> | undefined> {
    return this.once('parts', () => this.store.clickhouse.latestParts(this.db.id))
  }

  merges(): Promise<Latest<MergeEntry[]> | undefined> {
    return this.once('merges', () => this.store.clickhouse.latestMerges(this.db.id))
  }

  mutations(): Promise<Latest<MutationEntry[]> | undefined> {
    return this.once('mutations', () => this.store.clickhouse.latestMutations(this.db.id))
  }

  serverMetrics(): Promise<Latest<Record<string, number | null>> | undefined> {
    return this.once('server_metrics', () => this.store.clickhouse.latestServerMetrics(this.db.id))
  }
}
