// Every limit, lifetime and default of the server in one table, as the spec and DECISIONS.md state
// them. Route handlers read from here instead of carrying literals.
import { INGEST_BODY_LIMIT_BYTES, tagLimits } from '../shared/ingest-limits.ts'
import { MAX_POLL_INTERVAL_SECONDS, NAME_MAX_CHARS } from '../shared/database-limits.ts'

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

export const authRateLimits = {
  signup: { limit: 5, windowMs: HOUR },
  login: { limit: 10, windowMs: HOUR },
  refresh: { limit: 30, windowMs: HOUR },
  forgot_password: { limit: 5, windowMs: HOUR },
  reset_password: { limit: 10, windowMs: HOUR },
  resend_verification: { limit: 5, windowMs: HOUR },
  accept_invite: { limit: 10, windowMs: HOUR },
} as const
export type RateLimitedEndpoint = keyof typeof authRateLimits

/** forgot-password and resend-verification: one accepted request per account per minute. */
export const mailCooldownMs = MINUTE
/** Between two test deliveries to an organization's webhook. */
export const webhookTestCooldownMs = 10 * SECOND
/** Invites sent (POST /organization/invites) per organization per hour, refused ones included: each one mails someone. */
export const inviteLimit = { limit: 30, windowMs: HOUR }
/** Webhook URL changes (PUT /organization/webhook) per organization per hour, refused ones included. */
export const webhookPutLimit = { limit: 30, windowMs: 60 * MINUTE }
/**
 * Actions asked of agents (POST /databases/{id}/actions) per minute, refused ones included, in buckets of
 * their own for kills (cancel, terminate) and for explains, so that a flood of explains never uses up the
 * room for a kill. Each counts per requester (a user, or an API key) and per database; the requester's is
 * counted first and a request it refuses never reaches the database's, and one requester alone stays below
 * the database's, so one member cannot use up another's room.
 */
export const actionLimits = {
  windowMs: MINUTE,
  kill: { perRequester: 10, perDatabase: 30 },
  explain: { perRequester: 20, perDatabase: 40 },
} as const
/**
 * Agents' long-polls for actions (GET /agent/actions) waiting at once in one serve process: per database
 * (its agent's one, and room for a restart's overlap) and per API key (one agent polls once per PostgreSQL
 * database it monitors). One more is a 429 with Retry-After, at once.
 */
export const agentActionPolls = { perDatabase: 2, perKey: 100, retryAfterMs: 5 * SECOND } as const
/** A database's own agent key (the one whose long-polls are heard) may be taken over by another key once it has not polled this long. */
export const agentKeyTakeoverMs = 2 * MINUTE
/**
 * An explain's parameter values (POST /databases/{id}/actions): at most this many, and this many bytes
 * (UTF-8) in all; more is a 400. The agent binds each as a constant in the plan it asks for.
 */
export const explainParameterLimits = { count: 100, totalBytes: 16 * 1024 } as const
/** Actions one database may have waiting for its agent (pending, unexpired), kills and explains apart: one more is a 429 until one is taken or expires. */
export const pendingActionsPerDatabase = { kill: 10, explain: 10 } as const

export const tokenLifetimes = {
  accessSeconds: 15 * 60,
  refreshSeconds: 7 * 24 * 60 * 60,
  resetMs: HOUR,
  verifyMs: 7 * DAY,
  inviteMs: 7 * DAY,
} as const

export const passwordLength = { min: 8, max: 1024 } as const

/** Body caps: account and database routes; ingest gets the larger one, which the agent's batch parts keep under. */
export const bodyLimits = { default: 1024 * 1024, ingest: INGEST_BODY_LIMIT_BYTES } as const

/**
 * The request line and headers: over `bytes`, a 431 with the error body. Bun's HTTP parser refuses
 * larger ones itself, with an empty 431 and no hook to give it a body, so its limit is raised to
 * `parser` and the smaller one applied in the app; only a head past `parser` still gets Bun's empty
 * answer. (`bytes` is Bun's own default limit, so clients see the same line drawn as before.)
 */
export const headerLimits = { bytes: 16 * 1024, parser: 64 * 1024 } as const

export const unverifiedDatabaseLimit = 1

