// The postgres.js pool of one PostgreSQL session, with deadlines that cancel. A run (a collector's
// run, a ping, an identity check) sees the pool through view(signal), which remembers the queries the
// run started. When the signal aborts, each of them gets a CancelRequest (the server stops it), the run
// may start no new query, and the pool is replaced by a fresh one for everything after. The old pool
// is left to the runs still using it for one collector deadline (their own deadlines cancel them),
// then ended: its busy connections get the cancel grace before they are destroyed. A backend that
// cannot act on a cancel (SIGSTOPped, or a host that stopped answering) thus holds one socket until it
// resumes, never the agent: no later query queues behind it.
import type postgres from 'postgres'

/** What the agent uses of a postgres.js query once it was started. */
interface StartedQuery {
  /** Set by postgres.js once the query was handed to the pool (awaited, or .then() called). */
  executed?: boolean
  /** postgres.js's canceller: sends the CancelRequest (or drops a query still queued in the pool). */
  canceller?: ((query: StartedQuery) => Promise<void>) | null
}

interface Started {
  query: StartedQuery
  /** The pool the query went to. */
  pool: postgres.Sql
}

function isQuery(value: unknown): value is StartedQuery & PromiseLike<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { cancel?: unknown }).cancel === 'function' &&
    'canceller' in value
  )
}

/**
 * Cancels a started query on the server. postgres.js's own query.cancel() drops the promise of its
 * CancelRequest, which rejects when the server refuses the connection (an unhandled rejection); the
 * canceller is called here instead, with that rejection handled.
 */
function cancelQuery(query: StartedQuery): void {
  const canceller = query.canceller
  query.canceller = null
  if (!canceller) return
  try {
    void canceller(query).catch(() => {})
  } catch {
    // postgres.js gave up on the query already.
  }
}

export class CancellablePool {
  private current: postgres.Sql
  /** Replaced pools, each with what ends it now (close() does not wait for their linger). */
  private readonly retiring = new Map<postgres.Sql, () => Promise<void>>()
  private closed = false

  constructor(
    private readonly create: () => postgres.Sql,
    private readonly graceMs: number,
    /** How long a replaced pool is left to the runs still using it (a collector deadline). */
    private readonly lingerMs: number,
  ) {
    this.current = create()
  }

  /** The pool as one run sees it; without a signal, every query goes to the current pool untracked (the waits sampler). */
  view(signal?: AbortSignal): postgres.Sql {
    if (!signal)
      return this.forward(
        () => this.current,
        () => this.current,
      )
    const started: Started[] = []
    signal.addEventListener('abort', () => this.cancel(started), { once: true })
    return this.forward(
      () => this.current,
      () => this.current,
      { signal, started },
    )
  }

  /** The pool a session's opening queries use before there is any run. */
  get sql(): postgres.Sql {
    return this.current
  }

  /** Ends every pool: idle connections at once, busy ones after the grace at most. */
  async close(): Promise<void> {
    this.closed = true
    const ends = [...this.retiring.values()].map((end) => end())
    ends.push(this.current.end({ timeout: this.graceMs / 1000 }).catch(() => {}))
    await Promise.all(ends)
  }

  /** Ends every pool at once, without a grace (an opening that gave up). */
  async destroy(): Promise<void> {
    this.closed = true
    await this.current.end({ timeout: 0 }).catch(() => {})
  }

  private cancel(started: Started[]): void {
    const sent = started.filter((s) => s.query.executed)
    for (const { query } of sent) cancelQuery(query)
    // A query on the current pool may hold its connection past the cancel: later queries go elsewhere.
    if (!this.closed && sent.some((s) => s.pool === this.current)) this.retire()
  }

  /** New queries go to a fresh pool (it connects on first use); the old one ends after the linger. */
  private retire(): void {
    const old = this.current
    this.current = this.create()
    let ending: Promise<void> | undefined
    const end = () => {
      clearTimeout(timer)
      this.retiring.delete(old)
      ending ??= old.end({ timeout: this.graceMs / 1000 }).catch(() => {})
      return ending
    }
    const timer = setTimeout(end, this.lingerMs)
    this.retiring.set(old, end)
  }

  /**
   * A stand-in for postgres.js's `sql` that resolves the pool at each call. With a run, the queries it
   * starts (tagged, unsafe, file, and those of a transaction) are remembered, and none starts once the
   * run's signal aborted.
   */
  private forward(
    pool: () => postgres.Sql,
    owner: () => postgres.Sql,
    run?: { signal: AbortSignal; started: Started[] },
  ): postgres.Sql {
    const guard = () => run?.signal.throwIfAborted()
    const track = <T>(value: T, to: postgres.Sql): T => {
      if (run && isQuery(value)) run.started.push({ query: value, pool: to })
      return value
    }
    const scoped =
      (method: (...args: unknown[]) => unknown, target: unknown) =>
      (...args: unknown[]) => {
        guard()
        const to = owner()
        const fn = args.pop() as (tx: postgres.Sql) => unknown
        return method.call(target, ...args, (tx: postgres.Sql) =>
          fn(
            this.forward(
              () => tx,
              () => to,
              run,
            ),
          ),
        )
      }
    return new Proxy(function sql() {} as unknown as postgres.Sql, {
      apply: (_target, _this, args) => {
        guard()
        return track(Reflect.apply(pool() as unknown as (...a: unknown[]) => unknown, undefined, args), owner())
      },
      get: (_target, property) => {
        const target = pool()
        const value = Reflect.get(target, property) as unknown
        if (typeof value !== 'function') return value
        const method = value as (...args: unknown[]) => unknown
        if (property === 'unsafe' || property === 'file') {
          return (...args: unknown[]) => {
            guard()
            return track(method.apply(target, args), owner())
          }
        }
        if (property === 'begin' || property === 'savepoint') return scoped(method, target)
        return method
      },
    })
  }
}
