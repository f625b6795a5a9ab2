// Locks (PostgreSQL): the latest pg_locks snapshot, waiting locks first, with who blocks them;
// refreshed every 15 seconds. The time slider (history.tsx) shows a kept snapshot instead (?at=), whose
// locks are those that waited or blocked; below, the lock chains of the last 24 hours, ended ones included.
import type { Static } from '@sinclair/typebox'
import { useCallback } from 'preact/hooks'
import type { Lock as LockSchema } from '../../../shared/api/objects.ts'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Async, Empty, useApi } from '../../components/ui.tsx'
import { NoDataYet, apiPath, dbHref, fmtDuration, useEvery } from './common.tsx'
import { PastLockChains, TimeSlider, atOf } from './history.tsx'
import type { PageProps } from './types.ts'

type Lock = Static<typeof LockSchema>

const COLUMNS: Column<Lock>[] = [
  {
    key: 'granted',
    label: 'State',
    render: (l) => (
      <span class={`badge ${l.granted ? 'badge-muted' : 'badge-critical'}`}>{l.granted ? 'granted' : 'waiting'}</span>
    ),
    sort: (l) => (l.granted ? 1 : 0),
  },
  { key: 'pid', label: 'PID', num: true, render: (l) => l.pid, sort: (l) => l.pid },
  {
    key: 'blocked',
    label: 'Blocked by',
    num: true,
    render: (l) => (l.blocked_by_pid === null ? '—' : <span class="sev-critical">{l.blocked_by_pid}</span>),
    sort: (l) => l.blocked_by_pid,
  },
  { key: 'type', label: 'Lock type', render: (l) => l.lock_type, sort: (l) => l.lock_type },
  { key: 'mode', label: 'Mode', render: (l) => l.mode, sort: (l) => l.mode },
  {
    key: 'relation',
    label: 'Relation',
    render: (l) =>
      l.relation_name ? (
        <code>
          <DbText text={l.relation_name} />
        </code>
      ) : (
        '—'
      ),
    sort: (l) => l.relation_name,
  },
  {
    key: 'duration',
    label: 'Held / waiting',
    num: true,
    // A granted lock is held until its transaction ends, so every lock of a session shows the
    // transaction's age; a waiting one shows how long it has waited (since the statement began before
    // PostgreSQL 14).
    render: (l) => (
      <span title={l.granted ? 'held since its transaction began' : 'waiting for this long'}>
        {fmtDuration(l.duration_ms)}{' '}
        {l.granted ? <span class="muted small">held</span> : <span class="sev-critical small">waiting</span>}
      </span>
    ),
    sort: (l) => l.duration_ms,
  },
  {
    key: 'query',
    label: 'Statement',
    cellClass: 'stmt-cell',
    render: (l) => (
      <span class="mono small stmt-text" title={escapeInvisible(l.query_text ?? '')}>
        <DbText text={l.query_text || '—'} />
      </span>
    ),
  },
]

export function LocksPage({ db, query, setQuery }: PageProps) {
  // A past snapshot (?at=, from the time slider): its locks are those that waited or blocked.
  const at = atOf(query)
  const setAt = (value: number | undefined) =>
    setQuery({ at: value === undefined ? undefined : String(value) }, { replace: true })
  const locks = useApi(
    db.last_seen_at ? apiPath(db, at === undefined ? '/locks?limit=500' : `/locks?at=${at}&limit=500`) : null,
  )
  const reloadLive = useCallback(() => {
    if (at === undefined) locks.reload()
  }, [at, locks.reload])
  useEvery(15_000, reloadLive)
  if (!db.last_seen_at) return <NoDataYet db={db} />
  return (
    <>
      <TimeSlider db={db} at={at} onChange={setAt} />
      <Async loaded={locks}>
        {(rows) => {
          const waiting = rows.filter((l) => !l.granted).length
          return rows.length === 0 ? (
            <Empty
              title={
                at === undefined ? 'No locks in the latest snapshot' : 'No session waited for a lock in this snapshot'
              }
            >
              <p>
                {at === undefined
                  ? 'The locks collector sends pg_locks every poll; nothing was held or awaited then.'
                  : 'History keeps the locks that waited or blocked others; there were none when the agent took this snapshot.'}
              </p>
            </Empty>
          ) : (
            <section>
              <p class={waiting > 0 ? 'sev-warning' : 'muted'}>
                {waiting > 0 ? `${waiting} waiting for a lock` : 'No session waits for a lock'} · {rows.length} locks
                {at === undefined ? '' : ' that waited or blocked'} · collected{' '}
                {new Date(rows[0]!.ts).toLocaleTimeString()}.{' '}
                <a href={dbHref(db, 'active') + (at === undefined ? '' : `?at=${at}`)}>See the blocking chains</a>
              </p>
              <DataTable
                caption="Locks"
                columns={COLUMNS}
                rows={rows}
                rowKey={(l, i) => `${l.pid}-${i}`}
                rowClass={(l) => (l.granted ? undefined : 'blocked-row')}
                compact
              />
            </section>
          )
        }}
      </Async>
      <PastLockChains db={db} onShow={setAt} />
    </>
  )
}
