// Issues: the one page for what the doctor found, what the health monitor alerted on and what it
// recommends (it replaces Doctor, Recommendations and Alerts; their old links open it). Open issues by
// severity and cause: each cause (a session, an index, a statement, a table; the doctor's groups) leads
// with its own finding's title, detail, figures and the fix commands once (locked for an unverified
// organization, as the doctor's are), its consequences folded under it, and whether an alert is open for
// it and who was told. Each cause is a Collapsible (its body not rendered while folded): critical causes
// open (on a phone the worst one only, each being a screen or two of commands), the others folded to their
// heading, so the page stays short on a phone; a link's ?finding= opens its cause alone.
// Then the history: resolved alerts, when each opened and for how long. Then the key figures.
import { useEffect } from 'preact/hooks'
import { Collapsible } from '../../components/collapsible.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Code, ErrorBox, type Loaded, Loading, fmtTime, useApi } from '../../components/ui.tsx'
import type { Static } from '@sinclair/typebox'
import { useSession } from '../../session.ts'
import type { Alert as AlertSchema } from '../../../shared/api/alerts.ts'
import {
  NoDataYet,
  SeverityBadge,
  VerifyNote,
  apiPath,
  fmtDuration,
  isStale,
  narrowScreen,
  statusClass,
} from './common.tsx'
import { AsOf, Figures, FindingPanel, MOMENT_FIGURES } from './doctor.tsx'
import type { Finding, FindingGroup, PageProps, Severity } from './types.ts'

type Alert = Static<typeof AlertSchema>

/** When an alert's opening or resolution went out, by channel. */
type Sent = Alert['notified']['opened']

/** The tabs this page replaces: their links (and bookmarks) open it, with the same query. */
export const ISSUES_ALIASES: ReadonlySet<string> = new Set(['doctor', 'recommendations', 'alerts'])

const SEVERITIES: { key: Severity; label: string }[] = [
  { key: 'critical', label: 'Critical' },
  { key: 'warning', label: 'Warnings' },
  { key: 'info', label: 'Information' },
]

/** One cause as the page shows it: the group, its leading finding and its consequences. */
export interface Issue {
  group: FindingGroup
  lead: Finding
  consequences: Finding[]
}

/**
 * The doctor's groups by severity, each with its findings looked up by key; a finding the answer left
 * out (it lists at most 100) is skipped. Causes of no severity asked for are left out.
 */
export function issuesBySeverity(groups: FindingGroup[], findings: Finding[]): Record<Severity, Issue[]> {
  const byKey = new Map(findings.map((f) => [f.key, f]))
  const out: Record<Severity, Issue[]> = { critical: [], warning: [], info: [] }
  for (const group of groups) {
    const lead = byKey.get(group.lead)
    if (!lead) continue
    const consequences = group.findings.filter((k) => k !== group.lead).flatMap((k) => byKey.get(k) ?? [])
    out[group.severity].push({ group, lead, consequences })
  }
  return out
}

/** How long a resolved alert was open: "12 min 4 s"; null while open. */
export function openFor(a: Pick<Alert, 'opened_at' | 'resolved_at'>): number | null {
  return a.resolved_at === null ? null : Math.max(0, Date.parse(a.resolved_at) - Date.parse(a.opened_at))
}

/** The cause a finding key named in a link (`?finding=pg_dead_tuples:public.t`) belongs to. */
export const groupOfFinding = (groups: FindingGroup[], key: string | null) =>
  key === null ? undefined : groups.find((g) => g.key === key || g.findings.includes(key))

/** When each notification went out; without a mail server (DBM_SMTP_URL) a "mail" only reached the server's log, and says so. */
export function Notified({ label, sent }: { label: string; sent: Sent }) {
  const mail = useSession().me?.notifications.mail
  const destinations = (sent.destinations ?? []).filter((d) => d.sent_at !== null)
  if (!wasNotified(sent)) return null
  return (
    <span>
      {label}:
      {sent.email && (
        <>
          {' '}
          {mail === 'log' ? "the server's log (no mail server is set)" : 'mail'} {fmtTime(sent.email)}
        </>
      )}
      {sent.webhook && <> webhook {fmtTime(sent.webhook)}</>}
      {destinations.map((d) => (
        <span key={d.id}>
          {' '}
          <DbText text={d.name} /> ({d.kind}) {fmtTime(d.sent_at!)}
        </span>
      ))}
    </span>
  )
}

