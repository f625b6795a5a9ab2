// What the per-database pages share: links inside a database, the time window kept in the route's
// query (?range=6h, or ?range=custom&since=…&until=…) with its picker, the bucket that suits a window,
// periodic reloads, badges, key-figure cards, a percentage meter, duration formatting, the "no data
// yet" state, the agent's collector notes and the note that verifying the email unlocks something.
import type { ComponentChildren } from 'preact'
import { useEffect, useId, useMemo, useRef, useState } from 'preact/hooks'
import { ApiError, api } from '../../api.ts'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Empty, ErrorBox, fmtMs } from '../../components/ui.tsx'
import { useLocalMode } from '../auth.tsx'
import type { Database, Severity } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { AgentNote as AgentNoteSchema } from '../../../shared/api/doctor.ts'

/** `#/databases/<id>/<rest>` */
export const dbHref = (db: Pick<Database, 'id'>, rest = '') =>
  `#/databases/${encodeURIComponent(db.id)}${rest ? `/${rest}` : ''}`

/** The Issues page, opened at the cause of finding `key` (a finding's or a cause's key) when one is named. */
export const issuesHref = (db: Pick<Database, 'id'>, key?: string) =>
  `${dbHref(db, 'issues')}${key ? `?finding=${encodeURIComponent(key)}` : ''}`

/**
 * An event's link as the page opens it: links stored before the Issues page (…/alerts, …/doctor,
 * …/recommendations) go to Issues straight, at the event's cause when it names one (an alert's key).
 */
export function eventHref(link: string, object?: string | null): string {
  const old = /^(#\/databases\/[^/?]+)\/(?:alerts|doctor|recommendations)(?:\?.*)?$/.exec(link)
  if (!old) return link
  const finding = new URLSearchParams(link.split('?')[1] ?? '').get('finding') ?? object
  return `${old[1]}/issues${finding ? `?finding=${encodeURIComponent(finding)}` : ''}`
}

/** `/databases/<id><rest>`: an API path of the database. */
/** A database's API path, typed as a template (`/databases/${string}/rest`) so that its route is checked (web/api-routes.ts). */
export const apiPath = <const R extends string>(db: Pick<Database, 'id'>, rest: R): `/databases/${string}${R}` =>
  `/databases/${encodeURIComponent(db.id)}${rest}`

export const engineName = (engine: string) => (engine === 'clickhouse' ? 'ClickHouse' : 'PostgreSQL')

/** A labelled select of `[value, label]` options. */
export function SelectField({
  label,
  value,
  options,
  onChange,
}: {
  label: string
  value: string
  options: [string, string][]
  onChange(value: string): void
}) {
  return (
    <Field label={label}>
      {(id) => (
        <select id={id} value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
          {options.map(([v, text]) => (
            <option key={v} value={v}>
              {escapeInvisible(text)}
            </option>
          ))}
        </select>
      )}
    </Field>
  )
}

/** A labelled control: `children` renders the control with the id its label points at. */
export function Field({ label, children }: { label: string; children(id: string): ComponentChildren }) {
  const id = useId()
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children(id)}
    </div>
  )
}

// ---- time windows ----

export const RANGES = [
  { key: '1h', label: 'Last hour', ms: 3_600_000 },
  { key: '6h', label: 'Last 6 hours', ms: 6 * 3_600_000 },
  { key: '24h', label: 'Last 24 hours', ms: 24 * 3_600_000 },
  { key: '7d', label: 'Last 7 days', ms: 7 * 24 * 3_600_000 },
] as const

/**
 * The window every per-database page with a time range starts with (statements, a statement, waits,
 * internals, tables and indexes, replication, ClickHouse parts and server): one default, so that a range
 * carried from tab to tab (windowQuery) and a page opened afresh agree. Six hours show the shape of the
 * day's latest hours at minute resolution and rank statements by what they cost recently; the overview's
 * "top statements of the last 24 hours" link to the statements with ?range=24h.
 */
export const DEFAULT_RANGE = '6h'

/** The route's window (`range`, `since`, `until`) as a query string for links that keep it; '' when the default. */
export function windowQuery(query: URLSearchParams): string {
  const keep = new URLSearchParams()
  for (const k of ['range', 'since', 'until']) {
    const v = query.get(k)
    if (v) keep.set(k, v)
  }
  return keep.toString()
}

