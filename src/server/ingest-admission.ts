// Admission of agent batches (POST /api/v1/ingest) in one serve process: a cap on the ingests in flight
// (admitted, not yet answered) and on the bytes of their bodies, so that after a restart a fleet's
// buffered backlog is taken at the pace the process holds instead of queueing without bound. The
// decision is made from the request's headers and its caller, before its body is read or parsed, so a
// refusal costs next to nothing: 503 with a Retry-After the agent honours (spread at random so the
// refused come back spread). Backlog (a batch sent from the agent's buffer, X-Dbm-Batch-Age at least
// backlogAgeSeconds) is refused at a lower mark than current batches, so current batches stay fast while
// a backlog drains. Only an authenticated ingest key takes a place (app.ts authenticates first), and
// while several organizations send, each holds at most its share of the places (limits.orgShare), so
// one tenant's agents cannot starve the others'. An admitted body must arrive within bodyReadMs (408
// after it); a place is freed when the answer goes out, when the body times out, when the client goes
// away before its body arrived, or (a backstop) staleTicketMs after admission.
// Refusals are counted (dbm_ingest_shed_total by kind, dbm_ingest_refusals_total by reason) and logged
// once per episode: a warning when refusing starts, an info line with the counts once none was refused
// for episodeQuietMs.
import type { WriteRefusalSpan } from './store/write-faults.ts'
import { BATCH_AGE_HEADER } from '../shared/ingest-path.ts'
import type { Logger } from '../shared/log.ts'
import { HttpError } from './http-error.ts'
import { type IngestAdmissionLimits, ingestAdmissionLimits } from './limits.ts'
import { serverMetrics } from './metrics.ts'

export type BatchKind = 'current' | 'backlog'

/** Why an ingest was refused before its batch was applied (dbm_ingest_refusals_total{reason}). */
export type RefusalReason = 'unauthenticated' | 'forbidden' | 'capacity' | 'org_share' | 'body_timeout' | 'body_aborted'

/** The refusals an episode counts and logs (the others are the caller's own doing, counted only). */
type EpisodeReason = 'capacity' | 'org_share' | 'body_timeout'

interface Ticket {
  at: number
  bytes: number
  orgId: string
  /** The body has been read: from then on the batch is being applied, and only its answer frees the place. */
  bodyRead: boolean
}

interface Episode {
  since: number
  lastShedAt: number
  shed: Record<BatchKind, number>
  orgShare: number
  bodyTimeouts: number
}

const shedCounters = {
  current: serverMetrics.ingestShed.labels('current'),
  backlog: serverMetrics.ingestShed.labels('backlog'),
}

const refusalCounters = Object.fromEntries(
  (['unauthenticated', 'forbidden', 'capacity', 'org_share', 'body_timeout', 'body_aborted'] as const).map((r) => [
    r,
    serverMetrics.ingestRefusals.labels(r),
  ]),
) as Record<RefusalReason, ReturnType<typeof serverMetrics.ingestRefusals.labels>>

/** Counts an ingest refused before it took a place: its caller has no valid key, or a key without the ingest scope. */
export function countUnauthenticated(status: number): void {
  refusalCounters[status === 403 ? 'forbidden' : 'unauthenticated'].inc()
}

/** The batch's kind by its X-Dbm-Batch-Age header (absent or unreadable: current, as older agents send). */
export function batchKind(headers: Headers, limits: Pick<IngestAdmissionLimits, 'backlogAgeSeconds'>): BatchKind {
  const age = Number(headers.get(BATCH_AGE_HEADER) ?? '')
  return Number.isFinite(age) && age >= limits.backlogAgeSeconds ? 'backlog' : 'current'
}

export class IngestAdmission {
  private readonly tickets = new Map<Request, Ticket>()
  private bytes = 0
  /** Places held by each organization (entries dropped at zero). */
  private readonly byOrg = new Map<string, number>()
  /** When each organization last sent an ingest, oldest first (those older than orgShare.activeMs dropped). */
  private readonly lastSeen = new Map<string, number>()
  private episode: Episode | null = null
  /** Shedding for capacity (its place or its share) on the wall clock: since, and the latest shed. */
  private shedding: { since: number; last: number } | undefined

