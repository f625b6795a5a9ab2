// Active: the latest sessions, live over the WebSocket /active/ws (the session cookie authenticates it;
// when the server closes it, e.g. because the access token expired, a REST call renews the session from
// the refresh cookie and the stream reconnects). A stream that goes quiet (no message within twice the
// interval and 5 s) is given up as dead: the badge says "Reconnecting… (last data 40 s ago)" and it
// reconnects with a growing delay. PostgreSQL sessions show the blocking chains as a tree
// of blocker → blocked; ClickHouse ones their memory, bytes and rows. The time slider (history.tsx)
// shows a kept snapshot instead (?at=, GET /active?at=), with the stream paused until "Live". Once the
// agent stopped sending (isStale), the stream still delivers its last snapshot: the badge then says the
// data are from HH:MM, not live, and ages ("transaction since") are counted to the snapshot's time, as
// for a past snapshot, so that they stay those it had instead of growing while its durations do not.
import type { Static } from '@sinclair/typebox'
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import type { ActiveStreamMessage } from '../../../shared/api/objects.ts'
import { get } from '../../api.ts'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { Empty, Loading, ago, fmtBytes, fmtClock, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { ApiProblem, NoDataYet, SelectField, apiPath, fmtDuration, isStale } from './common.tsx'
import { TimeSlider, atOf } from './history.tsx'
import type { Database, PageProps, Session } from './types.ts'
import { type KillKind, KillPanel, type KillTarget, useAllowedActions } from './session-actions.tsx'
import { useSession } from '../../session.ts'
import { isOwner } from '../members.tsx'

/** A session as GET /active and the stream send it. */

export interface Stream {
  ts: Static<typeof ActiveStreamMessage>['ts']
  active: Session[] | undefined
  state: 'connecting' | 'live' | 'paused' | 'reconnecting'
  /** When the latest message arrived (epoch ms). */
  receivedAt?: number
  message?: string
}

/** How long a live stream may stay quiet before it is taken for dead: twice its interval and 5 s. */
export const staleAfterMs = (intervalSeconds: number) => 2 * intervalSeconds * 1000 + 5000

/** The wait before reconnect attempt `failures` (1, 2, …): 2 s, 4 s, 8 s … up to 30 s. */
export const reconnectDelay = (failures: number) => Math.min(30_000, 1000 * 2 ** Math.min(Math.max(1, failures), 5))

/**
 * The stream's badge: "Live, every 5 s", "Paused", "Connecting…", "Reconnecting… (last data 40 s ago)";
 * with `staleFrom` (the time of the data shown when the agent stopped sending), "Data from 14:02, not live"
 * instead of live or reconnecting: the stream may be up, the data it carries are not.
 */
export function streamStatus(
  stream: Stream,
  interval: number,
  now = Date.now(),
  staleFrom?: string | number | null,
): string {
  if (staleFrom !== undefined && staleFrom !== null && (stream.state === 'live' || stream.state === 'reconnecting'))
    return `Data from ${fmtClock(staleFrom, now)}, not live`
  if (stream.state === 'live') return `Live, every ${interval} s`
  if (stream.state === 'paused') return 'Paused'
  if (stream.state === 'connecting') return 'Connecting…'
  const quiet = Math.max(0, now - (stream.receivedAt ?? now))
  const last =
    stream.receivedAt === undefined
      ? ''
      : `last data ${quiet < 60_000 ? `${Math.round(quiet / 1000)} s` : fmtDuration(quiet)} ago`
  const why = [last, stream.message].filter(Boolean).join('; ')
  return `Reconnecting…${why ? ` (${why})` : ''}`
}

/** The active-query stream of the database, every `interval` seconds while not paused. */
function useActiveStream(db: Database, interval: number, paused: boolean): Stream {
  const [stream, setStream] = useState<Stream>({ ts: null, active: undefined, state: 'connecting' })
  const failures = useRef(0)
  useEffect(() => {
    if (paused) {
      setStream((s) => ({ ...s, state: 'paused' }))
      return
    }
    let socket: WebSocket | undefined
    let retry: ReturnType<typeof setTimeout> | undefined
    let watchdog: ReturnType<typeof setTimeout> | undefined
    let stopped = false
    /** Drops the socket (quietly: its close event may come late or never) and tries again after a delay. */
    const reconnect = (message?: string) => {
      clearTimeout(watchdog)
      if (socket) {
        socket.onmessage = socket.onclose = socket.onerror = null
        if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) socket.close()
        socket = undefined
      }
      if (stopped) return
      failures.current++
      setStream((s) => ({ ...s, state: 'reconnecting', message }))
      // A refused or expired session: any REST call renews it from the refresh cookie first (or ends it).
      retry = setTimeout(() => {
        get(apiPath(db, '/health'))
          .catch(() => undefined)
          .finally(() => {
            if (!stopped) connect()
          })
      }, reconnectDelay(failures.current))
    }
    const watch = () => {
      clearTimeout(watchdog)
      watchdog = setTimeout(() => reconnect(), staleAfterMs(interval))
    }
    const connect = () => {
      const scheme = location.protocol === 'https:' ? 'wss' : 'ws'
      socket = new WebSocket(`${scheme}://${location.host}/api/v1${apiPath(db, '/active/ws')}?interval=${interval}`)
      watch()
      socket.onmessage = (e) => {
        failures.current = 0
        watch()
        try {
          const msg = JSON.parse(String(e.data)) as Static<typeof ActiveStreamMessage>
          setStream({ ts: msg.ts, active: msg.active, state: 'live', receivedAt: Date.now() })
        } catch {
          // A message that is not JSON is ignored; the next one replaces it.
        }
      }
      socket.onclose = (e) => reconnect(e.reason || undefined)
    }
    connect()
    return () => {
      stopped = true
      clearTimeout(retry)
      clearTimeout(watchdog)
      if (socket) {
        socket.onmessage = socket.onclose = socket.onerror = null
        socket.close(1000)
      }
    }
  }, [db.id, interval, paused])
  return stream
}

