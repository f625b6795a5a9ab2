// Small shared pieces of the dashboard: loading, empty and error states, a copy button, time and size
// formatting, useApi() that loads a GET endpoint and reloads it on demand, and useEscape() that closes a
// panel or a confirmation with the Esc key.
import type { ComponentChildren, RefObject } from 'preact'
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks'
import { ApiError, get } from '../api.ts'

export interface Loaded<T> {
  data: T | undefined
  error: ApiError | Error | undefined
  loading: boolean
  reload(): void
}

/** GET `path` (skipped while null), again whenever `path` changes or reload() is called. */
export function useApi<T = any>(path: string | null): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: path !== null })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    if (path === null) return
    let live = true
    setState((s) => ({ ...s, loading: true }))
    get<T>(path).then(
      (data) => live && setState({ data, loading: false }),
      (error: Error) => live && setState({ error, loading: false }),
    )
    return () => {
      live = false
    }
  }, [path, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { data: state.data, error: state.error as ApiError | Error | undefined, loading: state.loading, reload }
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="muted" role="status" aria-live="polite">
      {what}…
    </p>
  )
}

export function ErrorBox({ error }: { error: Error }) {
  return (
    <p class="error" role="alert">
      {error.message}
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

/** A command or query with its copy button. */
export function Code({ text }: { text: string }) {
  return (
    <div class="code">
      <pre>
        <code>{text}</code>
      </pre>
      <CopyButton text={text} />
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
export function useFocusSwap(open: boolean, opener: RefObject<HTMLElement | null>, inside: RefObject<HTMLElement | null>): void {
  const first = useRef(true)
  useEffect(() => {
    if (first.current) {
      first.current = false
      return
    }
    ;(open ? inside : opener).current?.focus()
  }, [open])
}

/** "3 min ago"; "never" without a time. Takes RFC 3339 or epoch milliseconds. */
export function ago(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === '') return 'never'
  const at = new Date(value).getTime()
  if (Number.isNaN(at)) return '—'
  const s = Math.max(0, (Date.now() - at) / 1000)
  if (s < 60) return `${Math.round(s)} s ago`
  if (s < 3600) return `${Math.round(s / 60)} min ago`
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`
  return `${Math.round(s / 86_400)} days ago`
}

export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—'
  const units = ['B', 'KB', 'MB', 'GB', 'TB']
  let v = n
  let u = 0
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`
}

export function fmtMs(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—'
  if (n < 1) return `${n.toFixed(2)} ms`
  if (n < 1000) return `${n.toFixed(n < 10 ? 1 : 0)} ms`
  return `${(n / 1000).toFixed(n < 10_000 ? 2 : 1)} s`
}

export const fmtNum = (n: number | null | undefined) => (n === null || n === undefined ? '—' : n.toLocaleString())
