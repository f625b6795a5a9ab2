// Admission of agent batches (POST /api/v1/ingest) in one serve process: a cap on the ingests in flight
// (admitted, not yet answered) and on the bytes of their bodies, so that after a restart a fleet's
// buffered backlog is taken at the pace the process holds instead of queueing without bound. The
// decision is made from the request's headers alone, before its body is read or parsed, so a refusal
// costs next to nothing: 503 with a Retry-After the agent honours (spread at random so the refused come
// back spread). Backlog (a batch sent from the agent's buffer, X-Dbm-Batch-Age at least backlogAgeSeconds)
// is refused at a lower mark than current batches, so current batches stay fast while a backlog drains.
// Refusals are counted (dbm_ingest_shed_total) and logged once per episode: a warning when shedding
// starts, an info line with the counts once none was shed for episodeQuietMs.
import { BATCH_AGE_HEADER } from '../shared/ingest-path.ts'
import type { Logger } from '../shared/log.ts'
import { HttpError } from './http-error.ts'
import { type IngestAdmissionLimits, ingestAdmissionLimits } from './limits.ts'
import { serverMetrics } from './metrics.ts'

export type BatchKind = 'current' | 'backlog'

interface Ticket {
  at: number
  bytes: number
}

interface Episode {
  since: number
  lastShedAt: number
  shed: Record<BatchKind, number>
}

const shedCounters = {
  current: serverMetrics.ingestShed.labels('current'),
  backlog: serverMetrics.ingestShed.labels('backlog'),
}

/** The batch's kind by its X-Dbm-Batch-Age header (absent or unreadable: current, as older agents send). */
export function batchKind(headers: Headers, limits: Pick<IngestAdmissionLimits, 'backlogAgeSeconds'>): BatchKind {
  const age = Number(headers.get(BATCH_AGE_HEADER) ?? '')
  return Number.isFinite(age) && age >= limits.backlogAgeSeconds ? 'backlog' : 'current'
}

export class IngestAdmission {
  private readonly tickets = new Map<Request, Ticket>()
  private bytes = 0
  private episode: Episode | null = null

  constructor(
    private readonly log: Logger,
    readonly limits: IngestAdmissionLimits = ingestAdmissionLimits,
    private readonly random: () => number = Math.random,
  ) {}

  /** Ingests in flight now (admitted, not yet answered). */
  get inFlight(): number {
    return this.tickets.size
  }

  /**
   * Admits the request (held until release) or throws the 503 that sheds it. `now`: monotonic ms
   * (performance.now()), for the episode and the forgetting of tickets never released.
   */
  admit(request: Request, now: number): void {
    this.forgetStale(now)
    const kind = batchKind(request.headers, this.limits)
    const declared = Number(request.headers.get('content-length') ?? '')
    const bytes = Number.isFinite(declared) && declared > 0 ? declared : this.limits.unknownBodyBytes
    const cap = kind === 'backlog' ? this.limits.backlog : this.limits.current
    // One request is always admitted, however large (the body cap refuses what is too large).
    const full = this.tickets.size >= cap.inFlight || (this.tickets.size > 0 && this.bytes + bytes > cap.bodyBytes)
    if (full) throw this.shed(kind, now)
    this.tickets.set(request, { at: now, bytes })
    this.bytes += bytes
    serverMetrics.ingestInFlight.set(this.tickets.size)
    if (this.episode && now - this.episode.lastShedAt >= this.limits.episodeQuietMs) this.endEpisode(now)
  }

  /** The request was answered (any answer): its place is free. Safe to call for a request not admitted. */
  release(request: Request): void {
    const ticket = this.tickets.get(request)
    if (!ticket) return
    this.tickets.delete(request)
    this.bytes -= ticket.bytes
    serverMetrics.ingestInFlight.set(this.tickets.size)
  }

  private shed(kind: BatchKind, now: number): HttpError {
    shedCounters[kind].inc()
    if (!this.episode) {
      this.episode = { since: now, lastShedAt: now, shed: { current: 0, backlog: 0 } }
      this.log.warn('ingest: more batches than this process takes at once; shedding with 503 and Retry-After (backlog first)', {
        in_flight: this.tickets.size,
        in_flight_bytes: this.bytes,
        max_in_flight: this.limits.current.inFlight,
        backlog_in_flight: this.limits.backlog.inFlight,
      })
    }
    this.episode.shed[kind]++
    this.episode.lastShedAt = now
    const [low, high] = this.limits.retryAfterSeconds[kind]
    const seconds = low + Math.floor(this.random() * (high - low + 1))
    return new HttpError(503, `the server is busy taking batches; try again in ${seconds} s`, { 'retry-after': String(seconds) })
  }

  private endEpisode(now: number): void {
    const episode = this.episode!
    this.episode = null
    this.log.info('ingest: shedding ended', {
      shed_backlog: episode.shed.backlog,
      shed_current: episode.shed.current,
      for_s: Math.round((episode.lastShedAt - episode.since) / 1000),
      quiet_s: Math.round((now - episode.lastShedAt) / 1000),
    })
  }

  /** Tickets never released (an answer whose end the app did not see) are forgotten after staleTicketMs. */
  private forgetStale(now: number): void {
    for (const [request, ticket] of this.tickets) {
      if (now - ticket.at < this.limits.staleTicketMs) break
      this.tickets.delete(request)
      this.bytes -= ticket.bytes
    }
  }
}