/** Re-renders every second while `on`, so that "N s ago" stays true. */
function useTicking(on: boolean): void {
  const [, setTick] = useState(0)
  useEffect(() => {
    if (!on) return
    const timer = setInterval(() => setTick((t) => t + 1), 1000)
    return () => clearInterval(timer)
  }, [on])
}

export interface ChainNode {
  session: Session
  children: ChainNode[]
  /** The other sessions it waits for, besides the one it is drawn under (a root in a cycle: all of them). */
  alsoBlockedBy: number[]
  /** How many sessions wait for it directly, wherever they are drawn. */
  blocks: number
}

/**
 * Trees of blocker → blocked sessions: roots are blockers that nothing in the snapshot blocks. Each session
 * is drawn once, under the first pid it waits for (pg_blocking_pids' order), and names the other ones as
 * "also blocked by": drawn under each, a session blocked by two pids read as two sessions waiting and
 * counted twice in "blocks N". Sessions that wait for each other in a cycle (a deadlock about to be broken)
 * have no root: the first blocker of the cycle seen starts it.
 */
export function blockingChains(sessions: Session[]): ChainNode[] {
  const byPid = new Map(sessions.map((s) => [String(s.pid), s]))
  const blockersOf = (s: Session) => [...new Set(s.blocking_pids.map(String))].filter((p) => p !== String(s.pid))
  const drawnUnder = new Map<string, Session[]>()
  const waitingFor = new Map<string, number>()
  for (const s of sessions) {
    const blockers = blockersOf(s)
    if (blockers.length === 0) continue
    for (const pid of blockers) waitingFor.set(pid, (waitingFor.get(pid) ?? 0) + 1)
    const list = drawnUnder.get(blockers[0]!) ?? []
    list.push(s)
    drawnUnder.set(blockers[0]!, list)
  }
  const drawn = new Set<string>()
  const build = (s: Session, parent: string | undefined): ChainNode => {
    const key = String(s.pid)
    drawn.add(key)
    const children = (drawnUnder.get(key) ?? []).filter((c) => !drawn.has(String(c.pid)))
    for (const c of children) drawn.add(String(c.pid))
    return {
      session: s,
      alsoBlockedBy: blockersOf(s)
        .filter((p) => p !== parent)
        .map(Number),
      blocks: waitingFor.get(key) ?? 0,
      children: children.map((c) => build(c, key)),
    }
  }
  const roots: ChainNode[] = []
  for (const pid of waitingFor.keys()) {
    const s = byPid.get(pid)
    if (s && blockersOf(s).length > 0) continue
    const session: Session = s ?? {
      pid: Number(pid),
      query_text: '',
      state: 'not in the snapshot',
      wait_event_type: null,
      wait_event: null,
      duration_ms: null,
      blocking_pids: [],
      ts: '',
    }
    roots.push(build(session, undefined))
  }
  // Waiters no root reaches (a cycle): start at the first blocker of the cycle seen.
  for (const pid of waitingFor.keys()) {
    const s = byPid.get(pid)
    if (s && !drawn.has(pid)) roots.push(build(s, undefined))
  }
  return roots
}

