// The doctor's findings as the Issues page (issues.tsx) shows them: one finding's panel (title, detail,
// recommendation, the figures it measured, how to investigate and how to fix as copyable commands; for an
// unverified organization the note that verifying the email unlocks the fixes) and the key figures it
// judged, each in human units (figures.ts). Each finding and the key figures say when the data they were
// drawn from was collected (as_of), in red when that is not recent (the agent stopped sending); the figures
// of the moment (sessions, blocking, merges) then read "—", as the overview's cards do.
import { Fragment } from 'preact'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Code, ago, fmtClock, fmtTime } from '../../components/ui.tsx'
import { SeverityBadge, VerifyNote } from './common.tsx'
import { figureLabel, formatFigure } from './figures.ts'
import type { Finding } from './types.ts'

/**
 * The key figures that describe the moment they were read (sessions running, blocked, the longest one,
 * merges in progress): once the agent stopped sending they are no longer true, and read "—".
 */
export const MOMENT_FIGURES: ReadonlySet<string> = new Set([
  'active_queries',
  'blocked_queries',
  'longest_query_ms',
  'active_merges',
  'merge_progress_pct',
])

/** Figures as a definition list, each labelled without its unit and shown with it; `hidden` ones as "—". */
export function Figures({ figures, hidden }: { figures: Record<string, unknown>; hidden?: ReadonlySet<string> }) {
  const entries = Object.entries(figures)
  if (entries.length === 0) return null
  return (
    <dl class="kv">
      {entries.map(([k, v]) => (
        <Fragment key={k}>
          <dt title={escapeInvisible(k)}>
            <DbText text={figureLabel(k)} />
          </dt>
          <dd>
            {hidden?.has(k) ? (
              <span title="The agent stopped sending: this figure of the moment is not known now.">—</span>
            ) : (
              <DbText text={formatFigure(k, v)} />
            )}
          </dd>
        </Fragment>
      ))}
    </dl>
  )
}

/** "as of 14:02 (3 min ago)": when a finding's data was collected; red when the database's data are stale. */
export function AsOf({ at, stale }: { at: number | string | null | undefined; stale: boolean }) {
  if (at === null || at === undefined) return null
  return (
    <span class={`small as-of ${stale ? 'sev-critical' : 'muted'}`} title={fmtTime(at)} data-as-of>
      as of {fmtClock(at)} ({ago(at)})
    </span>
  )
}

export function FindingPanel({ f, open, stale }: { f: Finding; open: boolean; stale: boolean }) {
  return (
    <article id={`finding-${f.key}`} class={`panel finding ${f.severity}`}>
      <details open={open}>
        <summary>
          <SeverityBadge severity={f.severity} /> <DbText text={f.title} />{' '}
          <span class="muted small">{f.category}</span> <AsOf at={f.as_of} stale={stale} />
        </summary>
        <div class="finding-body">
          <p>
            <DbText text={f.detail} />
          </p>
          <p>
            <strong>Recommendation.</strong> <DbText text={f.recommendation} />
          </p>
          {f.objects.length > 0 && (
            <p class="small">
              <span class="muted">Objects:</span>{' '}
              {f.objects.map((o) => (
                <Fragment key={o}>
                  <code>
                    <DbText text={o} />
                  </code>{' '}
                </Fragment>
              ))}
            </p>
          )}
          {Object.keys(f.metrics ?? {}).length > 0 && (
            <>
              <h3>Measured</h3>
              <Figures figures={f.metrics} />
            </>
          )}
          {f.how_to_investigate.length > 0 && (
            <>
              <h3>How to investigate</h3>
              {f.how_to_investigate.map((c, i) => (
                <Code key={i} text={c} />
              ))}
            </>
          )}
          <h3>How to fix</h3>
          {f.how_to_fix_locked ? (
            <VerifyNote message={f.how_to_fix_locked} />
          ) : f.how_to_fix.length > 0 ? (
            f.how_to_fix.map((c, i) => <Code key={i} text={c} />)
          ) : (
            <p class="muted small">No commands: follow the recommendation above.</p>
          )}
          <p class="muted small">
            Rule <code>{f.rule}</code>
          </p>
        </div>
      </details>
    </article>
  )
}