  constructor(
    private readonly log: Logger,
    readonly limits: IngestAdmissionLimits = ingestAdmissionLimits,
    private readonly random: () => number = Math.random,
  ) {}

  /** Ingests in flight now (admitted, not yet answered). */
  get inFlight(): number {
    return this.tickets.size
  }

  /** Places held now by the organization's ingests. */
  heldBy(orgId: string): number {
    return this.byOrg.get(orgId) ?? 0
  }

  /**
   * Admits the request of the organization `orgId` (its caller authenticated) until release, or throws
   * the 503 that sheds it. `now`: monotonic ms (performance.now()), for the episode, the organizations
   * seen lately and the forgetting of tickets never released.
   */
  admit(request: Request, orgId: string, now: number): void {
    this.forgetStale(now)
    const kind = batchKind(request.headers, this.limits)
    const declared = Number(request.headers.get('content-length') ?? '')
    const bytes = Number.isFinite(declared) && declared > 0 ? declared : this.limits.unknownBodyBytes
    const cap = kind === 'backlog' ? this.limits.backlog : this.limits.current
    // Seen before any refusal: an organization shed because another holds every place still counts as
    // sending, so that other is held to its share from then on.
    this.seen(orgId, now)
    // One request is always admitted, however large (the body cap refuses what is too large).
    const full = this.tickets.size >= cap.inFlight || (this.tickets.size > 0 && this.bytes + bytes > cap.bodyBytes)
    if (full) throw this.shed(kind, 'capacity', now)
    // Its share only while another organization sends too: alone, an organization has every place.
    const share = Math.max(this.limits.orgShare.min, Math.floor(cap.inFlight * this.limits.orgShare.fraction))
    if (this.heldBy(orgId) >= share && this.othersSending(orgId, now)) throw this.shed(kind, 'org_share', now)
    this.tickets.set(request, { at: now, bytes, orgId, bodyRead: false })
    this.bytes += bytes
    this.byOrg.set(orgId, this.heldBy(orgId) + 1)
    serverMetrics.ingestInFlight.set(this.tickets.size)
    // A client gone before its body arrived frees its place at once (its read fails too, and the answer
    // frees it again: release is idempotent). Once the body is read, the batch is applied: only the
    // answer frees the place, so disconnecting cannot start more work than the cap.
    request.signal?.addEventListener(
      'abort',
      () => {
        const ticket = this.tickets.get(request)
        if (!ticket || ticket.bodyRead) return
        refusalCounters.body_aborted.inc()
        this.release(request)
      },
      { once: true },
    )
    if (this.episode && now - this.episode.lastShedAt >= this.limits.episodeQuietMs) this.endEpisode(now)
  }