const waitText = (s: Session) => (s.wait_event_type ? `${s.wait_event_type}: ${s.wait_event ?? ''}` : '')

export function ChainTree({ nodes }: { nodes: ChainNode[] }) {
  return (
    <ul>
      {nodes.map((n) => (
        <li key={String(n.session.pid)} data-pid={String(n.session.pid)}>
          <div class="chain-node">
            <span class="mono">
              pid <DbText text={n.session.pid} />
            </span>{' '}
            <span class="badge badge-muted">
              <DbText text={n.session.state ?? '—'} />
            </span>{' '}
            <span class="num">{fmtDuration(n.session.duration_ms)}</span>{' '}
            {waitText(n.session) && (
              <span class="muted small">
                <DbText text={waitText(n.session)} />
              </span>
            )}
            {n.blocks > 0 && <span class="sev-critical small"> blocks {n.blocks}</span>}
            {n.alsoBlockedBy.length > 0 && (
              <span
                class="badge badge-warning small also-blocked"
                title="This session waits for several sessions; it is drawn once, under the first."
              >
                also blocked by {n.alsoBlockedBy.map((p) => `pid ${p}`).join(', ')}
              </span>
            )}
            <div class="mono small truncate" title={escapeInvisible(n.session.query_text)}>
              {n.session.query_text ? (
                <DbText text={n.session.query_text} />
              ) : (
                <span class="muted">(no statement)</span>
              )}
            </div>
          </div>
          {n.children.length > 0 && <ChainTree nodes={n.children} />}
        </li>
      ))}
    </ul>
  )
}

/**
 * The table's columns. `agesAtSnapshot` (a stale or past snapshot): ages are counted to the snapshot's
 * own time (each session's ts) instead of now.
 */
