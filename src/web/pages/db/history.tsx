// Session and lock history on the Active and Locks pages: a time slider over the kept snapshots of the
// last hour, 6 or 24 hours (GET /active/history), whose position is the route's ?at= (epoch ms; absent:
// live), and the list of past lock chains (GET /locks/chains) with each chain's root blocker, members,
// start, end and duration, longest first, the chains under a second folded under one line. Every poll is kept for a day, then only the snapshots with a blocked session
// or a long statement (the README's Session history), so older windows have gaps.
import type { Static } from '@sinclair/typebox'
import { useEffect, useMemo, useState } from 'preact/hooks'
import type { LockChain, SnapshotTime as SnapshotTimeSchema } from '../../../shared/api/session-history.ts'
import { Collapsible } from '../../components/collapsible.tsx'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Async, Empty, fmtClock, fmtTime, useApi } from '../../components/ui.tsx'
import { SelectField, apiPath, fmtDuration, isStale } from './common.tsx'
import type { Database } from './types.ts'

export type SnapshotTime = Static<typeof SnapshotTimeSchema>

const SPANS: [string, string][] = [
  ['3600000', 'Last hour'],
  ['21600000', 'Last 6 hours'],
  ['86400000', 'Last 24 hours'],
]

/** The route's ?at= as epoch ms; undefined (live) when absent or not a time. */
export function atOf(query: URLSearchParams): number | undefined {
  const value = query.get('at')
  return value && /^\d{1,15}$/.test(value) ? Number(value) : undefined
}

/** The index of the last snapshot at or before `at` (the one the API answers for it); -1 when none. */
export function snapshotIndex(times: readonly { at: number }[], at: number): number {
  let found = -1
  for (let i = 0; i < times.length; i++) {
    if (times[i]!.at <= at) found = i
    else break
  }
  return found
}

/**
 * The slider: live, or one of the kept snapshots of the chosen span. `onChange(undefined)` goes back to
 * live. Snapshots with a blocked session are marked on the strip above it, and can be stepped through.
 * Once the agent stopped sending, "live" is the latest data, and says from when (the page's red banner).
 */