/**
 * Fields of an ingest batch this server does not know (a newer agent's): a batch may carry this many
 * distinct unknown paths (`query_stats[].x` counts once, however many rows carry it), one more is a 400;
 * the debug line names the first few, each cut to a length, and counts the rest. Server policy, not
 * part of the wire contract: a newer agent adds a handful of fields per section.
 */
export const unknownIngestFields = { distinctPaths: 64, named: 8, namedChars: 100 } as const

/**
 * How far a batch's collected_at may be ahead of the server's clock (agent clocks drift a little; one
 * further ahead would sit in the future of every window and stay the "latest" sample until then): past
 * it, the batch is a 400 naming collected_at.
 */
export const ingestClockSkewMs = 10 * MINUTE

/**
 * `dbm serve` spreads the databases' rollups of a closed 10-minute span or hour over this time after it
 * closes (each database at its own offset, rollups/rollups.ts rollupDelayMs), so that a fleet's rollups do
 * not all fall in the first poll after the hour and show in the ingest tail. Reads stay exact meanwhile:
 * what is not rolled up yet is read from the minute rows.
 */
export const rollupSpreadMs = 5 * MINUTE

/**
 * Agents' clocks (store/agent-clock/): the largest offset measured within `windowMs` is the one kept;
 * the doctor reports a clock further than `reportAfterMs` ahead or behind (agent_clock_skew). A batch's
 * age (X-Dbm-Batch-Age) is believed up to `maxBatchAgeMs` (the agent's buffer keeps a batch an hour).
 */
export const agentClockLimits = {
  windowMs: 5 * MINUTE,
  reportAfterMs: 30_000,
  maxBatchAgeMs: 24 * 60 * MINUTE,
} as const

/**
 * Admission of ingests in one serve process (ingest-admission.ts): at most `inFlight` batches admitted
 * and not yet answered, holding at most `bodyBytes` of declared bodies (one is always admitted); past
 * either, a 503 with Retry-After drawn from `retryAfterSeconds` (inclusive range, spread so the refused
 * come back spread). Backlog (a batch the agent sends from its buffer, X-Dbm-Batch-Age at least
 * `backlogAgeSeconds`) meets the lower marks, so current batches keep their room while a fleet's buffers
 * drain after a restart. A body of unknown length counts as `unknownBodyBytes`.
 */
export const ingestAdmissionLimits = {
  current: { inFlight: 16, bodyBytes: 16 * 1024 * 1024 },
  backlog: { inFlight: 6, bodyBytes: 6 * 1024 * 1024 },
  backlogAgeSeconds: 15,
  retryAfterSeconds: { current: [1, 3], backlog: [3, 12] },
  unknownBodyBytes: 1024 * 1024,
  /** An admitted request whose answer was never seen stops counting after this long. */
  staleTicketMs: 2 * MINUTE,
  /** A shedding episode ends (one info line) at the first admission this long after the last refusal. */
  episodeQuietMs: 30 * SECOND,
  /**
   * While more than one organization sent an ingest within activeMs, each holds at most
   * max(min, fraction × the mark) places (of current batches, and of backlog): one tenant cannot take them all.
   */
  orgShare: { min: 4, fraction: 0.5, activeMs: 10 * MINUTE },
  /** An admitted ingest's body must have arrived this long after the request did: else 408, its place freed. */
  bodyReadMs: 30 * SECOND,
} satisfies IngestAdmissionLimits

export interface IngestAdmissionLimits {
  current: { inFlight: number; bodyBytes: number }
  backlog: { inFlight: number; bodyBytes: number }
  backlogAgeSeconds: number
  retryAfterSeconds: { current: readonly [number, number]; backlog: readonly [number, number] }
  unknownBodyBytes: number
  staleTicketMs: number
  episodeQuietMs: number
  orgShare: { min: number; fraction: number; activeMs: number }
  bodyReadMs: number
}

/** API key last_used_at is written at most this often per key. */
export const apiKeyTouchIntervalMs = MINUTE

export const databaseDefaults = {
  ports: { postgres: 5432, clickhouse: 8123 },
  /** A database counts as connected while a batch arrived within max(3 × poll interval, this). */
  connectedFloorMs: MINUTE,
} as const

