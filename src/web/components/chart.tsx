// A small uPlot wrapper: a time chart of one or more series that takes its container's width (a
// ResizeObserver), follows the theme (colours from the stylesheet's variables, redrawn when the theme
// changes), can stack its series (areas) and draws vertical marks (e.g. where a statement's plan changed,
// the database's events) with a tooltip naming each when the pointer is on it.
// Its legend is ours, not uPlot's: one toggle button per series (aria-pressed; a stacked chart restacks
// without the hidden ones) with the value under the cursor, else the latest one. The drawing is an image
// whose text alternative names the range and each series' latest and largest values. The chart is
// destroyed on unmount. Callers pass memoised arrays: a new `times` or `series` array rebuilds it, new
// `marks` only redraw it. Per-bucket values (totals or rates over an interval) leave out the intervals
// that hold only part of their time: the one still running at the end, and the first of a series and the
// first after a gap (the agent's first cycle only takes a baseline, so those would dip for no reason).
// When the data start well after the window does (a database watched for 20 minutes, a 6-hour range),
// the axis starts where the data do, as tools that scale to their data (PgHero's charts) do, instead of
// squeezing them into a sliver at the right edge, and the caption says "collecting since 14:02" and the
// range asked for; the axis still ends at the window's end. Byte axes tick at whole binary units (5 KB,
// 10 KB, not 4.9 KB). Series labels, marks and titles may name things of the monitored database (a wait
// event, a disk, a slot): every place they show has its invisible characters marked (invisible.tsx).
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { DbText, escapeInvisible } from './invisible.tsx'
import { fmtBytes, fmtClock, fmtMs, fmtTime } from './ui.tsx'

export type Unit = 'count' | 'ms' | 's' | 'bytes' | 'bytes/s' | 'pct' | 'ratio' | 'per_s'

export interface ChartSeries {
  label: string
  values: (number | null)[]
}

export interface ChartMark {
  /** Epoch milliseconds. */
  ts: number
  label: string
  /** Shown in a tooltip when the pointer is on the mark (as text). */
  detail?: string
}

/** How near the pointer must come to a mark (CSS pixels) for its tooltip. */
const MARK_HOVER_PX = 6

export interface ChartProps {
  /** Goes to the wrapper's data-chart attribute. */
  name: string
  title: string
  /** Epoch milliseconds, ascending, one per value of each series. */
  times: number[]
  series: ChartSeries[]
  unit?: Unit
  height?: number
  /** Draw the series as stacked areas. */
  stacked?: boolean
  marks?: ChartMark[]
  /** The interval between points in ms: a longer gap breaks the line instead of joining across it. */
  stepMs?: number
  /** The window shown, epoch ms `[since, until]`: the time axis spans exactly it. Without it the axis ends
   * at the last point or now, whichever is later, and reaches back at least an hour (or 30 steps). */
  range?: [number, number]
  /** Each value is a total or a rate over its bucket (of `stepMs`): the bucket still running at the end
   * of the window (or now) is left out, its value would drop off a cliff, and so are the partial buckets
   * at the start (see `partialStarts`). */
  perBucket?: boolean
  /**
   * Which leading buckets of a per-bucket chart hold only part of their interval and are left out:
   * 'gaps' (the default) the first value of each series and the first after a gap or a null (an agent
   * restart); 'first' the first value only (series whose gaps are quiet intervals, e.g. no session
   * waiting); 'none'.
   */
  partialStarts?: PartialStarts
  /** Gaps mean nothing happened, not that nothing was collected: the first point does not tell when collection started. */
  sparse?: boolean
  /** When the data start (epoch ms), for the "collecting since" note; default: the first point unless `sparse`. */
  dataSince?: number
  /** The word before the time in that note; default "collecting since". */
  sinceLabel?: string
}

export type PartialStarts = 'gaps' | 'first' | 'none'

const FALLBACK_COLOURS = ['#1f5fd1', '#d9731a', '#2a9d5b', '#b8327e', '#7a5cd6', '#5c6677']

