// Sends one database's batches to POST /api/v1/ingest. When the API cannot take a batch it goes to
// the disk buffer, and while anything is buffered new batches queue behind it so the server sees
// them in order. The buffer is drained at start, and then in retry rounds: every retry interval (30 s)
// plus a random jitter of up to one poll interval, so agents that lost the server together do not all
// come back in the same second. A 429 or 503 with Retry-After (seconds or an HTTP date, at most 5 min
// honoured) puts the next round after it instead, plus a jitter of up to as much again (at most one poll
// interval). A round sends the buffer oldest first at a bounded pace (after each batch it waits as long
// as the server took to answer, at least drainGapMs) and stops at the first batch not taken. Batches
// sent from the buffer carry their age (X-Dbm-Batch-Age) so a loaded server sheds them before current
// ones; every batch carries the agent's clock as it leaves (X-Dbm-Sent-At), by which the server tells
// the agent's clock ahead or behind its own. A batch the server took but whose answer was lost is sent again; the server acknowledges it
// as a duplicate (batch_id), so every batch is applied once.
// What happens to a batch, by the server's answer:
// - 2xx: delivered. 400, 413, 422 (the server calls it malformed): dropped, logged as an error with the
//   server's message and counted (dropped_batches in /healthz).
// - 401/403: the API refuses the key; logged as an error once and reported by refusal(); the batches
//   stay buffered, so a key fixed by a config reload delivers them.
// - anything else (no answer, 404, 408, 409, 429, 5xx): kept and retried.
// A batch is lost only when the agent cannot keep it: the buffer fails (a full disk; logged once per
// episode), buffer.max_bytes makes room (oldest first), or it outlives the buffer lifetime (1 h); each
// loss is logged with a count and counted (lost_batches in /healthz). While the buffer fails, a batch
// that would queue behind it is sent directly instead (out of order rather than lost).
// What the server knows: it announces its wire version in every ingest answer (X-Dbm-Wire-Version;
// src/shared/wire-contract.ts); a server that takes a batch without saying is of the first release
// (version 1). Every batch, buffered ones included, is sent without the fields added after the server's
// version, counted (left_out in /healthz) and logged once per field. Before the first answer a batch
// goes whole (every release ignores unknown fields). A 400 that names an unknown field (a server older
// than 0.1.0, or stricter than it announced) or refuses too many of them gets the batch again without
// that field (and, from a server that announced nothing, without all the first release lacks), logged
// and counted (unknown_field_retries); the field stays left out of later batches. Only a refusal that
// names no field, or one already left out, drops the batch.
import { join } from 'node:path'
import { BATCH_AGE_HEADER, INGEST_PATH, SENT_AT_HEADER } from '../shared/ingest-path.ts'
import type { IngestBatch, IngestResponse } from '../shared/wire.ts'
import { type BufferOperation, DiskBuffer, bufferFileName } from './buffer.ts'
import type { AgentLogger } from './collectors/types.ts'
import { DEFAULT_BUFFER_MAX_BYTES } from './config.ts'
import type { ShipperMetrics } from './metrics.ts'
import { VERSION } from '../version.ts'
import {
  FIRST_WIRE_VERSION,
  type LeftOut,
  WIRE_RELEASES,
  WIRE_VERSION_HEADER,
  addedAfter,
  leaveOut,
} from '../shared/wire-contract.ts'

/** Most times one batch is sent again without a field the server refused by name. */
const MAX_UNKNOWN_FIELD_RETRIES = 16

/** Statuses with which the server calls a batch malformed: it would refuse it again, so it is dropped. */
const MALFORMED_STATUSES = new Set([400, 413, 422])

/** Statuses whose Retry-After is honoured: the server asks the agent to come back later. */
const RETRY_AFTER_STATUSES = new Set([429, 503])
/** The longest Retry-After honoured; a longer one (or a date further away) waits this long. */
export const MAX_RETRY_AFTER_MS = 5 * 60_000
/** Defaults of the pacing options (ShipperOptions). */
export const DEFAULT_JITTER_MS = 10_000
export const DEFAULT_DRAIN_GAP_MS = 100