/**
 * How long an agent may send nothing before it counts as silent (the database disconnected, DECISIONS.md):
 * max(3 × the poll interval, `floorMs`, by default databaseDefaults.connectedFloorMs).
 */
export function silentAfterMs(
  pollIntervalSeconds: number,
  floorMs: number = databaseDefaults.connectedFloorMs,
): number {
  return Math.max(3 * pollIntervalSeconds * 1000, floorMs)
}

/**
 * After `dbm serve` starts, how long its agents have to come back before a silence that began while no
 * serve ran is judged (agent_disconnected): agents buffered meanwhile and return at their next retry
 * round (30 s plus up to a poll interval of jitter), maybe after being shed once or twice. The silence
 * then counts from the start plus this grace, so such an agent is reported silentAfterMs after it.
 */
export function restartGraceMs(pollIntervalSeconds: number): number {
  return silentAfterMs(pollIntervalSeconds)
}

export const fieldLimits = {
  name: NAME_MAX_CHARS,
  host: 255,
  email: 254,
  tagKey: tagLimits.key,
  tagValue: tagLimits.value,
  tags: tagLimits.count,
  engineVersion: 200,
  pollIntervalMaxSeconds: MAX_POLL_INTERVAL_SECONDS,
} as const

/** Housekeeping: rate-limit events older than this are swept. */
export const rateEventRetentionMs = 2 * HOUR

/** Result sizes of the list endpoints: default and maximum `limit` (over the maximum: clamped). */
export const resultLimits = {
  queries: { default: 25, max: 100 },
  explain: { default: 10, max: 50 },
  active: { default: 50, max: 200 },
  locks: { default: 100, max: 500 },
  tables: { default: 50, max: 500 },
  indexes: { default: 50, max: 500 },
  parts: { default: 100, max: 1000 },
  merges: { default: 100, max: 1000 },
  mutations: { default: 100, max: 1000 },
  recommendations: { default: 100, max: 500 },
  alerts: { default: 100, max: 500 },
  silences: { default: 100, max: 500 },
  invalid_constraints: { default: 100, max: 1000 },
  bloat: { default: 50, max: 500 },
  connections: { default: 100, max: 1000 },
  progress: { default: 100, max: 1000 },
  events: { default: 500, max: 2000 },
  /** GET /active/history: snapshot times of a window (a day of 10-second polls is 8,640). */
  snapshots: { default: 2000, max: 10_000 },
  /** GET /locks/chains. */
  lock_chains: { default: 100, max: 500 },
  /** GET /log-events: entries per page. */
  log_events: { default: 100, max: 500 },
} as const

/** Default window of the since/until endpoints, and their default bucket. */
export const telemetryDefaults = { windowMs: 24 * HOUR, bucketSeconds: 60 } as const

/** Waits, replication history and internals timeseries: interval limits and version gates. */
export const internalsLimits = {
  /** Most intervals one request may cut its window into. */
  maxIntervals: 10_000,
  /** Largest bucket; larger values are clamped to it. */
  maxBucketSeconds: 31 * 24 * 3600,
  /** Timeseries without a bucket use minute intervals up to this window, hourly beyond. */
  minuteWindowMs: 24 * HOUR,
  /** Minimum server major of the version-gated endpoints. */
  walStatsMinVersion: 14,
  ioStatsMinVersion: 16,
} as const

/** The unused-index filter's size threshold: the spec's "larger than 1 MB". */
export const unusedIndexMinBytes = 1_048_576

/** The active-query WebSocket's `interval` in seconds: default, minimum, maximum (larger is clamped). */
export const activeStreamInterval = { default: 5, min: 1, max: 60 } as const

/**
 * Telemetry retention (DECISIONS.md: unverified 24 h, verified DBM_RETENTION_DAYS) and the compaction of
 * minute buckets: minute rows are kept 48 h (minute timeseries serve windows up to 24 h, so a day-long
 * window that ended up to a day ago still gets minute points); older parts of a window are read from
 * the hourly buckets, which hold the same sums.
 */
export const retentionLimits = {
  unverifiedMs: DAY,
  minuteRowsMs: 48 * HOUR,
  /** Applied batch ids are remembered this long (the agent gives up on a buffered batch after 1 hour). */
  batchIdsMs: DAY,
  /** Rows deleted per statement, so a sweep never holds the store for long. */
  deleteBatchRows: 5000,
} as const