function columns(
  db: Database,
  agesAtSnapshot = false,
  onKill?: (s: Session, kind: KillKind) => void,
): Column<Session>[] {
  const pid: Column<Session> = {
    key: 'pid',
    label: db.engine === 'clickhouse' ? 'Query id' : 'PID',
    render: (s) => (
      <span class="mono small nowrap" title={escapeInvisible(String(s.pid))}>
        <DbText text={typeof s.pid === 'string' && s.pid.length > 13 ? `${s.pid.slice(0, 8)}…` : s.pid} />
      </span>
    ),
    sort: (s) => (typeof s.pid === 'number' ? s.pid : String(s.pid)),
  }
  const duration: Column<Session> = {
    key: 'duration',
    label: 'Duration',
    num: true,
    render: (s) => fmtDuration(s.duration_ms),
    sort: (s) => s.duration_ms,
  }
  const text: Column<Session> = {
    key: 'query',
    label: 'Statement',
    cellClass: 'stmt-cell',
    render: (s) => (
      <span class="mono small stmt-text" title={escapeInvisible(s.query_text)}>
        {s.query_text ? <DbText text={s.query_text} /> : <span class="muted">(none)</span>}
      </span>
    ),
  }
  const user: Column<Session> = {
    key: 'user',
    label: 'User',
    render: (s) => s.user ?? '—',
    sort: (s) => s.user ?? null,
  }
  const client: Column<Session> = {
    key: 'client',
    label: 'Client',
    render: (s) => s.client_addr ?? '—',
    sort: (s) => s.client_addr ?? null,
  }
  if (db.engine === 'clickhouse') {
    return [
      pid,
      duration,
      user,
      {
        key: 'memory',
        label: 'Memory',
        num: true,
        render: (s) => fmtBytes(s.memory_usage),
        sort: (s) => s.memory_usage,
      },
      { key: 'read', label: 'Read', num: true, render: (s) => fmtBytes(s.read_bytes), sort: (s) => s.read_bytes },
      { key: 'rows', label: 'Rows read', num: true, render: (s) => fmtNum(s.read_rows), sort: (s) => s.read_rows },
      {
        key: 'written',
        label: 'Written',
        num: true,
        render: (s) => fmtBytes(s.written_bytes),
        sort: (s) => s.written_bytes,
      },
      client,
      text,
    ]
  }
  // Cancel and Terminate come right after the pid: at the end of eleven columns they fell past the right
  // edge of a 1280 px screen, behind the table's sideways scroll.
  return [
    pid,
    ...(onKill
      ? [
          {
            key: 'actions',
            label: 'Actions',
            render: (s: Session) =>
              typeof s.pid === 'number' && s.backend_start ? (
                <span class="nowrap">
                  {s.state === 'active' && (
                    <button type="button" class="small" onClick={() => onKill(s, 'cancel')} data-kill="cancel">
                      Cancel
                    </button>
                  )}{' '}
                  <button
                    type="button"
                    class="small danger"
                    onClick={() => onKill(s, 'terminate')}
                    data-kill="terminate"
                  >
                    Terminate
                  </button>
                </span>
              ) : (
                '—'
              ),
          },
        ]
      : []),
    { key: 'state', label: 'State', render: (s) => s.state ?? '—', sort: (s) => s.state },
    duration,
    { key: 'wait', label: 'Waiting on', render: (s) => waitText(s) || '—', sort: (s) => waitText(s) || null },
    {
      key: 'blocked',
      label: 'Blocked by',
      render: (s) =>
        s.blocking_pids.length > 0 ? <span class="sev-critical">{s.blocking_pids.join(', ')}</span> : '—',
      sort: (s) => s.blocking_pids.length || null,
    },
    user,
    {
      key: 'app',
      label: 'Application',
      render: (s) => s.application_name || '—',
      sort: (s) => s.application_name ?? null,
    },
    client,
    {
      key: 'xact',
      label: 'Transaction since',
      render: (s) =>
        s.xact_start ? (
          agesAtSnapshot && s.ts ? (
            <span title={`${fmtTime(s.xact_start)}: the age it had at the snapshot of ${fmtTime(s.ts)}`}>
              {ago(s.xact_start, s.ts)}
            </span>
          ) : (
            <span title={fmtTime(s.xact_start)}>{ago(s.xact_start)}</span>
          )
        ) : (
          '—'
        ),
      sort: (s) => s.xact_start ?? null,
    },
    text,
  ]
}