function compact(n: number): string {
  const abs = Math.abs(n)
  if (abs >= 1e9) return `${+(n / 1e9).toFixed(1)}G`
  if (abs >= 1e6) return `${+(n / 1e6).toFixed(1)}M`
  if (abs >= 1e3) return `${+(n / 1e3).toFixed(1)}k`
  return `${+n.toFixed(abs < 10 ? 2 : 1)}`
}

function seconds(n: number): string {
  if (Math.abs(n) < 60) return `${+n.toFixed(1)} s`
  if (Math.abs(n) < 3600) return `${+(n / 60).toFixed(1)} min`
  return `${+(n / 3600).toFixed(1)} h`
}

/** A value with its unit, short enough for an axis or a legend. */
export function formatValue(unit: Unit, v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—'
  if (v === 0) return '0'
  switch (unit) {
    case 'ms':
      return fmtMs(v)
    case 's':
      return seconds(v)
    case 'bytes':
      return fmtBytes(v)
    case 'bytes/s':
      return `${fmtBytes(v)}/s`
    case 'pct':
      return `${+v.toFixed(1)} %`
    case 'ratio':
      return `${+(v * 100).toFixed(1)} %`
    case 'per_s':
      return `${compact(v)}/s`
    default:
      return compact(v)
  }
}

/** An axis tick: like formatValue, without a ".0" that whole binary units would show ("5 KB", not "5.0 KB"). */
export function axisValue(unit: Unit, v: number): string {
  return formatValue(unit, v).replace(/\.0(?= )/, '')
}

/** Tick steps of byte axes: 1, 2, 5, 10, 20, 50, 100, 200, 500 of each binary unit (and below a byte). */
export const BYTE_INCRS: number[] = [
  0.1,
  0.2,
  0.5,
  ...[0, 1, 2, 3, 4, 5].flatMap((k) => [1, 2, 5, 10, 20, 50, 100, 200, 500].map((m) => m * 1024 ** k)),
]

interface Theme {
  muted: string
  grid: string
  mark: string
  colours: string[]
}

function readTheme(): Theme {
  const style = getComputedStyle(document.documentElement)
  const v = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback
  return {
    muted: v('--muted', '#5c6677'),
    grid: v('--border', '#d8dde5'),
    mark: v('--critical', '#b4232a'),
    colours: FALLBACK_COLOURS.map((c, i) => v(`--series-${i + 1}`, c)),
  }
}

/** The theme in use; changes when <html data-theme> does. */
function useThemeKey(): string {
  const [key, setKey] = useState(() => document.documentElement.dataset.theme ?? '')
  useEffect(() => {
    const observer = new MutationObserver(() => setKey(document.documentElement.dataset.theme ?? ''))
    observer.observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] })
    return () => observer.disconnect()
  }, [])
  return key
}