/** Whether a state change went out on any channel: mail, the webhook or an alert destination. */
export const wasNotified = (sent: Sent) =>
  Boolean(sent.email || sent.webhook || (sent.destinations ?? []).some((d) => d.sent_at !== null))

function AlertLine({ alert }: { alert: Alert }) {
  const told = wasNotified(alert.notified.opened)
  return (
    <p class="small">
      <span class="badge badge-critical">alert open</span> since {fmtTime(alert.opened_at)}.{' '}
      <span class="muted notified">
        {told ? (
          <Notified label="Notified by" sent={alert.notified.opened} />
        ) : alert.silenced ? (
          'Not notified: held by a silence.'
        ) : (
          'Not notified yet.'
        )}
      </span>
      {alert.silenced && (
        <>
          {' '}
          <span class="badge silenced">silenced</span> until {fmtTime(alert.silenced.ends_at)}:{' '}
          <DbText text={alert.silenced.comment} />
          {alert.silenced.by.name !== null && (
            <span class="muted">
              {' '}
              (by <DbText text={alert.silenced.by.name} />)
            </span>
          )}
        </>
      )}
    </p>
  )
}

function IssuePanel({
  issue,
  open,
  stale,
  alert,
}: {
  issue: Issue
  open: boolean
  stale: boolean
  alert: Alert | undefined
}) {
  const { group, lead, consequences } = issue
  return (
    <article id={`issue-${group.key}`} class={`panel finding ${group.severity}`} data-cause={group.kind}>
      <Collapsible
        level={3}
        defaultOpen={open}
        title={
          <>
            <SeverityBadge severity={group.severity} /> <DbText text={group.title} />
          </>
        }
        summary={
          <>
            {consequences.length > 0 &&
              `and ${consequences.length} consequence${consequences.length === 1 ? '' : 's'} `}
            <AsOf at={lead.as_of} stale={stale} />
          </>
        }
      >
        <div class="finding-body">
          {alert && <AlertLine alert={alert} />}
          <p>
            <DbText text={lead.detail} />
          </p>
          <p>
            <strong>Recommendation.</strong> <DbText text={lead.recommendation} />
          </p>
          {Object.keys(lead.metrics ?? {}).length > 0 && (
            <details class="small">
              <summary>Measured</summary>
              <Figures figures={lead.metrics} />
            </details>
          )}
          <h4>How to fix{consequences.length > 0 ? ' (all of it)' : ''}</h4>
          {group.how_to_fix_locked ? (
            <VerifyNote message={group.how_to_fix_locked} />
          ) : group.how_to_fix.length > 0 ? (
            group.how_to_fix.map((c, i) => <Code key={i} text={c} />)
          ) : (
            <p class="muted small">No commands: follow the recommendation above.</p>
          )}
          {lead.how_to_investigate.length > 0 && (
            <details class="small">
              <summary>How to investigate</summary>
              {lead.how_to_investigate.map((c, i) => (
                <Code key={i} text={c} />
              ))}
            </details>
          )}
          {consequences.length > 0 && (
            <>
              <h4>What it causes</h4>
              <div class="stack">
                {consequences.map((f) => (
                  <FindingPanel key={f.key} f={f} stale={stale} open={false} />
                ))}
              </div>
            </>
          )}
          <p class="muted small">
            Rule <code>{lead.rule}</code>
          </p>
        </div>
      </Collapsible>
    </article>
  )
}

