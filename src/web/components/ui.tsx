// Small shared pieces of the dashboard: loading, empty and error states, a copy button, time and size
// formatting, useApi() that loads a GET endpoint and reloads it on demand (keeping what it showed while
// the server cannot be reached, and retrying), and useEscape() that closes a panel or a confirmation with
// the Esc key.
import type { ComponentChildren, RefObject } from 'preact'
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks'
import { type ApiError, get, isUnreachable } from '../api.ts'
import type { GetAnswer, Served } from '../api-routes.ts'
import { DbText, hasInvisible, revealInvisible } from './invisible.tsx'

export interface Loaded<T> {
  data: T | undefined
  /** The last call's error; undefined while earlier data are kept because the server could not be reached. */
  error: ApiError | Error | undefined
  loading: boolean
  /** The data are from an earlier call: the latest could not reach the server (it is being retried). */
  stale: boolean
  reload(): void
}

/** Retries of a call that could not reach the server: 5 s, 10 s, 20 s, then every 30 s. */
export const retryDelay = (attempt: number) => Math.min(30_000, 5000 * 2 ** Math.max(0, attempt - 1))

/**
 * GET `path` (skipped while null), again whenever `path` changes or reload() is called. A call that cannot
 * reach the server keeps the data shown (`stale`) and is retried by itself with a growing delay; other
 * errors replace the data.
 */
export function useApi<const P extends string>(path: (P & Served<'GET', P>) | null): Loaded<GetAnswer<P>> {
  type T = GetAnswer<P>
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean; stale?: boolean }>({
    loading: path !== null,
  })
  const [tick, setTick] = useState(0)
  const failures = useRef(0)
  useEffect(() => {
    if (path === null) return
    let live = true
    let retry: ReturnType<typeof setTimeout> | undefined
    setState((s) => ({ ...s, loading: true }))
    get<P>(path).then(
      (data) => {
        failures.current = 0
        if (live) setState({ data, loading: false })
      },
      (error: Error) => {
        if (!live) return
        if (isUnreachable(error)) {
          failures.current++
          retry = setTimeout(() => setTick((t) => t + 1), retryDelay(failures.current))
          setState((s) =>
            s.data !== undefined ? { data: s.data, loading: false, stale: true } : { error, loading: false },
          )
        } else {
          failures.current = 0
          setState({ error, loading: false })
        }
      },
    )
    return () => {
      live = false
      clearTimeout(retry)
    }
  }, [path, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return {
    data: state.data,
    error: state.error as ApiError | Error | undefined,
    loading: state.loading,
    stale: state.stale ?? false,
    reload,
  }
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="muted" role="status" aria-live="polite">
      {what}…
    </p>
  )
}

/**
 * An error in words; a server that cannot be reached reads as such (the call is being retried), not as the
 * browser's "Failed to fetch". A message may quote what it refused (a name, a parameter): shown with <DbText>.
 */
export function ErrorBox({ error }: { error: Error }) {
  if (isUnreachable(error)) {
    return (
      <p class="error unreachable" role="status">
        {error.message}…
      </p>
    )
  }
  return (
    <p class="error" role="alert">
      <DbText text={error.message} />
    </p>
  )
}

/** An empty state that says what to do next. */
export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p>
        <strong>{title}</strong>
      </p>
      {children}
    </div>
  )
}

/** Renders `loaded` through `render` once it has data, with the loading and error states around it. */
export function Async<T>({ loaded, children }: { loaded: Loaded<T>; children: (data: T) => ComponentChildren }) {
  if (loaded.error) return <ErrorBox error={loaded.error} />
  if (loaded.data === undefined) return <Loading />
  return <>{children(loaded.data)}</>
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false)
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text)
      setCopied(true)
      setTimeout(() => setCopied(false), 1500)
    } catch {
      // Clipboard refused (insecure origin): the text stays selectable on the page.
    }
  }
  return (
    <button type="button" class="copy" onClick={copy} aria-label={`${label} to the clipboard`}>
      {copied ? 'Copied' : label}
    </button>
  )
}

/**
 * A command or query with its copy button. Invisible and bidirectional control characters are shown as
 * marked ⟨U+XXXX⟩ with a note; the copy button copies the text as it is.
 */
export function Code({ text }: { text: string }) {
  const marked = hasInvisible(text)
  return (
    <div class="code">
      <pre>
        <code>{revealInvisible(text)}</code>
      </pre>
      <CopyButton text={text} />
      {marked && (
        <p class="invisible-note small">
          This text holds invisible or direction-changing characters, shown as ⟨U+…⟩. Copy copies it as it is.
        </p>
      )}
    </div>
  )
}

export function fmtTime(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '—'
  const d = new Date(value)
  return Number.isNaN(d.getTime()) ? '—' : d.toLocaleString()
}