/** `#rrggbb` with an alpha, for area fills. */
function withAlpha(colour: string, alpha: number): string {
  const m = /^#([0-9a-f]{6})$/i.exec(colour)
  if (!m) return colour
  const n = parseInt(m[1]!, 16)
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`
}

/** The points of a per-bucket series without the last bucket when it is still running at `end` (epoch ms). */
export function completeBuckets(
  times: number[],
  series: ChartSeries[],
  stepMs: number | undefined,
  end: number,
): [number[], ChartSeries[]] {
  const last = times[times.length - 1]
  // The only point stays: an empty chart beside a statement's non-zero totals would say less.
  if (!stepMs || last === undefined || times.length < 2 || last + stepMs <= end + 1000) return [times, series]
  return [times.slice(0, -1), series.map((s) => ({ ...s, values: s.values.slice(0, -1) }))]
}

/**
 * The series with their partial leading buckets set to null (see ChartProps.partialStarts): with 'first'
 * the chart's first bucket; with 'gaps' each series' first value and its first after a time gap longer
 * than 1.5 steps or after a null. A series left with no value keeps its latest one, as completeBuckets
 * keeps an only point.
 */
export function withoutPartialStarts(
  times: number[],
  series: ChartSeries[],
  stepMs: number | undefined,
  mode: PartialStarts,
): ChartSeries[] {
  if (mode === 'none' || !stepMs || times.length === 0) return series
  const present = (v: number | null | undefined): v is number => v !== null && v !== undefined
  return series.map((s) => {
    const values: (number | null)[] = s.values.slice()
    if (mode === 'first') values[0] = null
    else {
      for (let i = 0; i < values.length; i++) {
        if (present(s.values[i]) && (i === 0 || times[i]! - times[i - 1]! > 1.5 * stepMs || !present(s.values[i - 1])))
          values[i] = null
      }
    }
    if (!values.some(present)) {
      const latest = s.values.findLastIndex(present)
      if (latest >= 0) values[latest] = s.values[latest]!
    }
    return { ...s, values }
  })
}

/**
 * When the data start (epoch ms) if that is well inside `range` (more than two steps and 2 % of its span
 * after its start): the chart then says "collecting since"; otherwise undefined.
 */
export function collectingSince(
  dataStart: number | undefined,
  range: [number, number] | undefined,
  stepMs = 60_000,
): number | undefined {
  if (dataStart === undefined || !range) return undefined
  const slack = Math.max(2 * stepMs, 0.02 * (range[1] - range[0]))
  return dataStart > range[0] + slack && dataStart < range[1] ? dataStart : undefined
}

/** The axis' minimum span, in steps, when it starts at the data: one or two points still read as a line's start. */
const LEAST_STEPS_SHOWN = 10

/**
 * The span the time axis shows: `range`, or, when the data start well inside it (`since`, as
 * collectingSince says), from one step before the data (at least LEAST_STEPS_SHOWN steps before the
 * range's end, never before the range) to the range's end.
 */
export function shownRange(
  range: [number, number] | undefined,
  since: number | undefined,
  stepMs = 60_000,
): [number, number] | undefined {
  if (!range || since === undefined) return range
  return [Math.max(range[0], Math.min(since - stepMs, range[1] - LEAST_STEPS_SHOWN * stepMs)), range[1]]
}

/** A range's length in words for the caption: "6 h", "7 d", "90 min". */
export function spanWords(ms: number): string {
  const min = Math.round(ms / 60_000)
  if (min % 1440 === 0) return `${min / 1440} d`
  if (min % 60 === 0) return `${min / 60} h`
  return `${min} min`
}

/**
 * Times in seconds (uPlot's scale) with null points inserted where a gap is longer than 1.5 steps, and
 * empty ends so that the axis spans `range` (epoch ms) when given; otherwise it ends at the last point or
 * now, whichever is later, and reaches back at least an hour (or 30 steps).
 */
export function withGaps(
  times: number[],
  series: ChartSeries[],
  stepMs: number | undefined,
  range?: [number, number],
  now = Date.now(),
): [number[], (number | null)[][]] {
  const xs: number[] = []
  const ys: (number | null)[][] = series.map(() => [])
  for (let i = 0; i < times.length; i++) {
    const t = times[i]!
    if (stepMs && i > 0 && t - times[i - 1]! > 1.5 * stepMs) {
      xs.push((times[i - 1]! + stepMs) / 1000)
      for (const y of ys) y.push(null)
    }
    xs.push(t / 1000)
    series.forEach((s, j) => {
      ys[j]!.push(s.values[i] ?? null)
    })
  }
  let from: number
  let to: number
  if (range) {
    ;[from, to] = [range[0] / 1000, range[1] / 1000]
  } else {
    const least = Math.max(3600, (30 * (stepMs ?? 60_000)) / 1000)
    to = Math.max(xs[xs.length - 1] ?? now / 1000, now / 1000)
    from = Math.min(xs[0] ?? to, to - least)
  }
  if (xs.length === 0 || from < xs[0]!) {
    xs.unshift(from)
    for (const y of ys) y.unshift(null)
  }
  if (to > xs[xs.length - 1]!) {
    xs.push(to)
    for (const y of ys) y.push(null)
  }
  return [xs, ys]
}

/** Draws the marks `current()` gives at each redraw (new marks redraw the plot instead of rebuilding it). */
function drawMarks(current: () => ChartMark[], colour: string) {
  return (u: uPlot) => {
    const marks = current()
    if (marks.length === 0) return
    const { ctx, bbox } = u
    const px = devicePixelRatio
    ctx.save()
    ctx.strokeStyle = colour
    ctx.fillStyle = colour
    ctx.lineWidth = 1.5 * px
    ctx.setLineDash([5 * px, 4 * px])
    ctx.font = `${11 * px}px system-ui, sans-serif`
    ctx.textAlign = 'left'
    ctx.textBaseline = 'alphabetic'
    // A label that would overlap the one drawn before it is left out (its mark's tooltip still names it).
    let labelledUpTo = Number.NEGATIVE_INFINITY
    for (const m of [...marks].sort((a, b) => a.ts - b.ts)) {
      const x = u.valToPos(m.ts / 1000, 'x', true)
      if (x < bbox.left || x > bbox.left + bbox.width) continue
      ctx.beginPath()
      ctx.moveTo(x, bbox.top)
      ctx.lineTo(x, bbox.top + bbox.height)
      ctx.stroke()
      const label = escapeInvisible(m.label)
      const width = ctx.measureText(label).width
      const textX = x + width + 6 * px > bbox.left + bbox.width ? x - width - 4 * px : x + 4 * px
      if (textX < labelledUpTo) continue
      ctx.fillText(label, textX, bbox.top + 12 * px)
      labelledUpTo = textX + width + 4 * px
    }
    ctx.restore()
  }
}

/** Indexes of values with no value on either side: a line cannot show them, so they get a point. */
function isolated(values: (number | null)[]): number[] {
  return values.flatMap((v, i) =>
    v !== null && (values[i - 1] ?? null) === null && (values[i + 1] ?? null) === null ? [i] : [],
  )
}

/**
 * Stacked values: each series drawn on top of the ones before it. A hidden series adds nothing, and is
 * given the height below it so that the band of the series above it starts there.
 */
export function stack(ys: (number | null)[][], hidden: boolean[]): (number | null)[][] {
  const sums = (ys[0] ?? []).map(() => 0)
  return ys.map((values, j) => values.map((v, i) => (v === null ? null : hidden[j] ? sums[i]! : (sums[i]! += v))))
}

/** The last value that is a number, and the largest. */
function latestAndMax(values: (number | null)[]): { latest: number | null; max: number | null } {
  let latest: number | null = null
  let max: number | null = null
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) continue
    latest = v
    if (max === null || v > max) max = v
  }
  return { latest, max }
}

const shortTime = (ms: number) => new Date(ms).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' })

/**
 * The chart in words, for screen readers (the drawing's aria-label): its title, the time span shown and
 * each series' latest and largest value with the unit, e.g. "Calls per minute, 10:00 to 16:00. calls:
 * latest 12, max 40."
 */
export function chartSummary(
  title: string,
  unit: Unit,
  times: number[],
  series: ChartSeries[],
  range?: [number, number],
  since?: string,
): string {
  const from = range?.[0] ?? times[0]
  const to = range?.[1] ?? times[times.length - 1]
  const span =
    (from === undefined || to === undefined ? '' : `, ${shortTime(from)} to ${shortTime(to)}`) +
    (since ? ` (${since})` : '')
  if (times.length === 0) return `${title}${span}: no points in this time range.`
  const parts = series.map((s) => {
    const { latest, max } = latestAndMax(s.values)
    return latest === null
      ? `${s.label}: no values`
      : `${s.label}: latest ${formatValue(unit, latest)}, max ${formatValue(unit, max)}`
  })
  return `${title}${span}. ${parts.join('; ')}.`
}

function buildOptions(
  props: ChartProps,
  theme: Theme,
  width: number,
  raw: (number | null)[][],
  hidden: boolean[],
  marks: () => ChartMark[],
  onCursor: (idx: number | null, u: uPlot) => void,
): uPlot.Options {
  const unit = props.unit ?? 'count'
  const lonely = raw.map(isolated)
  const axis = {
    stroke: theme.muted,
    grid: { stroke: theme.grid, width: 1 },
    ticks: { stroke: theme.grid, width: 1 },
    font: '11px system-ui, sans-serif',
  }
  return {
    width,
    height: props.height ?? 200,
    legend: { show: false },
    cursor: { drag: { x: true, y: false } },
    scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min ?? 0), max > 0 ? max * 1.05 : 1] } },
    axes: [
      axis,
      {
        ...axis,
        values: (_u, splits) => splits.map((v) => axisValue(unit, v)),
        incrs: unit === 'bytes' || unit === 'bytes/s' ? BYTE_INCRS : undefined,
        size: (_u, values) => Math.max(40, 20 + 7 * Math.max(0, ...(values ?? []).map((s) => String(s).length))),
      },
    ],
    series: [
      { label: 'Time' },
      ...props.series.map((s, i) => {
        const colour = theme.colours[i % theme.colours.length]!
        return {
          label: escapeInvisible(s.label),
          show: !hidden[i],
          stroke: colour,
          width: 1.5,
          fill: props.stacked ? withAlpha(colour, 0.35) : undefined,
          points: {
            filter: (_u: uPlot, _si: number, show: boolean) => (show || lonely[i]!.length === 0 ? null : lonely[i]!),
          },
        }
      }),
    ],
    bands: props.stacked
      ? props.series.slice(1).map((_, i) => ({ series: [i + 2, i + 1] as [number, number] }))
      : undefined,
    hooks: { draw: [drawMarks(marks, theme.mark)], setCursor: [(u) => onCursor(u.cursor.idx ?? null, u)] },
  }
}

/** What the drawn chart holds: the plot, its times (s) and its series' values as given (not stacked). */
interface Drawn {
  plot: uPlot
  xs: number[]
  ys: (number | null)[][]
}

export function Chart(props: ChartProps) {
  const wrap = useRef<HTMLDivElement>(null)
  const drawn = useRef<Drawn | undefined>(undefined)
  const themeKey = useThemeKey()
  const unit = props.unit ?? 'count'
  // Series hidden from the legend, by label: they stay hidden when new data redraw the chart.
  const [hidden, setHidden] = useState<ReadonlySet<string>>(() => new Set())
  const hiddenRef = useRef(hidden)
  const [cursor, setCursor] = useState<number | null>(null)
  const marks = useRef(props.marks ?? [])
  /** The marks under the pointer and where (CSS pixels from the chart's left), for the tooltip. */
  const [hovered, setHovered] = useState<{ left: number; flip: boolean; marks: ChartMark[] } | null>(null)
  const onCursor = (idx: number | null, u: uPlot) => {
    setCursor(idx)
    const left = u.cursor.left
    if (left === undefined || left < 0 || marks.current.length === 0) return setHovered(null)
    const near = marks.current.filter((m) => Math.abs(u.valToPos(m.ts / 1000, 'x') - left) <= MARK_HOVER_PX)
    const x = left + u.bbox.left / devicePixelRatio
    setHovered(near.length === 0 ? null : { left: x, flip: x > u.width / 2, marks: near })
  }

  // The points drawn: per-bucket values without the bucket still running at the window's end and without
  // the partial buckets at the start of the data and after gaps.
  const partialStarts = props.partialStarts ?? 'gaps'
  const shown = useMemo(() => {
    const now = Date.now()
    if (!props.perBucket) return { times: props.times, series: props.series, now }
    const [times, complete] = completeBuckets(
      props.times,
      props.series,
      props.stepMs,
      Math.min(now, props.range?.[1] ?? now),
    )
    return { times, series: withoutPartialStarts(times, complete, props.stepMs, partialStarts), now }
  }, [props.times, props.series, props.perBucket, props.stepMs, props.range?.[1], partialStarts])
  const since = collectingSince(
    props.dataSince ?? (props.sparse ? undefined : props.times[0]),
    props.range,
    props.stepMs,
  )
  const sinceText =
    since === undefined || !props.range
      ? undefined
      : `${props.sinceLabel ?? 'collecting since'} ${fmtClock(since)} (of a ${spanWords(props.range[1] - props.range[0])} range)`
  // The axis: the window, or from the data's start when they start well inside it.
  const axis = shownRange(props.range, since, props.stepMs)
  const summary = useMemo(() => {
    const text = chartSummary(props.title, unit, shown.times, shown.series, axis, sinceText)
    const marked = (props.marks ?? []).filter((m) => !axis || (m.ts >= axis[0] && m.ts <= axis[1]))
    return escapeInvisible(
      marked.length === 0
        ? text
        : `${text} Marked: ${marked.map((m) => `${m.label} at ${fmtClock(m.ts)}`).join('; ')}.`,
    )
  }, [props.title, unit, shown, axis?.[0], axis?.[1], sinceText, props.marks])

  useEffect(() => {
    const el = wrap.current
    if (!el || props.times.length === 0) return
    const [xs, ys] = withGaps(shown.times, shown.series, props.stepMs, axis, shown.now)
    const hiddenFlags = props.series.map((s) => hiddenRef.current.has(s.label))
    const data = props.stacked ? stack(ys, hiddenFlags) : ys
    const width = Math.max(200, el.clientWidth || 300)
    const plot = new uPlot(
      buildOptions(props, readTheme(), width, ys, hiddenFlags, () => marks.current, onCursor),
      [xs, ...data] as uPlot.AlignedData,
      el,
    )
    drawn.current = { plot, xs, ys }
    const observer = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth)
      if (w !== plot.width) plot.setSize({ width: w, height: plot.height })
    })
    observer.observe(el)
    return () => {
      observer.disconnect()
      plot.destroy()
      drawn.current = undefined
      setCursor(null)
      setHovered(null)
    }
  }, [shown, props.unit, props.stacked, props.height, props.stepMs, axis?.[0], axis?.[1], themeKey])

  useEffect(() => {
    marks.current = props.marks ?? []
    drawn.current?.plot.redraw(false, false)
  }, [props.marks])

  const toggle = (i: number) => {
    const label = props.series[i]!.label
    const next = new Set(hiddenRef.current)
    if (next.has(label)) next.delete(label)
    else next.add(label)
    hiddenRef.current = next
    setHidden(next)
    const d = drawn.current
    if (!d) return
    if (props.stacked)
      d.plot.setData([
        d.xs,
        ...stack(
          d.ys,
          props.series.map((s) => next.has(s.label)),
        ),
      ] as uPlot.AlignedData)
    d.plot.setSeries(i + 1, { show: !next.has(label) })
  }

  const d = drawn.current
  const at = cursor !== null && d ? cursor : null
  const legendValue = (i: number) =>
    formatValue(unit, at !== null ? d!.ys[i]?.[at] : latestAndMax(shown.series[i]?.values ?? []).latest)
  return (
    <figure class="chart-box" data-chart={props.name}>
      <figcaption>
        <DbText text={props.title} />
        {sinceText && <span class="chart-since muted small"> · {sinceText}</span>}
      </figcaption>
      {props.times.length === 0 ? (
        <p class="muted small">No points in this time range.</p>
      ) : (
        <>
          <div class="chart-area">
            <div class="chart" ref={wrap} role="img" aria-label={summary} />
            {hovered && (
              <div
                class={`chart-mark-tip${hovered.flip ? ' flip' : ''}`}
                role="tooltip"
                style={{ left: `${hovered.left}px` }}
              >
                {hovered.marks.map((m, i) => (
                  <div key={i}>
                    <strong>
                      <DbText text={m.label} />
                    </strong>{' '}
                    <span class="muted">{fmtTime(m.ts)}</span>
                    {m.detail && (
                      <div>
                        <DbText text={m.detail} />
                      </div>
                    )}
                  </div>
                ))}
              </div>
            )}
          </div>
          <ul
            class="chart-legend"
            aria-label={`Series of ${escapeInvisible(props.title)}: press one to show or hide it`}
          >
            <li class="legend-at muted">{at !== null ? fmtTime(d!.xs[at]! * 1000) : 'latest'}</li>
            {props.series.map((s, i) => {
              const on = !hidden.has(s.label)
              return (
                <li key={s.label}>
                  <button
                    type="button"
                    class="legend-toggle"
                    aria-pressed={on}
                    title={`${on ? 'Hide' : 'Show'} ${escapeInvisible(s.label)}`}
                    onClick={() => toggle(i)}
                  >
                    <span
                      class="swatch"
                      aria-hidden="true"
                      style={{
                        background: `var(--series-${(i % FALLBACK_COLOURS.length) + 1}, ${FALLBACK_COLOURS[i % FALLBACK_COLOURS.length]})`,
                      }}
                    />
                    <DbText text={s.label} />
                  </button>{' '}
                  <span class="legend-value">{on ? legendValue(i) : 'hidden'}</span>
                </li>
              )
            })}
          </ul>
        </>
      )}
    </figure>
  )
}