function History({ loaded }: { loaded: Loaded<Alert[]> }) {
  return (
    <section data-history>
      <h2>History</h2>
      <Async loaded={loaded}>
        {(rows) =>
          rows.length === 0 ? (
            <p class="muted small">
              No alert has been resolved yet. An alert opens when a cause has a critical finding, and resolves when it
              has none.
            </p>
          ) : (
            <div class="table-scroll">
              <table class="data">
                <thead>
                  <tr>
                    <th>Alert</th>
                    <th>Opened</th>
                    <th>Open for</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((a) => (
                    <tr key={a.id}>
                      <td>
                        <DbText text={a.title} />
                        {a.consequences.length > 1 && (
                          <span class="muted small"> and {a.consequences.length - 1} more</span>
                        )}
                      </td>
                      <td>{fmtTime(a.opened_at)}</td>
                      <td>{fmtDuration(openFor(a))}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Async>
    </section>
  )
}

export function IssuesPage({ db, doctor, query }: PageProps) {
  const wanted = query.get('finding') ?? query.get('issue')
  const openAlerts = useApi(apiPath(db, '/alerts?status=open&limit=500'))
  const resolved = useApi(apiPath(db, '/alerts?status=resolved&limit=50'))
  const target = doctor.data ? groupOfFinding(doctor.data.groups, wanted) : undefined
  useEffect(() => {
    if (target) document.getElementById(`issue-${target.key}`)?.scrollIntoView({ block: 'start' })
  }, [target?.key])
  if (doctor.error) return <ErrorBox error={doctor.error} />
  if (!doctor.data) return <Loading what="Running the doctor" />
  const d = doctor.data
  const { findings: _counts, rules_evaluated, as_of: figuresAsOf, ...figures } = d.metrics_summary
  const stale = isStale(db)
  const bySeverity = issuesBySeverity(d.groups, d.top_issues)
  const alertOf = new Map((openAlerts.data ?? []).map((a) => [a.key, a]))
  // On a phone only the worst critical cause opens: each open one is a screen or two of commands.
  const phone = narrowScreen()
  return (
    <section class="stack">
      <div class="doctor-head">
        <div class="card doctor-score">
          <div class="label">Health score</div>
          <div class={`value ${statusClass(d.status)}`}>{d.score}</div>
          <div class="sub">{d.status}</div>
        </div>
        <p class="muted small">
          {rules_evaluated ?? 'All'} rules evaluated at {fmtTime(d.evaluated_at)}: {d.top_issues.length} finding
          {d.top_issues.length === 1 ? '' : 's'} from {d.groups.length} cause{d.groups.length === 1 ? '' : 's'}. One
          alert is raised, and one notification sent, per cause with a critical finding.{' '}
          <button type="button" class="link" onClick={doctor.reload} disabled={doctor.loading}>
            {doctor.loading ? 'Running…' : 'Run again'}
          </button>
        </p>
      </div>
      {!db.last_seen_at && <NoDataYet db={db} />}
      {d.groups.length === 0 && db.last_seen_at && <p class="success">No issues: every rule passed.</p>}
      {SEVERITIES.map(({ key, label }) => {
        const list = bySeverity[key]
        if (list.length === 0) return null
        return (
          <section key={key}>
            <h2 class={`sev-${key}`}>
              {label} ({list.length})
            </h2>
            <div class="stack">
              {list.map((issue) => (
                <IssuePanel
                  key={issue.group.key}
                  issue={issue}
                  stale={stale}
                  alert={alertOf.get(issue.group.key)}
                  open={
                    target
                      ? target.key === issue.group.key
                      : key === 'critical' && (!phone || issue === bySeverity.critical[0])
                  }
                />
              ))}
            </div>
          </section>
        )
      })}
      <History loaded={resolved} />
      <section data-key-figures>
        <details>
          <summary>
            <strong>Key figures</strong> <AsOf at={figuresAsOf as number | string | null | undefined} stale={stale} />
          </summary>
          <Figures figures={figures} hidden={stale ? MOMENT_FIGURES : undefined} />
        </details>
      </section>
    </section>
  )
}