export function TimeSlider({
  db,
  at,
  onChange,
}: {
  db: Database
  at: number | undefined
  onChange(at: number | undefined): void
}) {
  const [span, setSpan] = useState('3600000')
  const [until, setUntil] = useState(() => Date.now())
  // While live, the list follows now; a chosen snapshot keeps the list it was chosen from.
  useEffect(() => {
    if (at !== undefined) return
    const timer = setInterval(() => setUntil(Date.now()), 30_000)
    return () => clearInterval(timer)
  }, [at])
  const since = new Date(until - Number(span)).toISOString()
  const loaded = useApi(
    apiPath(
      db,
      `/active/history?since=${encodeURIComponent(since)}&until=${encodeURIComponent(new Date(until + 60_000).toISOString())}&limit=10000`,
    ),
  )
  const times = loaded.data?.snapshots ?? []
  const index = at === undefined ? times.length - 1 : snapshotIndex(times, at)
  const blockedMarks = useMemo(() => times.map((t, i) => [t, i] as const).filter(([t]) => t.blocked > 0), [times])
  const go = (i: number) => {
    if (i < 0 || i >= times.length) return
    onChange(times[i]!.at)
  }
  // Live is newer than every kept snapshot (the list is reloaded every 30 s): the latest kept snapshot is
  // already a previous one when it had a blocked session, e.g. a chain that ended since the list loaded.
  const previousBlocked = [...blockedMarks].reverse().find(([, i]) => (at === undefined ? i <= index : i < index))?.[1]
  const nextBlocked = blockedMarks.find(([, i]) => i > index)?.[1]
  const current = at === undefined ? undefined : times[index]
  const stale = isStale(db)
  const latest = stale ? `Latest data, from ${fmtClock(db.last_seen_at)}: not live` : 'Live'
  return (
    <section class="panel time-slider" aria-label="Session history">
      <div class="toolbar">
        <strong
          class={at === undefined && stale ? 'sev-critical' : undefined}
          data-slider-state={at === undefined ? (stale ? 'stale' : 'live') : 'snapshot'}
        >
          {at === undefined ? latest : current ? `Snapshot of ${fmtTime(current.ts)}` : 'No snapshot kept at that time'}
        </strong>
        {current && (
          <span class={current.blocked > 0 ? 'sev-critical small' : 'muted small'}>
            {current.blocked > 0 ? `${current.blocked} waiting for a lock` : 'nobody waiting for a lock'}
          </span>
        )}
        <SelectField
          label="History of"
          value={span}
          options={SPANS}
          onChange={(v) => (setSpan(v), setUntil(Date.now()))}
        />
        <button
          type="button"
          onClick={() => go(index - 1)}
          disabled={times.length === 0 || index <= 0}
          aria-label="Earlier snapshot"
        >
          ◀ Earlier
        </button>
        <button
          type="button"
          onClick={() => go(index + 1)}
          disabled={at === undefined || index >= times.length - 1}
          aria-label="Later snapshot"
        >
          Later ▶
        </button>
        <button
          type="button"
          onClick={() => previousBlocked !== undefined && go(previousBlocked)}
          disabled={previousBlocked === undefined}
        >
          Previous with a blocked session
        </button>
        <button
          type="button"
          onClick={() => nextBlocked !== undefined && go(nextBlocked)}
          disabled={nextBlocked === undefined}
        >
          Next with a blocked session
        </button>
        <button
          type="button"
          onClick={() => onChange(undefined)}
          disabled={at === undefined}
          aria-pressed={at === undefined}
        >
          {stale ? 'Latest' : 'Live'}
        </button>
      </div>
      {times.length > 0 ? (
        <div class="slider-track">
          <svg
            class="slider-marks"
            viewBox={`0 0 ${Math.max(1, times.length - 1)} 1`}
            preserveAspectRatio="none"
            aria-hidden="true"
          >
            {blockedMarks.map(([t, i]) => (
              <rect key={t.at} x={i - 0.5} y={0} width={1} height={1} class="mark-blocked" />
            ))}
          </svg>
          <input
            type="range"
            min={0}
            max={times.length - 1}
            step={1}
            value={Math.max(0, index)}
            aria-label="Snapshot time"
            aria-valuetext={current ? fmtTime(current.ts) : stale ? 'latest' : 'live'}
            onInput={(e) => go(Number((e.target as HTMLInputElement).value))}
          />
          <div class="slider-ends muted small">
            <span>{fmtTime(times[0]!.ts)}</span>
            <span>
              {times.length} snapshots{loaded.data?.earlier_left_out ? ' (the latest 10,000)' : ''}
            </span>
            <span>{fmtTime(times[times.length - 1]!.ts)}</span>
          </div>
        </div>
      ) : (
        <p class="muted small">
          {loaded.loading ? 'Loading the kept snapshots…' : 'No snapshot kept in this span yet.'}
        </p>
      )}
    </section>
  )
}

export type PastChain = Static<typeof LockChain>

const who = (user: string | null, application: string | null) =>
  [user, application && `“${application}”`].filter(Boolean).join(' · ') || '—'

/** Chains shorter than this are folded under one line: a busy database has many, and they hide the long ones. */
export const SHORT_CHAIN_MS = 1000

/** Chains in the server's order (longest first) split into those shown and the short ones folded. */
export function foldShortChains<T extends { duration_ms: number }>(chains: readonly T[]): { long: T[]; short: T[] } {
  return {
    long: chains.filter((c) => c.duration_ms >= SHORT_CHAIN_MS),
    short: chains.filter((c) => c.duration_ms < SHORT_CHAIN_MS),
  }
}

