// Sends one database's batches to POST /api/v1/ingest. When the API cannot take a batch it goes to
// the disk buffer, and while anything is buffered new batches queue behind it so the server sees
// them in order. The buffer is retried every 30 s; batches are dropped only when the server calls
// them malformed (400/413) or they outlive the buffer (1 h), and every drop is logged with a count.
// A refused key (401/403) is not an outage: it is logged as an error once, with the server's message,
// and reported by refusal() for the health status; the batches are buffered all the same, so a key
// fixed by a config reload delivers them.
import { INGEST_PATH } from '../shared/ingest-path.ts'
import type { IngestBatch, IngestResponse } from '../shared/wire.ts'
import { DiskBuffer } from './buffer.ts'
import type { AgentLogger } from './collectors/types.ts'
import { VERSION } from '../version.ts'

export interface ShipperOptions {
  endpoint: string
  apiKey: string
  databaseName: string
  /** Folder of the buffer file. */
  bufferDir: string
  retryIntervalMs: number
  bufferMaxAgeMs: number
  requestTimeoutMs: number
  log: AgentLogger
  clock?: () => number
  /** Called with the server-side settings after each accepted batch. */
  onAccepted?: (response: IngestResponse) => void
}

type Outcome =
  | { kind: 'accepted'; response: IngestResponse }
  | { kind: 'rejected'; status: number; error: string }
  | { kind: 'retry'; reason: string; refused?: string }

export class Shipper {
  private readonly buffer: DiskBuffer
  private readonly clock: () => number
  private timer: ReturnType<typeof setInterval> | undefined
  private draining: Promise<void> | undefined
  private outage = false
  /** Batches delivered from the buffer since the outage began (for the recovery log line). */
  private recovered = 0
  /** Why the API refuses this agent (401/403), until it accepts a batch again. */
  private refused: string | null = null

  constructor(private readonly options: ShipperOptions) {
    this.clock = options.clock ?? Date.now
    this.buffer = new DiskBuffer(options.bufferDir, options.databaseName, options.bufferMaxAgeMs)
    if (this.buffer.size() > 0) {
      this.outage = true
      options.log.info('resuming buffered batches', { database: options.databaseName, buffered: this.buffer.size(), file: this.buffer.path })
    }
  }

  get bufferPath(): string {
    return this.buffer.path
  }

  buffered(): number {
    return this.buffer.size()
  }

  /** The API's refusal of the key or the batches (401/403), or null while it takes them. */
  refusal(): string | null {
    return this.refused
  }

  start(): void {
    this.timer ??= setInterval(() => void this.retry(), this.options.retryIntervalMs)
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    await this.draining
    this.buffer.close()
  }

  /** Ships the batch now, or buffers it behind earlier ones. Never throws. */
  async send(batch: IngestBatch): Promise<void> {
    const body = JSON.stringify(batch)
    if (this.buffer.size() > 0 || this.draining) {
      this.buffer.add({ id: batch.batch_id, createdAt: this.clock(), body })
      return
    }
    const outcome = await this.post(body)
    if (outcome.kind === 'retry') {
      this.buffer.add({ id: batch.batch_id, createdAt: this.clock(), body })
      this.enterOutage(outcome)
    } else {
      this.settle(outcome)
    }
  }

  /** One retry round: drop expired batches, then deliver the buffer in order until one fails. */
  retry(): Promise<void> {
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined
    })
    return this.draining
  }

  private async drain(): Promise<void> {
    const expired = this.buffer.dropExpired(this.clock())
    if (expired > 0) {
      this.options.log.warn('dropped buffered batches older than the buffer lifetime', {
        database: this.options.databaseName,
        dropped: expired,
        max_age_s: this.options.bufferMaxAgeMs / 1000,
      })
    }
    for (;;) {
      const next = this.buffer.oldest(20)
      if (next.length === 0) break
      for (const batch of next) {
        const outcome = await this.post(batch.body)
        if (outcome.kind === 'retry') {
          this.enterOutage(outcome)
          return
        }
        this.buffer.accept(batch.id)
        this.settle(outcome)
        if (outcome.kind === 'accepted') this.recovered++
      }
    }
    if (this.outage) {
      this.outage = false
      this.options.log.info('API reachable again; buffer drained', { database: this.options.databaseName, delivered: this.recovered })
      this.recovered = 0
    }
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
    this.options.log.warn('API unreachable; buffering batches', { database: this.options.databaseName, reason: outcome.reason, file: this.buffer.path })
  }

  private settle(outcome: Exclude<Outcome, { kind: 'retry' }>) {
    if (outcome.kind === 'accepted') {
      if (this.refused !== null) this.options.log.info('the API accepts the batches again', { database: this.options.databaseName })
      this.refused = null
      this.options.onAccepted?.(outcome.response)
      return
    }
    this.options.log.error('the API refused a batch as malformed; dropped', {
      database: this.options.databaseName,
      status: outcome.status,
      error: outcome.error,
      dropped: 1,
    })
  }

  private async post(body: string): Promise<Outcome> {
    let res: Response
    try {
      res = await fetch(this.options.endpoint + INGEST_PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': this.options.apiKey, 'user-agent': `dbm-agent/${VERSION}` },
        body,
        signal: AbortSignal.timeout(this.options.requestTimeoutMs),
      })
    } catch (e) {
      return { kind: 'retry', reason: (e as Error).message }
    }
    const text = await res.text().catch(() => '')
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {}
    const error = (parsed as { error?: string } | undefined)?.error ?? text.slice(0, 200)
    if (res.ok) {
      const response = parsed as IngestResponse
      if (typeof response?.database_id !== 'string') return { kind: 'retry', reason: 'unexpected answer from the API' }
      return { kind: 'accepted', response }
    }
    if (res.status === 400 || res.status === 413) return { kind: 'rejected', status: res.status, error }
    if (res.status === 401) {
      const refused = `the API refused the API key (HTTP 401: ${error}); batches are buffered until api.key is fixed`
      return { kind: 'retry', reason: refused, refused }
    }
    if (res.status === 403) {
      const refused = `the API refused the batches (HTTP 403: ${error}); they are buffered until it takes them`
      return { kind: 'retry', reason: refused, refused }
    }
    return { kind: 'retry', reason: `HTTP ${res.status}: ${error}` }
  }
}
