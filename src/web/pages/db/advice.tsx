// Recommendations and alerts: what the health monitor keeps from the doctor's findings, open or
// resolved. Recommendations carry their remediation SQL and are for verified organizations (a 403 shows
// why, with a way to send the verification mail again); alerts show when each notification went out.
import { ApiError } from '../../api.ts'
import { useSession } from '../../session.ts'
import { DbText } from '../../components/invisible.tsx'
import { Async, Code, Empty, ago, fmtTime, useApi } from '../../components/ui.tsx'
import { SeverityBadge, VerifyNote, apiPath, dbHref } from './common.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { Alert as AlertSchema, Recommendation as RecommendationSchema } from '../../../shared/api/alerts.ts'

type Recommendation = Static<typeof RecommendationSchema>

type Alert = Static<typeof AlertSchema>

/** When an alert's opening or resolution went out, by channel. */
type Sent = Alert['notified']['opened']

const STATUSES = [
  { key: 'open', label: 'Open' },
  { key: 'resolved', label: 'Resolved' },
  { key: 'all', label: 'All' },
]

function StatusFilter({ value, setQuery }: { value: string; setQuery: PageProps['setQuery'] }) {
  return (
    <div class="segmented" role="group" aria-label="Status">
      {STATUSES.map((s) => (
        <button key={s.key} type="button" aria-pressed={value === s.key} onClick={() => setQuery({ status: s.key === 'open' ? undefined : s.key })}>
          {s.label}
        </button>
      ))}
    </div>
  )
}

const statusOf = (query: URLSearchParams) => (['open', 'resolved', 'all'].includes(query.get('status') ?? '') ? query.get('status')! : 'open')

function When({ opened, seen, resolved }: { opened: string; seen: string; resolved: string | null }) {
  return (
    <p class="muted small">
      {resolved ? (
        <>
          Resolved {ago(resolved)} ({fmtTime(resolved)}), open since {fmtTime(opened)}.
        </>
      ) : (
        <>
          Open since {fmtTime(opened)} ({ago(opened)}), last seen {ago(seen)}.
        </>
      )}
    </p>
  )
}

/** The API's 403 for an unverified organization, shown without asking it. */
const LOCKED = 'Recommendations are available to verified organizations; verify your email address to see them.'

const sentence = (message: string) => `${message.charAt(0).toUpperCase()}${message.slice(1)}.`

export function RecommendationsPage({ db, query, setQuery }: PageProps) {
  const { me } = useSession()
  const verified = me?.organization.verified !== false
  const status = statusOf(query)
  const list = useApi<Recommendation[]>(verified ? apiPath(db, `/recommendations?status=${status}&limit=500`) : null)
  if (!verified || (list.error instanceof ApiError && list.error.status === 403)) {
    return (
      <Empty title="Recommendations need a verified email address">
        <VerifyNote message={list.error?.message ? sentence(list.error.message) : LOCKED} />
        <p class="small">
          Meanwhile the <a href={dbHref(db, 'doctor')}>doctor</a> shows every finding with the steps to investigate it.
        </p>
      </Empty>
    )
  }
  return (
    <section>
      <div class="toolbar">
        <StatusFilter value={status} setQuery={setQuery} />
      </div>
      <Async loaded={list}>
        {(rows) =>
          rows.length === 0 ? (
            <Empty title={status === 'resolved' ? 'Nothing resolved yet' : 'No recommendations'}>
              <p>
                The health monitor runs the <a href={dbHref(db, 'doctor')}>doctor</a> every minute and keeps one recommendation per finding here, with
                the SQL that fixes it.
              </p>
            </Empty>
          ) : (
            <div class="stack">
              {rows.map((r) => (
                <article key={r.id} class={`panel finding ${r.resolved_at ? 'ok' : r.severity}`}>
                  <details open={!r.resolved_at && r.severity === 'critical'}>
                    <summary>
                      <SeverityBadge severity={r.severity} />
                      {r.resolved_at && <span class="badge badge-ok">resolved</span>}
                      <strong>
                        <DbText text={r.title} />
                      </strong>
                      <span class="muted small">{r.category}</span>
                    </summary>
                    <div class="finding-body">
                      <When opened={r.first_seen_at} seen={r.last_seen_at} resolved={r.resolved_at} />
                      <p>
                        <DbText text={r.detail} />
                      </p>
                      <p>
                        <strong>Recommendation.</strong> <DbText text={r.recommendation} />
                      </p>
                      {r.remediation_sql ? <Code text={r.remediation_sql} /> : <p class="muted small">No commands: follow the recommendation above.</p>}
                    </div>
                  </details>
                </article>
              ))}
            </div>
          )
        }
      </Async>
    </section>
  )
}

/** When each notification went out; without a mail server (DBM_SMTP_URL) a "mail" only reached the server's log, and says so. */
export function Notified({ label, sent }: { label: string; sent: Sent }) {
  const mail = useSession().me?.notifications.mail
  if (!sent.email && !sent.webhook) return null
  return (
    <span>
      {label}:{sent.email && <> {mail === 'log' ? "the server's log (no mail server is set)" : 'mail'} {fmtTime(sent.email)}</>}
      {sent.webhook && <> webhook {fmtTime(sent.webhook)}</>}
    </span>
  )
}

export function AlertsPage({ db, query, setQuery }: PageProps) {
  const status = statusOf(query)
  const list = useApi<Alert[]>(apiPath(db, `/alerts?status=${status}&limit=500`))
  return (
    <section>
      <div class="toolbar">
        <StatusFilter value={status} setQuery={setQuery} />
      </div>
      <Async loaded={list}>
        {(rows) =>
          rows.length === 0 ? (
            <Empty title={status === 'resolved' ? 'No resolved alerts' : 'No open alerts'}>
              <p>
                An alert opens when the <a href={dbHref(db, 'doctor')}>doctor</a> finds something critical, and is mailed to every verified user of your
                organization (and posted to its webhook, when one is set).
              </p>
            </Empty>
          ) : (
            <div class="stack">
              {rows.map((a) => (
                <article key={a.id} class={`panel ${a.resolved_at ? 'ok' : a.severity}`}>
                  <div class="row">
                    <SeverityBadge severity={a.severity} />
                    <span class={`badge ${a.resolved_at ? 'badge-ok' : 'badge-critical'}`}>{a.resolved_at ? 'resolved' : 'open'}</span>
                    <strong>
                      <DbText text={a.title} />
                    </strong>
                  </div>
                  <When opened={a.opened_at} seen={a.last_seen_at} resolved={a.resolved_at} />
                  <p>
                    <DbText text={a.detail} />
                  </p>
                  <p class="small muted notified">
                    <Notified label="Opened, notified by" sent={a.notified.opened} /> <Notified label="Resolved, notified by" sent={a.notified.resolved} />
                    {!a.notified.opened.email && !a.notified.opened.webhook && 'Not notified yet.'}
                  </p>
                  <p class="small">
                    <a href={`${dbHref(db, 'doctor')}?finding=${encodeURIComponent(a.key)}`}>What to do</a>
                  </p>
                </article>
              ))}
            </div>
          )
        }
      </Async>
    </section>
  )
}