/** `href` with the route's window appended as its query. */
export const withWindow = (href: string, query: URLSearchParams) => {
  const search = windowQuery(query)
  return search ? `${href}?${search}` : href
}

export interface TimeWindow {
  range: string
  since: string
  until: string
  spanMs: number
  /** `since=…&until=…` */
  params: string
  /** A bucket in seconds that cuts the window into a few hundred intervals at most. */
  bucket: number
  /** `[since, until]` in epoch ms: the span of the window's charts. */
  bounds: [number, number]
}

const BUCKETS = [60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 86_400]

export function bucketFor(spanMs: number, points = 360): number {
  return BUCKETS.find((b) => spanMs / 1000 / b <= points) ?? 86_400
}

/** The window the route's query names (default: the last DEFAULT_RANGE); `refresh()` moves a relative window to now. */
export function useWindow(query: URLSearchParams, fallback = DEFAULT_RANGE): TimeWindow & { refresh(): void } {
  const range = query.get('range') ?? fallback
  const since = query.get('since')
  const until = query.get('until')
  const [tick, setTick] = useState(0)
  const tw = useMemo(() => {
    let from: number
    let to: number
    if (range === 'custom' && since && until && !Number.isNaN(Date.parse(since)) && !Number.isNaN(Date.parse(until))) {
      from = Date.parse(since)
      to = Date.parse(until)
    } else {
      const preset = RANGES.find((r) => r.key === range) ?? RANGES.find((r) => r.key === fallback) ?? RANGES[1]
      to = Date.now()
      from = to - preset.ms
    }
    const s = new Date(from).toISOString()
    const u = new Date(to).toISOString()
    const spanMs = Math.max(60_000, to - from)
    return {
      range,
      since: s,
      until: u,
      spanMs,
      params: `since=${encodeURIComponent(s)}&until=${encodeURIComponent(u)}`,
      bucket: bucketFor(spanMs),
      bounds: [from, to] as [number, number],
    }
  }, [range, since, until, tick])
  return { ...tw, refresh: () => setTick((t) => t + 1) }
}