/**
 * A Retry-After header's wait in ms from `now`: delay-seconds or an HTTP date (RFC 9110), at most
 * MAX_RETRY_AFTER_MS; 0 for a date in the past; null when absent or neither form.
 */
export function parseRetryAfter(header: string | null, now: number): number | null {
  const value = header?.trim()
  if (!value) return null
  if (/^\d+$/.test(value)) return Math.min(Number(value) * 1000, MAX_RETRY_AFTER_MS)
  // A date names its weekday or month in letters; Date.parse would take "12" or "1.5" as a year.
  if (!/[A-Za-z]/.test(value)) return null
  const at = Date.parse(value)
  if (Number.isNaN(at)) return null
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS)
}

/**
 * When the next retry round starts, in ms from now: after the server's Retry-After when it gave one,
 * plus a random share of as much again (at most `jitterMs`); else after the retry interval plus a
 * random share of `jitterMs`. `random` is in [0, 1).
 */
export function retryDelayMs(
  retryAfterMs: number | null,
  retryIntervalMs: number,
  jitterMs: number,
  random: number,
): number {
  if (retryAfterMs === null) return retryIntervalMs + Math.floor(random * jitterMs)
  return retryAfterMs + Math.floor(random * Math.min(retryAfterMs, jitterMs))
}

/** The API's reachability as every database's shipper sees it, for /healthz. */
export class ApiHealth {
  lastSuccessAt: number | null = null
  lastFailureAt: number | null = null
  lastError: string | null = null
  /** When the current run of failed requests began; null while the latest request got through. */
  failingSince: number | null = null
  /** The wire version the server announced in its latest ingest answer (none: 1); null before any. */
  wireVersion: number | null = null
  /** Fields the server refused by name (400 unknown field); `*`: it refused too many unknown fields. */
  readonly refusedFields = new Set<string>()

  constructor(readonly endpoint: string) {}

  succeeded(at: number): void {
    this.lastSuccessAt = at
    this.failingSince = null
  }

  failed(at: number, error: string): void {
    this.lastFailureAt = at
    this.lastError = error
    this.failingSince ??= at
  }

  /** Null before the first request; then whether the latest one got through. */
  get reachable(): boolean | null {
    if (this.lastSuccessAt === null && this.lastFailureAt === null) return null
    return this.failingSince === null
  }
}

