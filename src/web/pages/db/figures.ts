// The doctor's figures (its metrics_summary and each finding's metrics) in human units. The API names
// each figure's unit in its key, as the server's README says (sizes are bytes, durations milliseconds):
// `_bytes` sizes, `_ms` and `_s` / `_seconds` durations, `_s_ago` a time since, `_ratio` / `_share`
// shares of 1, `_pct` percentages, `_at` and RFC 3339 strings points in time, `_on` / `_installed` /
// `is_…` flags of 0 and 1. The label drops the unit the value now shows.
import { ago, fmtBytes, fmtTime } from '../../components/ui.tsx'
import { fmtDuration } from './common.tsx'

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d/

/** "longest_query_ms" → "longest query"; "last_seen_s_ago" → "last seen". */
export function figureLabel(key: string): string {
  return key
    .replace(/_s_ago$/, '')
    .replace(/_(ms|s|seconds|bytes|pct)$/, '')
    .replace(/^is_/, '')
    .replace(/_/g, ' ')
}

/** A percentage with at most `digits` decimals: shares near 100 % (cache hits) need two to tell 99.9 from 99.99. */
const percent = (pct: number, digits: number) => `${+pct.toFixed(digits)} %`

/** One figure with its unit, e.g. 1.5 MB, 2 min 5 s, 99.12 %, "3 h ago (date)". */
export function formatFigure(key: string, v: unknown): string {
  if (v === null || v === undefined) return '—'
  if (typeof v === 'string') return ISO_TIME.test(v) ? `${ago(v)} (${fmtTime(v)})` : v
  if (typeof v === 'boolean') return v ? 'yes' : 'no'
  if (typeof v !== 'number' || !Number.isFinite(v)) return typeof v === 'object' ? JSON.stringify(v) : String(v)
  if (/_s_ago$/.test(key)) return `${fmtDuration(v * 1000)} ago`
  if (/_at$/.test(key)) return `${ago(v)} (${fmtTime(v)})`
  if (/_(ratio|share)$/.test(key)) return percent(v * 100, 2)
  if (/_pct$/.test(key)) return percent(v, 1)
  if (/_bytes($|_)/.test(key)) return fmtBytes(v)
  if (/_ms$/.test(key)) return fmtDuration(v)
  if (/_(s|seconds)$/.test(key)) return fmtDuration(v * 1000)
  if ((/_(on|installed)$/.test(key) || /^is_/.test(key)) && (v === 0 || v === 1)) return v === 1 ? 'yes' : 'no'
  return v.toLocaleString()
}
