// Episodes of writes the store refuses for a reason that passes (StoreTryLater: its disk is full, it is a
// read-only standby, out of memory or connections). The first refused write starts an episode; a write
// that succeeds after it ends the refusals at once (`failing` is then undefined, and /healthz answers
// 200 again), but the episode itself ends only once no write was refused for `holdMs` after that: a
// nearly full disk takes small writes (an API key's last use) and refuses large ones (a batch), and each
// episode is logged once when it starts and once when it ends, not at every such turn.

/** A refused write as the drivers raise it (driver.ts: StoreTryLater): its code, reason and message. */
export interface WriteRefusal {
  readonly code: string
  readonly reason: string
  readonly message: string
}

/** How long writes must go unrefused after one succeeded before an episode is over. */
export const WRITE_FAULT_HOLD_MS = 60_000
/** At most one probe write (SqlDriver.probeWrite) per this many ms while writes are refused. */
export const WRITE_PROBE_EVERY_MS = 5_000

export type WriteFaultChange =
  | { failing: true; error: WriteRefusal }
  | { failing: false; failedForMs: number; refused: number; error: WriteRefusal }

/** An episode of refused writes on the wall clock, for the doctor (agent_disconnected): ongoing, or the last one. */
export interface WriteRefusalSpan {
  since: number
  /** Absent while writes are still refused or the episode's hold has not passed. */
  endedAt?: number
}

interface Episode {
  since: number
  /** `since` on the wall clock. */
  sinceWall: number
  /** The first refusal, the one logged. */
  first: WriteRefusal
  /** The latest refusal, the one /healthz shows. */
  latest: WriteRefusal
  refused: number
  /** When a write first succeeded after the latest refusal. */
  wroteAt?: number
}

export class StoreWriteFaults {
  private episode: Episode | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  private lastProbe = Number.NEGATIVE_INFINITY
  private lastEpisode: WriteRefusalSpan | undefined
  private readonly listeners = new Set<(change: WriteFaultChange) => void>()

  constructor(
    private readonly holdMs = WRITE_FAULT_HOLD_MS,
    private readonly probeEveryMs = WRITE_PROBE_EVERY_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The latest refusal, while no write has succeeded since. */
  get failing(): WriteRefusal | undefined {
    const e = this.episode
    return e && e.wroteAt === undefined ? e.latest : undefined
  }

  /** A write was refused: starts an episode, or continues the one under way. */
  failed(refusal: WriteRefusal): void {
    const e = this.episode
    if (e) {
      e.latest = refusal
      e.refused++
      e.wroteAt = undefined
      clearTimeout(this.timer)
      return
    }
    this.episode = { since: this.now(), sinceWall: Date.now(), first: refusal, latest: refusal, refused: 1 }
    this.emit({ failing: true, error: refusal })
  }

  /** A write succeeded (committed, and changed rows). */
  wrote(): void {
    const e = this.episode
    if (!e || e.wroteAt !== undefined) return
    e.wroteAt = this.now()
    this.timer = setTimeout(() => this.end(e), this.holdMs)
    this.timer.unref?.()
  }

  /** True, once per WRITE_PROBE_EVERY_MS, while writes are refused: time for a probe write. */
  probeDue(): boolean {
    if (!this.failing) return false
    const now = this.now()
    if (now - this.lastProbe < this.probeEveryMs) return false
    this.lastProbe = now
    return true
  }

  /** The episode under way, else the last one that ended (wall clock); undefined if there was none. */
  refusals(): WriteRefusalSpan | undefined {
    return this.episode ? { since: this.episode.sinceWall } : this.lastEpisode
  }

  /** Calls `listener` at the start and at the end of every episode; returns the unsubscribe. */
  onChange(listener: (change: WriteFaultChange) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  private end(e: Episode): void {
    if (this.episode !== e || e.wroteAt === undefined) return
    this.episode = undefined
    this.lastEpisode = { since: e.sinceWall, endedAt: Date.now() }
    this.emit({ failing: false, failedForMs: Math.round(e.wroteAt - e.since), refused: e.refused, error: e.first })
  }

  private emit(change: WriteFaultChange) {
    for (const listener of this.listeners) listener(change)
  }
}