/** `YYYY-MM-DDTHH:mm` in local time, for datetime-local inputs. */
function localInput(iso: string): string {
  const d = new Date(iso)
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`
}

export function TimeRangePicker({
  tw,
  setQuery,
}: {
  tw: TimeWindow & { refresh(): void }
  setQuery(patch: Record<string, string | undefined>): void
}) {
  const [custom, setCustom] = useState(tw.range === 'custom')
  const [from, setFrom] = useState(localInput(tw.since))
  const [to, setTo] = useState(localInput(tw.until))
  const [error, setError] = useState('')
  const choose = (value: string) => {
    if (value === 'custom') {
      setCustom(true)
      setFrom(localInput(tw.since))
      setTo(localInput(tw.until))
      return
    }
    setCustom(false)
    setQuery({ range: value, since: undefined, until: undefined })
  }
  const apply = (e: Event) => {
    e.preventDefault()
    const f = Date.parse(from)
    const t = Date.parse(to)
    if (Number.isNaN(f) || Number.isNaN(t)) return setError('Enter both times.')
    if (f >= t) return setError('The start must be before the end.')
    setError('')
    setQuery({ range: 'custom', since: new Date(f).toISOString(), until: new Date(t).toISOString() })
  }
  return (
    <form class="time-range" onSubmit={apply}>
      <SelectField
        label="Time range"
        value={custom ? 'custom' : tw.range}
        options={[...RANGES.map((r): [string, string] => [r.key, r.label]), ['custom', 'Custom…']]}
        onChange={choose}
      />
      {custom && (
        <>
          <Field label="From">
            {(id) => (
              <input
                id={id}
                type="datetime-local"
                value={from}
                onInput={(e) => setFrom((e.target as HTMLInputElement).value)}
                required
              />
            )}
          </Field>
          <Field label="To">
            {(id) => (
              <input
                id={id}
                type="datetime-local"
                value={to}
                onInput={(e) => setTo((e.target as HTMLInputElement).value)}
                required
              />
            )}
          </Field>
          <button type="submit">Apply</button>
        </>
      )}
      {!custom && (
        <button type="button" class="ghost" onClick={tw.refresh} title="Move the window to now">
          Refresh
        </button>
      )}
      {error && (
        <span class="error small" role="alert">
          {error}
        </span>
      )}
    </form>
  )
}

// ---- small pieces ----

/** Calls `fn` (the latest one given) every `ms` while the page is shown; a new `fn` does not restart the timer. */
export function useEvery(ms: number, fn: () => void): void {
  const latest = useRef(fn)
  latest.current = fn
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') latest.current()
    }, ms)
    return () => clearInterval(timer)
  }, [ms])
}

/**
 * The agent stopped sending: the database had data and is disconnected now (no batch within
 * max(3 × poll interval, 60 s), the server's rule). Its pages then show data from that time, not now.
 */
export const isStale = (db: Pick<Database, 'status' | 'last_seen_at'>) =>
  db.status === 'disconnected' && db.last_seen_at !== null

export function SeverityBadge({ severity }: { severity: Severity | string }) {
  const cls =
    severity === 'critical' || severity === 'warning' || severity === 'info' ? `badge-${severity}` : 'badge-muted'
  return <span class={`badge ${cls}`}>{severity}</span>
}

/** Connected, or disconnected: red when `stale` (the agent sent data and stopped), grey when it never sent any. */
export function StatusBadge({ status, stale = false }: { status: string; stale?: boolean }) {
  return (
    <span class={`badge ${status === 'connected' ? 'badge-ok' : stale ? 'badge-critical' : 'badge-muted'}`}>
      {status}
    </span>
  )
}

/** The doctor's status as a colour class: healthy ok, degraded warning, unhealthy critical. */
export const statusClass = (status: string | undefined) =>
  status === 'unhealthy' ? 'critical' : status === 'degraded' ? 'warning' : status === 'healthy' ? 'ok' : ''

export function Card({
  label,
  value,
  sub,
  tone,
  href,
  name,
}: {
  label: string
  value: ComponentChildren
  sub?: ComponentChildren
  tone?: string
  href?: string
  name?: string
}) {
  return (
    <div class="card" data-card={name}>
      <div class="label">{href ? <a href={href}>{label}</a> : label}</div>
      <div class={`value${tone ? ` ${tone}` : ''}`}>{value}</div>
      {sub !== undefined && <div class="sub">{sub}</div>}
    </div>
  )
}

/** A percentage bar (0–100) coloured by thresholds in percent. */
export function Meter({
  pct,
  warn = 70,
  crit = 90,
  label,
}: {
  pct: number | null | undefined
  warn?: number
  crit?: number
  label: string
}) {
  if (pct === null || pct === undefined) return <span class="muted">—</span>
  const tone = pct >= crit ? ' critical' : pct >= warn ? ' warning' : ''
  const shown = Math.max(0, Math.min(100, pct))
  return (
    <div class="meter-row">
      <div
        class={`meter${tone}`}
        role="meter"
        aria-label={escapeInvisible(label)}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={Math.round(shown)}
      >
        <span style={{ width: `${shown}%` }} />
      </div>
      <span class="num small">{pct.toFixed(pct < 10 ? 1 : 0)} %</span>
    </div>
  )
}

export const fmtRatio = (r: number | null | undefined, digits = 1) =>
  r === null || r === undefined ? '—' : `${(r * 100).toFixed(digits)} %`

/** A duration: milliseconds below a minute, then "4 min 3 s", "2 h 5 min", "3 d 4 h". */
export function fmtDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—'
  if (ms < 60_000) return fmtMs(ms)
  const s = Math.floor(ms / 1000)
  const [d, h, m] = [Math.floor(s / 86_400), Math.floor((s % 86_400) / 3600), Math.floor((s % 3600) / 60)]
  if (d > 0) return `${d} d ${h} h`
  if (h > 0) return `${h} h ${m} min`
  return `${m} min ${s % 60} s`
}

/** "per minute", "per 5 minutes", "per hour", "per day": the label of a bucket of `seconds`. */
export function perBucket(seconds: number): string {
  if (seconds % 86_400 === 0) return seconds === 86_400 ? 'per day' : `per ${seconds / 86_400} days`
  if (seconds % 3600 === 0) return seconds === 3600 ? 'per hour' : `per ${seconds / 3600} hours`
  if (seconds % 60 === 0) return seconds === 60 ? 'per minute' : `per ${seconds / 60} minutes`
  return `per ${seconds} s`
}

/** Chart series from timeseries points: `[key, label]` pairs, each value multiplied by `scale` (1/bucket for rates). */
export function seriesFrom<P extends { ts: string }>(points: P[], keys: [string, string][], scale = 1) {
  return {
    times: points.map((p) => Date.parse(p.ts)),
    series: keys.map(([key, label]) => ({
      label,
      values: points.map((p) => {
        const v = (p as Record<string, unknown>)[key]
        return typeof v === 'number' ? v * scale : null
      }),
    })),
  }
}

/** A table named with its database (ClickHouse's parts, merges and mutations). */
export function TableName({ database, table }: { database: string; table: string }) {
  return (
    <>
      <span class="muted">
        <DbText text={database} />.
      </span>
      <DbText text={table} />
    </>
  )
}

/** The empty state of a database the agent never sent data for. */
export function NoDataYet({ db }: { db: Database }) {
  if (useLocalMode()) {
    return (
      <Empty title="No data yet from dbm local's agent">
        <p>
          dbm local has received nothing for{' '}
          <strong>
            <DbText text={db.name} />
          </strong>{' '}
          yet. Its agent connects at start and keeps retrying a database that does not answer: the terminal where dbm
          local runs says why, one line per database. Data show here within a poll once it answers.
        </p>
      </Empty>
    )
  }
  return (
    <Empty title="No data yet: start the agent with this config">
      <p>
        dbm has not received anything for{' '}
        <strong>
          <DbText text={db.name} />
        </strong>
        . Run <code>dbm agent</code> with a database entry named{' '}
        <code>
          <DbText text={db.name} />
        </code>
        ; the <a href="#/settings/agent">agent setup page</a> gives you the config and an API key.
      </p>
    </Empty>
  )
}

/** A note of the agent's collectors ('info': left out by design, shown on the page it concerns, not on the overview). */
export type AgentNote = Static<typeof AgentNoteSchema>

/** The notes to act on, shown on the overview: info notes stay on the page they concern (statements). */
export const warningNotes = (notes: AgentNote[]) => notes.filter((n) => n.level !== 'info')

/** True on a phone-width screen (the stylesheet's 720 px breakpoint), read once. */
export const narrowScreen = () => typeof matchMedia === 'function' && matchMedia('(max-width: 720px)').matches

/**
 * The agent's notes (overview's agent_notes): each says why some data is missing and what to do. `extra`
 * adds items of the page's own (`count` of them). A disclosure: open on a wide screen, folded to its
 * title and count on a phone, where it would push the page's content down.
 */
export function AgentNotes({
  notes,
  extra,
  count = 0,
  title = 'The agent reports',
}: {
  notes: AgentNote[]
  extra?: ComponentChildren
  count?: number
  title?: string
}) {
  const [open] = useState(() => !narrowScreen())
  if (notes.length === 0 && !extra) return null
  const total = notes.length + count
  return (
    <section class="panel warning notes" aria-label={title} data-agent-notes>
      <details open={open}>
        <summary>
          <h2 class="small">{title}</h2> <span class="muted small">({total === 1 ? '1 note' : `${total} notes`})</span>
        </summary>
        <ul>
          {notes.map((n) => (
            <li key={`${n.collector}:${n.level ?? ''}`}>
              <code>
                <DbText text={n.collector} />
              </code>
              : <DbText text={n.message} />
            </li>
          ))}
          {extra}
        </ul>
      </details>
    </section>
  )
}

/** An error from the API; a 400 that names an engine or version limit reads as a note, not a failure. */
export function ApiProblem({ error }: { error: Error }) {
  if (
    error instanceof ApiError &&
    error.status === 400 &&
    /needs PostgreSQL|this endpoint serves/.test(error.message)
  ) {
    return <p class="muted">Not available: {error.message}.</p>
  }
  return <ErrorBox error={error} />
}

/** A note that verifying the email address unlocks something, with a button that sends the mail again. */
export function VerifyNote({ message }: { message: string }) {
  const [state, setState] = useState<{ sending?: boolean; done?: string; error?: string }>({})
  const resend = async () => {
    setState({ sending: true })
    try {
      await api('POST', '/auth/resend-verification')
      setState({ done: 'Sent: open the link in the mail, then reload this page.' })
    } catch (e) {
      setState({ error: (e as Error).message })
    }
  }
  return (
    <div class="verify-note" role="note">
      <p>{message}</p>
      <div class="row">
        <button type="button" onClick={resend} disabled={state.sending}>
          {state.sending ? 'Sending…' : 'Resend the verification mail'}
        </button>
        {state.done && <span class="success small">{state.done}</span>}
        {state.error && (
          <span class="error small" role="alert">
            {state.error}
          </span>
        )}
      </div>
    </div>
  )
}
