// Availability figures of one database from its outages and its agent's silences (store/availability/):
// over a window, the time it was down, the time nobody knows (the agent sent nothing: a stored silence, or
// the silence going on now), and the rest up. The ratio is up / (up + down): unknown time is counted in
// neither, and null when nothing is known; watched_ms (up + down) says how much time the ratio stands on.
// Time before the database's registration is in none of them. Per day: UTC days, oldest first.
import { silentAfterMs } from './limits.ts'
import { type AvailabilitySpans, type AvailabilityState, lastHeardAt } from './store/availability/types.ts'
import type { RegisteredDatabase } from './store/types.ts'

const DAY = 86_400_000

export interface UptimeFigures {
  up_ms: number
  down_ms: number
  /** The agent sent nothing, since the registration (time before it counts nowhere). */
  unknown_ms: number
  /** up + down: the time the ratio stands on. */
  watched_ms: number
  /** up / (up + down), 4 decimals; null when neither. */
  ratio: number | null
}

export interface UptimeDay extends UptimeFigures {
  /** The UTC day, YYYY-MM-DD. */
  date: string
}

type Span = [number, number]

/** Merges overlapping spans (sorted by start). */
function merged(spans: Span[]): Span[] {
  const out: Span[] = []
  for (const [a, b] of [...spans].sort((x, y) => x[0] - y[0])) {
    const last = out[out.length - 1]
    if (last && a <= last[1]) last[1] = Math.max(last[1], b)
    else if (b > a) out.push([a, b])
  }
  return out
}

/** The length of `spans` (merged) within [from, to). */
function within(spans: Span[], from: number, to: number): number {
  let total = 0
  for (const [a, b] of spans) total += Math.max(0, Math.min(b, to) - Math.max(a, from))
  return total
}

/** The parts of `spans` not covered by `cut` (both merged, so sorted and disjoint): one pass over each. */
function minus(spans: Span[], cut: Span[]): Span[] {
  const out: Span[] = []
  let j = 0
  for (const [a, b] of spans) {
    while (j < cut.length && cut[j]![1] <= a) j++
    let start = a
    for (let k = j; k < cut.length && cut[k]![0] < b; k++) {
      const [c, d] = cut[k]!
      if (c > start) out.push([start, c])
      start = Math.max(start, d)
    }
    if (start < b) out.push([start, b])
  }
  return out
}

export interface UptimeInput {
  spans: AvailabilitySpans
  /** When the database was registered: time before it is unknown. */
  createdAt: number
  /** When the agent was last heard from (a batch or a report); null: never. */
  lastHeardAt: number | null
  /** After this long without a word from the agent, its silence counts as unknown. */
  silentAfterMs: number
  now: number
}

/** The inputs of uptime() for `db`, its reported state and its spans. */
export function uptimeInput(
  db: Pick<RegisteredDatabase, 'created_at' | 'last_seen_at' | 'poll_interval_seconds'>,
  state: AvailabilityState | undefined,
  spans: AvailabilitySpans | undefined,
  now: number,
): UptimeInput {
  return {
    spans: spans ?? { outages: [], silences: [] },
    createdAt: db.created_at,
    lastHeardAt: lastHeardAt(db, state),
    silentAfterMs: silentAfterMs(db.poll_interval_seconds),
    now,
  }
}

function spansOf(input: UptimeInput): { down: Span[]; unknown: Span[] } {
  const { spans, now } = input
  const unknown: Span[] = spans.silences.map((s) => [s.started_at, s.ended_at])
  if (input.lastHeardAt === null) unknown.push([input.createdAt, now])
  else if (now - input.lastHeardAt > input.silentAfterMs) unknown.push([input.lastHeardAt, now])
  const silent = merged(unknown)
  // An outage still open lasts until now, less the time the agent has been silent; nothing counts after
  // now (a start or end the server's clock has not reached yet is cut there).
  const down = minus(
    merged(spans.outages.map((o): Span => [Math.min(o.started_at, now), Math.min(o.ended_at ?? now, now)])),
    silent,
  )
  return { down, unknown: silent }
}

/** The figures over [from, to), cut to start at the registration. */
function figures(down: Span[], unknown: Span[], createdAt: number, windowFrom: number, to: number): UptimeFigures {
  const from = Math.max(windowFrom, createdAt)
  const end = Math.max(from, to)
  const downMs = within(down, from, end)
  const unknownMs = within(unknown, from, end)
  const upMs = Math.max(0, end - from - downMs - unknownMs)
  return {
    up_ms: upMs,
    down_ms: downMs,
    unknown_ms: unknownMs,
    watched_ms: upMs + downMs,
    ratio: upMs + downMs > 0 ? Number((upMs / (upMs + downMs)).toFixed(4)) : null,
  }
}

/** The figures over [now - days, now) alone (the database list's: one pass over the spans, no days). */
export function uptimeTotal(input: UptimeInput, days: number): UptimeFigures {
  const { down, unknown } = spansOf(input)
  return figures(down, unknown, input.createdAt, input.now - days * DAY, input.now)
}

/** The figures over [now - days, now) and per UTC day (the first one partial), oldest first. */
export function uptime(input: UptimeInput, days: number): { total: UptimeFigures; days: UptimeDay[] } {
  const { down, unknown } = spansOf(input)
  const from = input.now - days * DAY
  const list: UptimeDay[] = []
  for (let day = Math.floor(from / DAY) * DAY; day < input.now; day += DAY) {
    list.push({
      date: new Date(day).toISOString().slice(0, 10),
      ...figures(down, unknown, input.createdAt, Math.max(day, from), Math.min(day + DAY, input.now)),
    })
  }
  return { total: figures(down, unknown, input.createdAt, from, input.now), days: list }
}
