// Events: what changed on the database over a time window, newest first (GET /events): restarts and
// version changes, tables and indexes appearing, disappearing or becoming valid, setting changes,
// statistics resets, the agent connecting and going away, outages, alerts opened and resolved, plan changes,
// crashes and faults from the server log; filtered by kind of change. useEventMarks gives the time charts
// their marks (outages, restarts, setting changes, index DDL, alert openings and server log faults). Everything from the database (names, values) is shown as text.
import type { Static } from '@sinclair/typebox'
import { useCallback, useMemo } from 'preact/hooks'
import type { DbEvent as DbEventSchema } from '../../../shared/api/events.ts'
import type { ChartMark } from '../../components/chart.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, fmtTime, useApi } from '../../components/ui.tsx'
import { SelectField, SeverityBadge, TimeRangePicker, apiPath, eventHref, useEvery, useWindow } from './common.tsx'
import type { Database, PageProps } from './types.ts'

export type DbEvent = Static<typeof DbEventSchema>

/** Each kind's short name, in the list and on the charts' marks. */
const KIND_LABELS: Record<string, string> = {
  restart: 'restart',
  version_change: 'version',
  table_created: 'table created',
  table_dropped: 'table dropped',
  index_created: 'index created',
  index_valid: 'index valid',
  index_invalid: 'index invalid',
  index_dropped: 'index dropped',
  setting_change: 'setting',
  stats_reset: 'stats reset',
  agent_connected: 'agent connected',
  agent_disconnected: 'agent away',
  alert_opened: 'alert',
  alert_resolved: 'alert resolved',
  plan_change: 'plan change',
  log_event: 'server log',
  database_down: 'down',
  database_up: 'up again',
  session_action: 'cancel / terminate',
}

/** The filter's groups of kinds. */
export const GROUPS: { key: string; label: string; kinds: string[] }[] = [
  { key: 'all', label: 'All changes', kinds: [] },
  { key: 'outages', label: 'Outages', kinds: ['database_down', 'database_up'] },
  { key: 'server', label: 'Restarts and versions', kinds: ['restart', 'version_change'] },
  {
    key: 'objects',
    label: 'Tables and indexes',
    kinds: ['table_created', 'table_dropped', 'index_created', 'index_valid', 'index_invalid', 'index_dropped'],
  },
  { key: 'settings', label: 'Settings', kinds: ['setting_change'] },
  { key: 'alerts', label: 'Alerts', kinds: ['alert_opened', 'alert_resolved'] },
  { key: 'plans', label: 'Plan changes', kinds: ['plan_change'] },
  { key: 'log', label: 'Crashes and faults in the server log', kinds: ['log_event'] },
  { key: 'actions', label: 'Cancels and terminations', kinds: ['session_action'] },
  {
    key: 'agent',
    label: 'Agent and statistics resets',
    kinds: ['agent_connected', 'agent_disconnected', 'stats_reset'],
  },
]

/** The kinds drawn on the time charts, and their mark's label. */
export const MARKED: Record<string, string> = {
  database_down: 'down',
  database_up: 'up',
  restart: 'restart',
  setting_change: 'setting',
  index_created: 'index',
  index_valid: 'index',
  index_dropped: 'index',
  alert_opened: 'alert',
  log_event: 'log',
}

const kindLabel = (kind: string) => KIND_LABELS[kind] ?? kind.replaceAll('_', ' ')

/** The events of `bounds` as marks for the database's time charts (outages, restarts, setting changes, index DDL, alert openings). */
export function useEventMarks(db: Pick<Database, 'id'>, bounds: [number, number]): ChartMark[] {
  const [since, until] = bounds
  const events = useApi(
    apiPath(
      db,
      `/events?since=${encodeURIComponent(new Date(since).toISOString())}&until=${encodeURIComponent(new Date(until).toISOString())}&limit=500`,
    ),
  )
  return useMemo(
    () =>
      (events.data ?? [])
        .filter((e) => MARKED[e.kind])
        .map((e) => ({
          ts: Date.parse(e.ts),
          label: MARKED[e.kind]!,
          detail: e.detail ? `${e.title}\n${e.detail}` : e.title,
        })),
    [events.data],
  )
}

function EventRow({ e }: { e: DbEvent }) {
  return (
    <tr data-kind={e.kind}>
      <td>
        <time dateTime={e.ts}>{fmtTime(e.ts)}</time>
      </td>
      <td class="event-kind">
        {e.severity && e.severity !== 'info' ? <SeverityBadge severity={e.severity} /> : null}{' '}
        <span class="badge badge-muted">{kindLabel(e.kind)}</span>
      </td>
      <td>
        <div class="event-title">
          {e.link ? (
            <a href={eventHref(e.link, e.object)}>
              <DbText text={e.title} />
            </a>
          ) : (
            <DbText text={e.title} />
          )}
        </div>
        {e.detail && (
          <div class="event-detail muted small">
            <DbText text={e.detail} />
          </div>
        )}
      </td>
    </tr>
  )
}

export function EventsPage({ db, query, setQuery }: PageProps) {
  const tw = useWindow(query)
  const group = GROUPS.find((g) => g.key === query.get('kind')) ?? GROUPS[0]!
  const events = useApi(apiPath(db, `/events?${tw.params}&limit=2000`))
  useEvery(
    60_000,
    useCallback(() => tw.range !== 'custom' && tw.refresh(), [tw.range]),
  )
  const shown = useMemo(
    () => (events.data ?? []).filter((e) => group.kinds.length === 0 || group.kinds.includes(e.kind)),
    [events.data, group],
  )
  return (
    <section>
      <div class="toolbar">
        <TimeRangePicker tw={tw} setQuery={setQuery} />
        <SelectField
          label="Show"
          value={group.key}
          options={GROUPS.map((g) => [g.key, g.label])}
          onChange={(v) => setQuery({ kind: v === 'all' ? undefined : v })}
        />
      </div>
      <Async loaded={events}>
        {() =>
          shown.length === 0 ? (
            <Empty title="No changes in this time range">
              <p>
                Restarts, version and setting changes, tables and indexes created or dropped, statistics resets, the
                agent connecting or going away, alerts and plan changes show here as the agent reports them. Pick a
                longer range, or another kind of change.
              </p>
            </Empty>
          ) : (
            <div class="table-wrap flow">
              <table class="compact events-table">
                <caption class="sr-only">What changed, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    <th scope="col">Kind</th>
                    <th scope="col">What changed</th>
                  </tr>
                </thead>
                <tbody>
                  {shown.map((e, i) => (
                    <EventRow key={`${e.ts}/${e.kind}/${e.object ?? ''}/${i}`} e={e} />
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