/** Calls `onEscape` when Esc is pressed anywhere on the page while `active` (an open panel, menu or confirmation). */
export function useEscape(active: boolean, onEscape: () => void): void {
  const latest = useRef(onEscape)
  latest.current = onEscape
  // A layout effect: the listener is in place before the panel is painted, so an Esc pressed as soon as
  // it shows is never lost (a plain effect runs after the paint).
  useLayoutEffect(() => {
    if (!active) return
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape' || e.defaultPrevented || e.isComposing) return
      e.preventDefault()
      latest.current()
    }
    document.addEventListener('keydown', onKey)
    return () => document.removeEventListener('keydown', onKey)
  }, [active])
}

/**
 * Moves the focus to `inside` when `open` turns true (a confirmation or panel appears) and back to
 * `opener` when it turns false (cancelled, or closed with Esc), so that the keyboard never lands on the
 * page's top. Nothing happens on the first render.
 */
export function useFocusSwap(
  open: boolean,
  opener: RefObject<HTMLElement | null>,
  inside: RefObject<HTMLElement | null>,
): void {
  const first = useRef(true)
  useEffect(() => {
    if (first.current) {
      first.current = false
      return
    }
    ;(open ? inside : opener).current?.focus()
  }, [open])
}

/**
 * An action behind an inline "are you sure?" step: whether the question shows (`confirming`), Esc to
 * cancel it, the focus moved to `cancelButton` and back to `opener`, and the action's progress. `run`
 * keeps `busy` until `close` (the page moves on after a success) and shows a failure's message.
 */
export function useConfirmation() {
  const [confirming, setConfirming] = useState(false)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  const close = () => {
    setConfirming(false)
    setBusy(false)
  }
  useEscape(confirming && !busy, close)
  const opener = useRef<HTMLButtonElement>(null)
  const cancelButton = useRef<HTMLButtonElement>(null)
  useFocusSwap(confirming, opener, cancelButton)
  const run = async (action: () => Promise<void>) => {
    setBusy(true)
    setError('')
    try {
      await action()
    } catch (e) {
      setError((e as Error).message)
      setBusy(false)
    }
  }
  return { confirming, open: () => setConfirming(true), close, busy, error, run, opener, cancelButton }
}

/**
 * "3 min ago"; "never" without a time. Takes RFC 3339 or epoch milliseconds. `now` is the moment the age
 * is counted to: a stale snapshot's own time, so that its ages stay those it had when it was taken.
 */
export function ago(value: string | number | null | undefined, now: string | number = Date.now()): string {
  if (value === null || value === undefined || value === '') return 'never'
  const at = new Date(value).getTime()
  if (Number.isNaN(at)) return '—'
  const to = new Date(now).getTime()
  const s = Math.max(0, ((Number.isNaN(to) ? Date.now() : to) - at) / 1000)
  if (s < 60) return `${Math.round(s)} s ago`
  if (s < 3600) return `${Math.round(s / 60)} min ago`
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`
  return `${Math.round(s / 86_400)} days ago`
}

/** A number with at most `digits` decimals and no trailing zeros: 9.5, 402, 0.25. */
const trimmed = (n: number, digits: number) => `${+n.toFixed(digits)}`

/** Bytes in binary units: "402 B", "9.5 B", "4.9 KB", "1.2 GB" (one decimal from KB up). */
export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—'
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB']
  let v = n
  let u = 0
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  if (u === 0) {
    const bytes = trimmed(v, Math.abs(v) < 10 ? 1 : 0)
    // 1023.7 B rounds to 1024 B: that is 1.0 KB.
    if (Math.abs(Number(bytes)) < 1024) return `${bytes} B`
    v /= 1024
    u = 1
  }
  return `${v.toFixed(1)} ${units[u]}`
}

export function fmtMs(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—'
  const abs = Math.abs(n)
  if (abs < 1) return `${n.toFixed(2)} ms`
  if (abs < 1000) return `${n.toFixed(abs < 10 ? 1 : 0)} ms`
  return `${(n / 1000).toFixed(abs < 10_000 ? 2 : 1)} s`
}

/** A count in the reader's locale; a fractional value (an average) keeps at most two decimals below 10, one below 100, none above. */
export function fmtNum(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—'
  const abs = Math.abs(n)
  return n.toLocaleString(undefined, { maximumFractionDigits: abs < 10 ? 2 : abs < 100 ? 1 : 0 })
}

/** A time of day, "14:02"; with the date when it is not today. */
export function fmtClock(value: string | number | null | undefined, now = Date.now()): string {
  if (value === null || value === undefined) return '—'
  const d = new Date(value)
  if (Number.isNaN(d.getTime())) return '—'
  const time = d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })
  return d.toDateString() === new Date(now).toDateString()
    ? time
    : `${d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })}, ${time}`
}