  /**
   * The request's body, read by `read` within bodyReadMs of now, else a 408 (the place freed at once).
   * A request not admitted (a refused caller never gets here) is held to the same time.
   */
  async readBody<T>(request: Request, read: Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(this.bodyTimeout(request)), this.limits.bodyReadMs)
    })
    // The read left behind fails when the connection closes after the 408; nobody waits for it.
    read.catch(() => {})
    try {
      const body = await Promise.race([read, timedOut])
      const ticket = this.tickets.get(request)
      if (ticket) ticket.bodyRead = true
      return body
    } finally {
      clearTimeout(timer)
    }
  }

  /** The request was answered (any answer): its place is free. Safe to call for a request not admitted. */
  release(request: Request): void {
    const ticket = this.tickets.get(request)
    if (!ticket) return
    this.drop(request, ticket)
    serverMetrics.ingestInFlight.set(this.tickets.size)
  }

  private drop(request: Request, ticket: Ticket): void {
    this.tickets.delete(request)
    this.bytes -= ticket.bytes
    const held = this.heldBy(ticket.orgId) - 1
    if (held > 0) this.byOrg.set(ticket.orgId, held)
    else this.byOrg.delete(ticket.orgId)
  }

  /** Records that `orgId` sends, keeping lastSeen oldest first and within orgShare.activeMs. */
  private seen(orgId: string, now: number): void {
    this.lastSeen.delete(orgId)
    this.lastSeen.set(orgId, now)
    for (const [org, at] of this.lastSeen) {
      if (now - at < this.limits.orgShare.activeMs) break
      this.lastSeen.delete(org)
    }
  }

  /** Whether an organization other than `orgId` sent an ingest within orgShare.activeMs. */
  private othersSending(orgId: string, now: number): boolean {
    for (const [org, at] of this.lastSeen) if (org !== orgId && now - at < this.limits.orgShare.activeMs) return true
    return false
  }

  private bodyTimeout(request: Request): HttpError {
    this.release(request)
    refusalCounters.body_timeout.inc()
    this.refused('body_timeout', performance.now()).bodyTimeouts++
    return new HttpError(408, `the request body did not arrive within ${Math.round(this.limits.bodyReadMs / 1000)} s`)
  }

  private shed(kind: BatchKind, reason: 'capacity' | 'org_share', now: number): HttpError {
    shedCounters[kind].inc()
    refusalCounters[reason].inc()
    const episode = this.refused(reason, now)
    episode.shed[kind]++
    if (reason === 'org_share') episode.orgShare++
    const [low, high] = this.limits.retryAfterSeconds[kind]
    const seconds = low + Math.floor(this.random() * (high - low + 1))
    return new HttpError(503, `the server is busy taking batches; try again in ${seconds} s`, {
      'retry-after': String(seconds),
    })
  }

  /** The episode a refusal belongs to, begun (with its one warning) by the first. */
  private refused(reason: EpisodeReason, now: number): Episode {
    if (!this.episode) {
      this.episode = { since: now, lastShedAt: now, shed: { current: 0, backlog: 0 }, orgShare: 0, bodyTimeouts: 0 }
      const figures = {
        in_flight: this.tickets.size,
        in_flight_bytes: this.bytes,
        max_in_flight: this.limits.current.inFlight,
        backlog_in_flight: this.limits.backlog.inFlight,
      }
      if (reason === 'capacity') {
        this.log.warn(
          'ingest: more batches than this process takes at once; shedding with 503 and Retry-After (backlog first)',
          figures,
        )
      } else if (reason === 'org_share') {
        this.log.warn(
          'ingest: an organization holds its share of the batches this process takes at once; shedding its batches with 503 and Retry-After',
          figures,
        )
      } else {
        this.log.warn('ingest: a batch body did not arrive in time; refused with 408 (a slow or stalled client)', {
          ...figures,
          body_read_s: Math.round(this.limits.bodyReadMs / 1000),
        })
      }
    }
    this.episode.lastShedAt = now
    if (reason !== 'body_timeout') {
      const wall = Date.now()
      if (!this.shedding || wall - this.shedding.last >= this.limits.episodeQuietMs)
        this.shedding = { since: wall, last: wall }
      else this.shedding.last = wall
    }
    return this.episode
  }

  /**
   * When this process last shed batches for want of room (wall clock): under way (no `endedAt`) until
   * episodeQuietMs passed without one. The doctor's agent_disconnected takes a silence that began while
   * batches were shed for the server's (agents keep what is shed and send it again).
   */
  shedSpan(now = Date.now()): WriteRefusalSpan | undefined {
    const s = this.shedding
    if (!s) return undefined
    return now - s.last >= this.limits.episodeQuietMs ? { since: s.since, endedAt: s.last } : { since: s.since }
  }

  private endEpisode(now: number): void {
    const episode = this.episode!
    this.episode = null
    this.log.info('ingest: shedding ended', {
      shed_backlog: episode.shed.backlog,
      shed_current: episode.shed.current,
      shed_org_share: episode.orgShare || undefined,
      body_timeouts: episode.bodyTimeouts || undefined,
      for_s: Math.round((episode.lastShedAt - episode.since) / 1000),
      quiet_s: Math.round((now - episode.lastShedAt) / 1000),
    })
  }

  /** Tickets never released (an answer whose end the app did not see) are forgotten after staleTicketMs. */
  private forgetStale(now: number): void {
    for (const [request, ticket] of this.tickets) {
      if (now - ticket.at < this.limits.staleTicketMs) break
      this.drop(request, ticket)
    }
  }
}