function ChainItem({ c, onShow }: { c: PastChain; onShow(at: number): void }) {
  return (
    <li class="chain-item">
      <div>
        <span class="mono">root pid {c.root.pid}</span>{' '}
        <span class="muted small">
          <DbText text={who(c.root.user, c.root.application)} />
        </span>{' '}
        {c.ongoing ? <span class="badge badge-critical">ongoing</span> : <span class="badge badge-muted">ended</span>}{' '}
        <span class="num">{fmtDuration(c.duration_ms)}</span>{' '}
        <span class="muted small">
          from {fmtTime(c.started_at)} to {fmtTime(c.last_seen)} · blocked {c.members.length} session
          {c.members.length === 1 ? '' : 's'} · seen in {c.samples} snapshot
          {c.samples === 1 ? '' : 's'}
        </span>{' '}
        <button type="button" class="link" onClick={() => onShow(Date.parse(c.last_seen))}>
          Show its last snapshot
        </button>
      </div>
      <div class="mono small truncate" title={escapeInvisible(c.root.statement ?? '')}>
        {c.root.statement ? <DbText text={c.root.statement} /> : <span class="muted">(no statement)</span>}
      </div>
      <details>
        <summary>Members</summary>
        <ul>
          {c.members.map((m) => (
            <li key={m.pid}>
              <span class="mono">pid {m.pid}</span>{' '}
              <span class="muted small">
                <DbText text={who(m.user, m.application)} />
              </span>{' '}
              <span class="sev-critical small">blocked by {m.blocked_by.map((p) => `pid ${p}`).join(', ')}</span>{' '}
              <span class="muted small">
                waiting since {fmtTime(m.waiting_since)}, last seen {fmtTime(m.last_seen)}
              </span>
              <div class="mono small truncate" title={escapeInvisible(m.statement ?? '')}>
                {m.statement ? <DbText text={m.statement} /> : <span class="muted">(no statement)</span>}
              </div>
            </li>
          ))}
        </ul>
      </details>
    </li>
  )
}

const CHAIN_LIMIT = 100

/**
 * The lock chains of the last 24 hours, the longest first (ordered by the server, so a long chain is
 * never left out for many short ones); those under a second are folded under one line that opens them.
 * `onShow(at)` moves the slider to a chain's last sighting.
 */
export function PastLockChains({ db, onShow }: { db: Database; onShow(at: number): void }) {
  const [since] = useState(() => new Date(Date.now() - 86_400_000).toISOString())
  const chains = useApi(
    apiPath(db, `/locks/chains?since=${encodeURIComponent(since)}&order=longest&limit=${CHAIN_LIMIT}`),
  )
  return (
    <section class="panel past-chains">
      <h2>Lock chains of the last 24 hours</h2>
      <Async loaded={chains}>
        {(list) => {
          if (list.length === 0) {
            return (
              <Empty title="No lock chain in the last 24 hours">
                <p>
                  A chain is recorded when a session waits for a lock another holds; it stays readable after it ends,
                  for the retention.
                </p>
              </Empty>
            )
          }
          const { long, short } = foldShortChains(list)
          const key = (c: PastChain) => `${c.root.pid}-${c.started_at}`
          return (
            <>
              <p class="muted small">Longest first.</p>
              {long.length > 0 && (
                <ul class="chain-list">
                  {long.map((c) => (
                    <ChainItem key={key(c)} c={c} onShow={onShow} />
                  ))}
                </ul>
              )}
              {short.length > 0 && (
                <Collapsible
                  class="short-chains"
                  title={`${short.length}${list.length === CHAIN_LIMIT ? ' or more' : ''} short chain${short.length === 1 ? '' : 's'} under 1 s`}
                  summary="sessions that waited less than a second: usual under load"
                >
                  <ul class="chain-list">
                    {short.map((c) => (
                      <ChainItem key={key(c)} c={c} onShow={onShow} />
                    ))}
                  </ul>
                </Collapsible>
              )}
            </>
          )
        }}
      </Async>
    </section>
  )
}