/** The unknown field a 400 names (`unknown field: x`), `*` when it refuses too many of them, else null. */
export function unknownFieldIn(error: string): string | null {
  if (/too many unknown fields/i.test(error)) return '*'
  const named = /unknown (?:field|property)s?\b[^A-Za-z0-9_/]*([A-Za-z0-9_.*[\]/]+)/i.exec(error)
  if (!named) return null
  // `/tables/0/x` and `tables.0.x` as a path of the contract: `tables[].x`.
  return named[1]!
    .replace(/^\//, '')
    .replaceAll('/', '.')
    .replace(/\.\d+(?=\.|$)/g, '[]')
    .replace(/\[\d+\]/g, '[]')
}

export interface LossRecord {
  at: number
  reason: string
}

/** Per-database totals kept by the agent across runner restarts (a reload that restarts a database). */
export interface ShippingCounters {
  droppedBatches: number
  lastDrop: LossRecord | null
  lostBatches: number
  lastLoss: LossRecord | null
  /** Field values left out of batches for an older server, and the fields they were. */
  leftOutValues: number
  leftOutFields: Set<string>
  /** Batches sent again without a field a 400 named as unknown. */
  unknownFieldRetries: number
}

export function newShippingCounters(): ShippingCounters {
  return {
    droppedBatches: 0,
    lastDrop: null,
    lostBatches: 0,
    lastLoss: null,
    leftOutValues: 0,
    leftOutFields: new Set(),
    unknownFieldRetries: 0,
  }
}

/** One database's shipping as /healthz shows it. */
export interface ShippingStatus {
  buffered: number
  oldest_buffered_at: string | null
  dropped_batches: number
  last_drop: { at: string; reason: string } | null
  lost_batches: number
  last_loss: { at: string; reason: string } | null
  /** Why the buffer fails, while it does. */
  buffer_error: string | null
  /** The server's wire version (null: no answer yet) and what was left out of batches for it. */
  server_wire_version: number | null
  left_out: { values: number; fields: string[] }
  unknown_field_retries: number
}

export interface ShipperOptions {
  endpoint: string
  apiKey: string
  databaseName: string
  /** Folder of the buffer file. */
  bufferDir: string
  retryIntervalMs: number
  /** The most random delay added to a retry round (default DEFAULT_JITTER_MS: the default poll interval). */
  jitterMs?: number
  /** The least pause between two batches sent from the buffer (default DEFAULT_DRAIN_GAP_MS). */
  drainGapMs?: number
  /** [0, 1), for the jitter (tests pass their own). */
  random?: () => number
  bufferMaxAgeMs: number
  /** buffer.max_bytes, read at each buffered batch (default 256 MB). */
  bufferMaxBytes?: () => number
  requestTimeoutMs: number
  log: AgentLogger
  clock?: () => number
  /** Called with the server-side settings after each accepted batch. */
  onAccepted?: (response: IngestResponse) => void
  /** Shared by the agent's shippers; one of its own otherwise. */
  api?: ApiHealth
  /** Kept by the agent across restarts of this database; its own otherwise. */
  counters?: ShippingCounters
  /** The agent's /metrics series of this database (metrics.ts). */
  metrics?: ShipperMetrics
}

/**
 * What became of a batch handed to send(): taken by the API, kept in the buffer for a retry, refused by
 * the API as malformed, or neither delivered nor kept (the buffer failed during an outage).
 */
export type SendOutcome = 'delivered' | 'buffered' | 'dropped' | 'lost'

type Outcome =
  | { kind: 'accepted'; response: IngestResponse }
  | { kind: 'rejected'; status: number; error: string }
  | { kind: 'retry'; reason: string; refused?: string; retryAfterMs?: number }

interface BufferEpisode {
  since: number
  operation: BufferOperation
  cause: string
  /** Batches lost since the episode began. */
  lost: number
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

export class Shipper {
  private readonly buffer: DiskBuffer
  private readonly clock: () => number
  private readonly api: ApiHealth
  private readonly counters: ShippingCounters
  private readonly maxBytes: () => number
  private timer: ReturnType<typeof setTimeout> | undefined
  private draining: Promise<void> | undefined
  private stopped = false
  /** The server asked (Retry-After) that nothing be sent before this time (clock ms); 0: no wait. */
  private notBefore = 0
  private outage = false
  /** Batches delivered from the buffer since the outage began (for the recovery log line). */
  private recovered = 0
  /** Why the API refuses this agent (401/403), until it accepts a batch again. */
  private refused: string | null = null
  /** The buffer is failing since then, and why; null while it works. */
  private bufferEpisode: BufferEpisode | null = null
  /** Batches the server settled whose delete failed: deleted before anything else is sent from the buffer. */
  private readonly settledUndeleted = new Set<string>()

  constructor(private readonly options: ShipperOptions) {
    this.clock = options.clock ?? Date.now
    this.api = options.api ?? new ApiHealth(options.endpoint)
    this.counters = options.counters ?? newShippingCounters()
    this.maxBytes = options.bufferMaxBytes ?? (() => DEFAULT_BUFFER_MAX_BYTES)
    this.buffer = new DiskBuffer(options.bufferDir, options.databaseName, {
      maxAgeMs: options.bufferMaxAgeMs,
      maxBytes: this.maxBytes,
      log: options.log,
      clock: this.clock,
      events: {
        fault: (operation, cause) => this.bufferFailed(operation, cause),
        working: () => this.bufferWorks(),
      },
    })
    const buffered = this.buffer.size()
    if (buffered > 0) {
      this.outage = true
      options.log.info('resuming buffered batches', {
        database: options.databaseName,
        buffered,
        file: this.buffer.path,
      })
    }
  }

  get bufferPath(): string {
    return this.buffer.path
  }

  buffered(): number {
    return this.buffer.size()
  }

  /** Bytes of the batches waiting in the buffer. */
  bufferBytes(): number {
    return this.buffer.bytes()
  }

  /** The API's refusal of the key or the batches (401/403), or null while it takes them. */
  refusal(): string | null {
    return this.refused
  }

  /** Whether the buffer is failing (its cause), for the health status. */
  bufferError(): string | null {
    return this.bufferEpisode ? `${this.bufferEpisode.operation}: ${this.bufferEpisode.cause}` : null
  }

  /** When the oldest buffered batch was collected into the buffer, or null. */
  oldestBufferedAt(): number | null {
    return this.buffer.oldestCreatedAt()
  }

  status(): ShippingStatus {
    const { lastDrop, lastLoss } = this.counters
    return {
      buffered: this.buffer.size(),
      oldest_buffered_at: iso(this.oldestBufferedAt()),
      dropped_batches: this.counters.droppedBatches,
      last_drop: lastDrop && { at: iso(lastDrop.at)!, reason: lastDrop.reason },
      lost_batches: this.counters.lostBatches,
      last_loss: lastLoss && { at: iso(lastLoss.at)!, reason: lastLoss.reason },
      buffer_error: this.bufferError(),
      server_wire_version: this.api.wireVersion,
      left_out: { values: this.counters.leftOutValues, fields: [...this.counters.leftOutFields].sort() },
      unknown_field_retries: this.counters.unknownFieldRetries,
    }
  }

  /** Starts the retry rounds; a buffer left by an earlier run is drained right away. */
  start(): void {
    if (this.timer !== undefined || this.stopped) return
    if (this.buffer.size() > 0) this.schedule(0)
    else this.scheduleNext()
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    await this.draining
    this.buffer.close()
  }

  /** When the server allows the next batch (clock ms; 0: now), for /healthz and tests. */
  retryNotBefore(): number {
    return this.notBefore
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return
    if (this.timer) clearTimeout(this.timer)
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.retry().finally(() => this.scheduleNext())
    }, delayMs)
  }

  /** The next round: after the server's Retry-After when it gave one, else after the retry interval; both jittered. */
  private scheduleNext(): void {
    if (this.stopped || this.timer !== undefined) return
    const now = this.clock()
    const wait = now < this.notBefore ? this.notBefore - now : null
    this.schedule(
      retryDelayMs(
        wait,
        this.options.retryIntervalMs,
        this.options.jitterMs ?? DEFAULT_JITTER_MS,
        (this.options.random ?? Math.random)(),
      ),
    )
  }

  /** Ships the batch now, or buffers it behind earlier ones. Never throws. `body`: its JSON, when the caller built it already. */
  async send(batch: IngestBatch, body = JSON.stringify(batch)): Promise<SendOutcome> {
    const queued = this.buffer.size() > 0 || this.draining !== undefined || this.clock() < this.notBefore
    let notKept: string | null = null
    if (queued) {
      notKept = this.keep(batch.batch_id, body)
      if (notKept === null) return 'buffered'
    }
    // Nothing waits, or the buffer cannot keep the batch: straight to the API.
    const outcome = await this.deliver(body)
    if (outcome.kind !== 'retry') {
      this.settle(outcome)
      return outcome.kind === 'accepted' ? 'delivered' : 'dropped'
    }
    this.enterOutage(outcome)
    notKept ??= this.keep(batch.batch_id, body)
    if (notKept === null) return 'buffered'
    this.lose(1, notKept)
    // While the buffer fails, the loss is logged once for the episode (when it ends, with the count).
    if (!this.bufferEpisode)
      this.options.log.error('a batch could not be buffered; lost (its counter deltas go with the next batch)', {
        database: this.options.databaseName,
        lost: 1,
        reason: notKept,
      })
    return 'lost'
  }

  /** Buffers a batch; null when kept, else why not. Batches evicted to make room are counted here. */
  private keep(id: string, body: string): string | null {
    const result = this.buffer.add({ id, createdAt: this.clock(), body })
    if (!result.kept) return result.reason
    this.options.metrics?.buffered.inc()
    if (result.evicted > 0) {
      this.lose(result.evicted, 'buffer.max_bytes reached: the oldest buffered batches made room')
      this.options.log.warn('the buffer reached buffer.max_bytes; dropped the oldest batches', {
        database: this.options.databaseName,
        dropped: result.evicted,
        max_bytes: this.maxBytes(),
      })
    }
    return null
  }

  /** Counts batches the agent could not keep (the caller logs them). */
  private lose(count: number, reason: string): void {
    this.counters.lostBatches += count
    this.options.metrics?.lost.inc(count)
    this.counters.lastLoss = { at: this.clock(), reason }
    if (this.bufferEpisode) this.bufferEpisode.lost += count
  }

  private bufferFailed(operation: BufferOperation, cause: string): void {
    if (this.bufferEpisode) return
    this.bufferEpisode = { since: this.clock(), operation, cause, lost: 0 }
    this.options.log.error(
      'the buffer is failing; batches the API does not take now are lost until it works again (their counter deltas go with the next batch it takes)',
      {
        database: this.options.databaseName,
        operation,
        cause,
        file: join(this.options.bufferDir, bufferFileName(this.options.databaseName)),
      },
    )
  }

  private bufferWorks(): void {
    const episode = this.bufferEpisode
    if (!episode) return
    this.bufferEpisode = null
    this.options.log.info('the buffer works again', {
      database: this.options.databaseName,
      lost: episode.lost,
      failed_for_s: Math.round((this.clock() - episode.since) / 1000),
    })
  }

  /** One retry round: drop expired batches, then deliver the buffer in order until one fails. */
  retry(): Promise<void> {
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined
    })
    return this.draining
  }

  private async drain(): Promise<void> {
    // The server asked for a pause (Retry-After): the round waits for the next one.
    if (this.clock() < this.notBefore) return
    // While the buffer fails, a test write tells when it works again (the API may be taking every batch).
    if (this.bufferEpisode) this.buffer.probe()
    const expired = this.buffer.dropExpired(this.clock())
    if (expired > 0) {
      this.lose(expired, `older than the buffer lifetime (${this.options.bufferMaxAgeMs / 1000} s)`)
      this.options.log.warn('dropped buffered batches older than the buffer lifetime', {
        database: this.options.databaseName,
        dropped: expired,
        max_age_s: this.options.bufferMaxAgeMs / 1000,
      })
    }
    for (;;) {
      if (!this.deleteSettled()) return
      const next = this.buffer.oldest(20)
      if (next === null) return // unreadable: reported as a buffer fault; tried again next round
      if (next.length === 0) break
      for (const batch of next) {
        if (this.stopped) return
        const started = performance.now()
        const outcome = await this.deliver(batch.body, Math.max(0, this.clock() - batch.createdAt))
        if (outcome.kind === 'retry') {
          this.enterOutage(outcome)
          return
        }
        this.settle(outcome)
        if (outcome.kind === 'accepted') this.recovered++
        if (!this.buffer.accept(batch.id)) {
          this.settledUndeleted.add(batch.id)
          return
        }
        // A bounded pace: the next batch after as long as the server took for this one (at least the gap).
        if (this.buffer.size() > 0)
          await Bun.sleep(Math.max(this.options.drainGapMs ?? DEFAULT_DRAIN_GAP_MS, performance.now() - started))
      }
    }
    if (this.outage) {
      this.outage = false
      this.options.log.info('API reachable again; buffer drained', {
        database: this.options.databaseName,
        delivered: this.recovered,
      })
      this.recovered = 0
    }
  }

  /** Deletes the batches the server settled whose delete failed before; false while that still fails. */
  private deleteSettled(): boolean {
    for (const id of this.settledUndeleted) {
      if (!this.buffer.accept(id)) return false
      this.settledUndeleted.delete(id)
    }
    return true
  }

  private enterOutage(outcome: Extract<Outcome, { kind: 'retry' }>) {
    if (outcome.refused !== undefined) {
      if (this.refused !== outcome.refused) {
        this.options.log.error(outcome.refused, { database: this.options.databaseName, file: this.buffer.path })
      }
      this.refused = outcome.refused
      this.outage = true
      return
    }
    this.refused = null
    if (this.outage) return
    this.outage = true
    this.options.log.warn('API unreachable; buffering batches', {
      database: this.options.databaseName,
      reason: outcome.reason,
      file: this.buffer.path,
    })
  }

  private settle(outcome: Exclude<Outcome, { kind: 'retry' }>) {
    if (outcome.kind === 'accepted') {
      if (this.refused !== null)
        this.options.log.info('the API accepts the batches again', { database: this.options.databaseName })
      this.refused = null
      this.options.metrics?.sent.inc()
      this.options.onAccepted?.(outcome.response)
      return
    }
    this.counters.droppedBatches++
    this.options.metrics?.dropped.inc()
    this.counters.lastDrop = { at: this.clock(), reason: `HTTP ${outcome.status}: ${outcome.error}` }
    this.options.log.error('the API refused a batch as malformed; dropped', {
      database: this.options.databaseName,
      status: outcome.status,
      error: outcome.error,
      dropped: 1,
      dropped_total: this.counters.droppedBatches,
    })
  }

  /**
   * Posts the batch as the server's wire version has it and records the outcome in the API's health. A
   * 400 naming an unknown field gets the batch again without it (and, from a server that announced no
   * version, without all the first release lacks), as long as each refusal names a new field.
   */
  private async deliver(body: string, bufferedForMs?: number): Promise<Outcome> {
    let sent = this.forServer(body)
    let outcome = await this.post(sent.text, bufferedForMs)
    for (
      let retries = 0;
      outcome.kind === 'rejected' && outcome.status === 400 && retries < MAX_UNKNOWN_FIELD_RETRIES;
      retries++
    ) {
      const field = unknownFieldIn(outcome.error)
      if (field === null || this.api.refusedFields.has(field)) break
      this.api.refusedFields.add(field)
      this.api.wireVersion ??= FIRST_WIRE_VERSION
      const again = this.forServer(body)
      if (again.text === sent.text) break
      this.counters.unknownFieldRetries++
      this.options.log.warn('the API refused a field it does not know; sending the batch again without it', {
        database: this.options.databaseName,
        error: outcome.error,
        left_out: again.left.paths.join(','),
        retries_total: this.counters.unknownFieldRetries,
      })
      sent = again
      outcome = await this.post(sent.text, bufferedForMs)
    }
    if (outcome.kind === 'accepted') this.countLeftOut(sent.left)
    if (outcome.kind === 'retry') {
      this.api.failed(this.clock(), outcome.reason)
      if (outcome.retryAfterMs !== undefined) this.pause(outcome.retryAfterMs)
    } else this.api.succeeded(this.clock())
    return outcome
  }

  /**
   * The batch without what the server does not know: the fields added after its wire version and those
   * it refused by name (the same text when nothing is left out).
   */
  private forServer(body: string): { text: string; left: LeftOut } {
    const version = this.api.wireVersion
    const paths = version === null ? [] : addedAfter(version)
    for (const field of this.api.refusedFields)
      paths.push(...(field === '*' ? addedAfter(FIRST_WIRE_VERSION) : [field]))
    if (paths.length === 0) return { text: body, left: { values: 0, paths: [] } }
    const batch = JSON.parse(body) as object
    const left = leaveOut(batch, paths)
    return left.values === 0 ? { text: body, left } : { text: JSON.stringify(batch), left }
  }

  /** Counts what a delivered batch went without; each field is logged the first time. */
  private countLeftOut(left: LeftOut): void {
    if (left.values === 0) return
    this.counters.leftOutValues += left.values
    const fresh = left.paths.filter((p) => !this.counters.leftOutFields.has(p))
    if (fresh.length === 0) return
    for (const p of fresh) this.counters.leftOutFields.add(p)
    const version = this.api.wireVersion
    this.options.log.info('the API does not know some fields of this agent; leaving them out', {
      database: this.options.databaseName,
      wire_version: version ?? undefined,
      release: version === null ? undefined : WIRE_RELEASES[version],
      fields: fresh.join(','),
    })
  }

  /** Nothing is sent for `ms` (the server's Retry-After): the round waiting is put after it. */
  private pause(ms: number): void {
    this.notBefore = Math.max(this.notBefore, this.clock() + ms)
    // Inside a round the timer is unset and the round schedules the next when it ends.
    if (this.timer !== undefined) {
      clearTimeout(this.timer)
      this.timer = undefined
      this.scheduleNext()
    }
  }

  /** Records the version the server announced; none on a batch it took: the first release's. */
  private learnWireVersion(header: string | null, accepted: boolean): void {
    const announced = header === null ? null : Number.parseInt(header, 10)
    if (announced !== null && Number.isInteger(announced) && announced > 0) this.api.wireVersion = announced
    else if (accepted) this.api.wireVersion = FIRST_WIRE_VERSION
  }

  /** `bufferedForMs`: the batch comes from the buffer, collected that long ago (sent as X-Dbm-Batch-Age). */
  private async post(body: string, bufferedForMs?: number): Promise<Outcome> {
    let res: Response
    const started = performance.now()
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-api-key': this.options.apiKey,
      'user-agent': `dbm-agent/${VERSION}`,
      // The agent's own clock as the batch leaves: the server measures the clock's offset by it.
      [SENT_AT_HEADER]: String(Date.now()),
    }
    if (bufferedForMs !== undefined) headers[BATCH_AGE_HEADER] = String(Math.floor(bufferedForMs / 1000))
    try {
      res = await fetch(this.options.endpoint + INGEST_PATH, {
        method: 'POST',
        headers,
        body,
        signal: AbortSignal.timeout(this.options.requestTimeoutMs),
      })
    } catch (e) {
      const code = (e as { code?: unknown }).code
      const message = (e as Error).message
      this.options.metrics?.request(0, started)
      return {
        kind: 'retry',
        reason: typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message,
      }
    }
    const text = await res.text().catch(() => '')
    this.options.metrics?.request(res.status, started)
    // Only the API's own answers tell its version: a batch taken, or refused by it.
    if (res.ok || MALFORMED_STATUSES.has(res.status))
      this.learnWireVersion(res.headers.get(WIRE_VERSION_HEADER), res.ok)
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {}
    const error = (parsed as { error?: string } | undefined)?.error ?? text.slice(0, 200)
    if (res.ok) {
      const response = parsed as IngestResponse
      if (typeof response?.database_id !== 'string')
        return { kind: 'retry', reason: `HTTP ${res.status}: unexpected answer from the API` }
      return { kind: 'accepted', response }
    }
    if (MALFORMED_STATUSES.has(res.status)) return { kind: 'rejected', status: res.status, error }
    if (res.status === 401) {
      const refused = `the API refused the API key (HTTP 401: ${error}); batches are buffered until api.key is fixed`
      return { kind: 'retry', reason: refused, refused }
    }
    if (res.status === 403) {
      const refused = `the API refused the batches (HTTP 403: ${error}); they are buffered until it takes them`
      return { kind: 'retry', reason: refused, refused }
    }
    const retryAfterMs = RETRY_AFTER_STATUSES.has(res.status)
      ? parseRetryAfter(res.headers.get('retry-after'), this.clock())
      : null
    if (retryAfterMs !== null)
      return {
        kind: 'retry',
        reason: `HTTP ${res.status}: ${error} (retry after ${Math.ceil(retryAfterMs / 1000)} s)`,
        retryAfterMs,
      }
    return { kind: 'retry', reason: `HTTP ${res.status}: ${error}` }
  }
}