/**
 * Server log events (store/logs/, routes/log-events.ts): entries are kept a week (or the
 * organization's retention when shorter); their counts like other buckets (minute rows 48 h, then hourly
 * for the retention). The summary's automatic bucket keeps a window to at most maxAutoBuckets buckets.
 */
export const logEventLimits = {
  entriesMs: 7 * DAY,
  maxAutoBuckets: 120,
  /** Longest `q` (characters). */
  maxQueryText: 200,
} as const

/** Session and lock history (store/sessions/writes.ts): how retention compacts the snapshots. */
export const sessionHistoryLimits = {
  /** Every snapshot is kept this long (the time slider steps through each poll). */
  everyPollMs: DAY,
  /**
   * Past everyPollMs, a snapshot stays (up to the retention) when a session had waited for a lock this
   * long (the doctor's blocked-session warning), and a lock chain when it lasted this long. The waits of
   * a busy OLTP load (pgbench's: milliseconds on its branch rows, caught by most polls) go after a day.
   */
  longWaitMs: 30 * SECOND,
  /** Past everyPollMs, a snapshot also stays when a statement ran or a transaction was open this long: the doctor's long-running warning. */
  longMs: 5 * MINUTE,
} as const

/** The monitor (monitor/): how often it evaluates and sweeps, and its notifications. */
export const healthMonitorDefaults = {
  evaluateEveryMs: MINUTE,
  retentionEveryMs: 10 * MINUTE,
  /** Databases silent (or never seen) for longer are not evaluated; their open alerts stay as they are. */
  silentDatabaseMs: 7 * DAY,
  webhookTimeoutMs: 5 * SECOND,
  /** An undelivered notification is retried at each evaluation for this long, then given up. */
  notificationMaxAgeMs: DAY,
  /** A notification being delivered is not picked up by another process before this lease ends. */
  deliveryLeaseMs: 5 * MINUTE,
  /**
   * A database that went down or came back since its diagnosis is diagnosed at once, but not again within
   * this long of its previous diagnosis: a flapping database costs at most two diagnoses (and alert changes)
   * a minute, not one per tick.
   */
  changedFloorMs: 30 * SECOND,
} as const

/** Availability reports (store/availability/writes.ts). */
export const availabilityLimits = {
  /** Down again with the same cause within this long of an outage's end: the outage goes on (flapping). */
  reopenWithinMs: MINUTE,
} as const

export const webhookUrlMaxLength = 2048

/** Alert destinations (routes/alert-destinations.ts). */
export const alertDestinationLimits = {
  /** Destinations per organization. */
  perOrganization: 20,
  /** Addresses of one email destination. */
  emails: 20,
  /** A routing key's or API key's length. */
  keyMaxLength: 256,
  /** Between two tests of one destination. */
  testCooldownMs: 10 * SECOND,
  /**
   * Tests per organization per hour, refused ones included, whatever the destination: a destination
   * deleted and made again starts no new count (each test may mail up to `emails` addresses).
   */
  testsPerOrganization: { limit: 10, windowMs: HOUR },
  /**
   * Email destinations' recipient lists set (POST with `to`, PATCH with `to`) per organization per hour,
   * refused ones included: alert mail goes only to addresses an owner set, and not to many a minute.
   */
  emailListsPerOrganization: { limit: 10, windowMs: HOUR },
} as const

/** Alert routes and silences (routes/alert-routes.ts, routes/silences.ts). */
export const alertRoutingLimits = {
  /** Routes per organization. */
  routesPerOrganization: 50,
  /** Values of one matcher list (severity, rule, database_id), pairs of a tag matcher, destinations of a route. */
  matchValues: 50,
  /** A rule name's, key's, tag key's or value's length. */
  matchTextMax: 512,
  /** The shortest and longest repeat interval. */
  repeatMinS: 5 * 60,
  repeatMaxS: 7 * 24 * 60 * 60,
  /** Silences not yet ended per organization. */
  activeSilencesPerOrganization: 500,
  /** A silence ends at most this long from now. */
  silenceMaxMs: 90 * DAY,
  /** A silence's comment. */
  commentMax: 1000,
} as const