export function ActivePage({ db, query, setQuery }: PageProps) {
  const [interval, setIntervalSeconds] = useState(5)
  const [paused, setPaused] = useState(false)
  const [hideIdle, setHideIdle] = useState(true)
  // A past snapshot (?at=, from the time slider) instead of the live stream.
  const at = atOf(query)
  const setAt = (value: number | undefined) =>
    setQuery({ at: value === undefined ? undefined : String(value) }, { replace: true })
  const stream = useActiveStream(db, interval, paused || !db.last_seen_at || at !== undefined)
  const past = useApi(at !== undefined && db.last_seen_at ? apiPath(db, `/active?at=${at}&limit=200`) : null)
  const shown = at === undefined ? stream.active : past.data
  const sessions = useMemo(
    () => (shown ?? []).filter((s) => !(hideIdle && db.engine === 'postgres' && s.state === 'idle')),
    [shown, hideIdle, db.engine],
  )
  const chains = useMemo(() => (db.engine === 'postgres' ? blockingChains(shown ?? []) : []), [shown, db.engine])
  // Cancel and terminate: owners, PostgreSQL, the live view only (a past snapshot's sessions may be gone).
  const { me } = useSession()
  const mayKill = isOwner(me?.user.role) && db.engine === 'postgres' && at === undefined
  const allowed = useAllowedActions(db, mayKill)
  const [target, setTarget] = useState<KillTarget>()
  useTicking(stream.state === 'reconnecting')
  if (!db.last_seen_at) return <NoDataYet db={db} />
  const stale = isStale(db)
  const snapshotTs = at === undefined ? stream.ts : (shown?.[0]?.ts ?? null)
  const status = streamStatus(stream, interval, Date.now(), stale ? (stream.ts ?? db.last_seen_at) : undefined)
  const notLive = stale && (stream.state === 'live' || stream.state === 'reconnecting')
  return (
    <section>
      <TimeSlider db={db} at={at} onChange={setAt} />
      {at === undefined ? (
        <div class="toolbar">
          <span
            class={`badge ${notLive ? 'badge-critical' : stream.state === 'live' ? 'badge-ok' : stream.state === 'reconnecting' ? 'badge-warning' : 'badge-muted'}`}
            data-stream-state={notLive ? 'stale' : stream.state}
          >
            {status}
          </span>
          {/* Read out on each change of state, not each second of "last data N s ago". */}
          <span class="sr-only" role="status">
            {status.replace(/ \(.*$/, '')}
          </span>
          <button type="button" onClick={() => setPaused((p) => !p)} aria-pressed={paused}>
            {paused ? 'Resume' : 'Pause'}
          </button>
          <SelectField
            label="Refresh every"
            value={String(interval)}
            options={[2, 5, 10, 30, 60].map((s) => [String(s), `${s} s`])}
            onChange={(v) => setIntervalSeconds(Number(v))}
          />
          {db.engine === 'postgres' && (
            <label class="check">
              <input
                type="checkbox"
                checked={hideIdle}
                onChange={(e) => setHideIdle((e.target as HTMLInputElement).checked)}
              />{' '}
              Hide idle sessions
            </label>
          )}
          {snapshotTs && (
            <span class="muted small" title={fmtTime(snapshotTs)}>
              collected {ago(snapshotTs)}
            </span>
          )}
        </div>
      ) : (
        <div class="toolbar">
          <span class="badge badge-muted" data-stream-state="history">
            History
          </span>
          <span class="muted small">
            the snapshot the agent took {snapshotTs ? `at ${fmtTime(snapshotTs)}` : 'then'}
          </span>
        </div>
      )}
      {shown === undefined ? (
        at === undefined ? (
          <Loading what="Connecting to the live stream" />
        ) : past.error ? (
          <ApiProblem error={past.error} />
        ) : (
          <Loading what="Loading the snapshot" />
        )
      ) : (
        <>
          {chains.length > 0 && (
            <section class="panel critical chains">
              <h2>Blocking chains</h2>
              <p class="muted small">
                Each blocker with the sessions waiting on it, and on those in turn. A session waiting for several is
                drawn once, under the first, and names the others.
              </p>
              <div class="chain-tree">
                <ChainTree nodes={chains} />
              </div>
            </section>
          )}
          {target && (
            <KillPanel
              key={`${target.kind}:${target.session.pid}`}
              db={db}
              target={target}
              allowed={allowed.data?.allowed}
              onClose={() => setTarget(undefined)}
            />
          )}
          <h2>
            Sessions <span class="muted small">({sessions.length})</span>
          </h2>
          {sessions.length === 0 ? (
            <Empty title={at === undefined ? 'No active queries right now' : 'No active queries in this snapshot'}>
              <p>
                {at !== undefined
                  ? 'Nothing was running when the agent took this snapshot (or none is kept at that time).'
                  : stream.ts === null
                    ? 'The agent has sent no session snapshot yet: the activity collector sends one every poll.'
                    : 'Nothing was running at the latest snapshot. This page updates by itself.'}
              </p>
            </Empty>
          ) : (
            <DataTable
              caption="Active sessions"
              columns={columns(
                db,
                stale || at !== undefined,
                mayKill ? (session, kind) => setTarget({ session, kind }) : undefined,
              )}
              rows={sessions}
              rowKey={(s) => String(s.pid)}
              initialSort={{ key: 'duration' }}
              rowClass={(s) => (s.blocking_pids.length > 0 ? 'blocked-row' : undefined)}
              compact
            />
          )}
        </>
      )}
    </section>
  )
}
