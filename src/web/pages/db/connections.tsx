// Connections (PostgreSQL): the server's client connections counted by state, user, application,
// client address and database, idle ones included (/connections, as pg_stat_activity counts them at
// the last poll), and every distinct group; against max_connections: the share of the slots ordinary
// roles may use (max_connections less the reserved ones) in use, per state, and the headroom left.
// Names are shown as text, whatever they hold.
import { useCallback } from 'preact/hooks'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { Async, Empty, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { Card, NoDataYet, apiPath, fmtRatio, useEvery } from './common.tsx'
import type { PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { Connections as ConnectionsSchema } from '../../../shared/api/pg-checks.ts'

export type Connections = Static<typeof ConnectionsSchema>
type Count = Connections['by_state'][number]
type Group = Connections['groups'][number]

const show = (value: string | null, none: string) =>
  value === null ? <span class="muted">{none}</span> : value === '' ? <span class="muted">(empty)</span> : value

const countColumns = (label: string, none: string): Column<Count>[] => [
  { key: 'value', label, render: (c) => show(c.value, none), sort: (c) => c.value },
  { key: 'count', label: 'Connections', num: true, render: (c) => fmtNum(c.count), sort: (c) => c.count },
]

const GROUPS: Column<Group>[] = [
  { key: 'user', label: 'User', render: (g) => show(g.user, 'unknown'), sort: (g) => g.user },
  {
    key: 'app',
    label: 'Application',
    render: (g) => show(g.application_name, 'unknown'),
    sort: (g) => g.application_name,
  },
  { key: 'client', label: 'Client', render: (g) => show(g.client_addr, 'local socket'), sort: (g) => g.client_addr },
  { key: 'state', label: 'State', render: (g) => show(g.state, 'not visible to the agent'), sort: (g) => g.state },
  { key: 'db', label: 'Database', render: (g) => show(g.database, '—'), sort: (g) => g.database },
  { key: 'count', label: 'Connections', num: true, render: (g) => fmtNum(g.count), sort: (g) => g.count },
]

const stateCount = (c: Connections, state: string) => c.by_state.find((s) => s.value === state)?.count ?? 0

type Slots = NonNullable<Connections['slots']>

/** Warning from 80 % of the usable slots, critical from 95 % (the pg_connections rule's thresholds). */
export const slotsTone = (ratio: number) => (ratio >= 0.95 ? 'critical' : ratio >= 0.8 ? 'warning' : undefined)

/** "97 usable of max_connections 100 (3 for superusers)". */
export function slotsWords(s: Slots): string {
  const reserved = [
    s.superuser_reserved_connections > 0 ? `${s.superuser_reserved_connections} for superusers` : '',
    s.reserved_connections > 0 ? `${s.reserved_connections} reserved_connections` : '',
  ]
    .filter(Boolean)
    .join(', ')
  return `${fmtNum(s.usable)} usable of max_connections ${fmtNum(s.max_connections)}${reserved ? ` (${reserved})` : ''}`
}

const slotColumns = (label: string, none: string, slots: Slots): Column<Count>[] => [
  ...countColumns(label, none),
  {
    key: 'share',
    label: 'Of usable slots',
    num: true,
    render: (c) => fmtRatio(c.count / slots.usable),
    sort: (c) => c.count,
  },
]

/** Connections by source, as tables; reloaded every 15 s. */
export function ConnectionsPage({ db }: PageProps) {
  const found = useApi(db.last_seen_at ? apiPath(db, '/connections') : null)
  const reload = useCallback(() => found.reload(), [found.reload])
  useEvery(15_000, reload)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <section>
      <Async loaded={found}>
        {(c) =>
          c.collected_at === null ? (
            <Empty title="No connection counts yet">
              <p>The agent's connections collector sends them every poll; an agent older than this server does not.</p>
            </Empty>
          ) : (
            <>
              <div class="cards">
                <Card label="Connections" value={fmtNum(c.total)} sub="client backends, every database" />
                {c.slots ? (
                  <Card
                    label="Of max_connections"
                    value={fmtRatio(c.slots.used_ratio, 0)}
                    sub={slotsWords(c.slots)}
                    tone={slotsTone(c.slots.used_ratio)}
                  />
                ) : null}
                {c.slots ? (
                  <Card
                    label="Headroom"
                    value={fmtNum(c.slots.headroom)}
                    sub="connections ordinary roles may still open"
                    tone={slotsTone(c.slots.used_ratio)}
                  />
                ) : null}
                <Card label="Active" value={fmtNum(stateCount(c, 'active'))} />
                <Card label="Idle" value={fmtNum(stateCount(c, 'idle'))} />
                <Card
                  label="Idle in transaction"
                  value={fmtNum(stateCount(c, 'idle in transaction') + stateCount(c, 'idle in transaction (aborted)'))}
                  tone={stateCount(c, 'idle in transaction') > 0 ? 'warning' : undefined}
                />
              </div>
              <p class="muted small">Counted from pg_stat_activity at {fmtTime(c.collected_at)}.</p>
              <div class="chart-grid">
                <div>
                  <h2>By state</h2>
                  <DataTable
                    caption="Connections by state"
                    columns={
                      c.slots
                        ? slotColumns('State', 'not visible to the agent', c.slots)
                        : countColumns('State', 'not visible to the agent')
                    }
                    rows={c.by_state}
                    rowKey={(r) => String(r.value)}
                    initialSort={{ key: 'count' }}
                    compact
                  />
                </div>
                <div>
                  <h2>By user</h2>
                  <DataTable
                    caption="Connections by user"
                    columns={countColumns('User', 'unknown')}
                    rows={c.by_user}
                    rowKey={(r) => String(r.value)}
                    initialSort={{ key: 'count' }}
                    compact
                  />
                </div>
                <div>
                  <h2>By application</h2>
                  <DataTable
                    caption="Connections by application"
                    columns={countColumns('Application', 'unknown')}
                    rows={c.by_application}
                    rowKey={(r) => String(r.value)}
                    initialSort={{ key: 'count' }}
                    compact
                  />
                </div>
                <div>
                  <h2>By client</h2>
                  <DataTable
                    caption="Connections by client address"
                    columns={countColumns('Client', 'local socket')}
                    rows={c.by_client}
                    rowKey={(r) => String(r.value)}
                    initialSort={{ key: 'count' }}
                    compact
                  />
                </div>
              </div>
              <h2>Every source</h2>
              <DataTable
                caption="Connections by user, application, client, state and database"
                columns={GROUPS}
                rows={c.groups}
                rowKey={(g, i) => `${g.user}|${g.application_name}|${g.client_addr}|${g.state}|${g.database}|${i}`}
                initialSort={{ key: 'count' }}
                compact
              />
            </>
          )
        }
      </Async>
    </section>
  )
}
