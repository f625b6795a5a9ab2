// The organization's databases: engine, status, health score and active queries (every database's
// latest diagnosis from one GET /databases/health), last seen; reloaded every 10 s. A form registers a database by hand (the agent also
// registers each database of its config on first contact); it opens with the focus in its first field,
// and Esc closes it, back to the button that opened it.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import { api, get } from '../api.ts'
import { DbText, escapeInvisible } from '../components/invisible.tsx'
import { Empty, ErrorBox, Loading, ago, fmtClock, fmtNum, fmtTime, useEscape } from '../components/ui.tsx'
import type { Static } from '@sinclair/typebox'
import { watchedWords } from './db/overview.tsx'
import type { Database, DatabaseHealth as DatabaseHealthSchema } from '../../shared/api/databases.ts'

const POLL_MS = 10_000

/** A registered database as GET /databases lists it. */
export type DatabaseSummary = Static<typeof Database>

/** One database's entry of GET /databases/health: the health monitor's latest diagnosis (null before the first). */
type DatabaseHealth = Static<typeof DatabaseHealthSchema>

const ENGINES = {
  postgres: { label: 'PostgreSQL', port: 5432 },
  clickhouse: { label: 'ClickHouse', port: 8123 },
} as const

/**
 * Connected green; disconnected red while the database is (last reported) down or its agent stopped after
 * sending data, as the overview's header shows it; grey when no agent ever sent any.
 */
export function statusTone(
  db: Pick<Static<typeof Database>, 'status' | 'reason' | 'down_since' | 'last_seen_at'>,
): 'ok' | 'critical' | 'muted' {
  if (db.status === 'connected') return 'ok'
  return db.reason === 'database_down' || db.down_since !== null || db.last_seen_at !== null ? 'critical' : 'muted'
}

export function StatusBadge({
  db,
}: {
  db: Pick<Static<typeof Database>, 'status' | 'reason' | 'down_since' | 'last_seen_at'>
}) {
  return <span class={`badge badge-${statusTone(db)}`}>{db.status}</span>
}

/** The health score as a badge: green above 90, amber while only warnings weigh on it, red from one critical finding (−30). */
export function ScoreBadge({ score }: { score: number | null | undefined }) {
  if (score === null || score === undefined) return <span class="muted">—</span>
  const tone = score >= 90 ? 'ok' : score > 70 ? 'warning' : 'critical'
  return (
    <span
      class={`badge badge-${tone}`}
      title="Health score: 100 minus the doctor's penalties (critical 30, warning 10, info 2 per rule)"
    >
      {score}
    </span>
  )
}

function AddDatabase({ onAdded }: { onAdded(db: DatabaseSummary): void }) {
  const [values, setValues] = useState({ name: '', engine: 'postgres' as keyof typeof ENGINES, host: '', port: '' })
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  const set = (key: keyof typeof values) => (e: Event) =>
    setValues((v) => ({ ...v, [key]: (e.currentTarget as HTMLInputElement).value }))
  const first = useRef<HTMLInputElement>(null)
  useEffect(() => first.current?.focus(), [])
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError('')
    try {
      const body: Record<string, unknown> = { name: values.name, engine: values.engine, host: values.host }
      if (values.port.trim()) body.port = Number(values.port)
      const db = await api('POST', '/databases', body)
      setValues({ name: '', engine: values.engine, host: '', port: '' })
      onAdded(db)
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class="panel form" onSubmit={submit} aria-labelledby="add-db-title">
      <h2 id="add-db-title" style="margin-top:0">
        Add a database
      </h2>
      <p class="muted small">
        The agent registers each database of its config by itself when it first sends data; add one here to see it
        listed before that. The name must match the agent config's <code>name</code>.
      </p>
      <div class="form-row">
        <div class="field">
          <label for="db-name">Name</label>
          <input
            id="db-name"
            ref={first}
            required
            maxLength={200}
            value={values.name}
            onInput={set('name')}
            placeholder="orders"
          />
        </div>
        <div class="field">
          <label for="db-engine">Engine</label>
          <select id="db-engine" value={values.engine} onChange={set('engine')}>
            {Object.entries(ENGINES).map(([value, e]) => (
              <option key={value} value={value}>
                {e.label}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="db-host">Host</label>
          <input id="db-host" required value={values.host} onInput={set('host')} placeholder="db1.internal" />
        </div>
        <div class="field" style="flex:0 1 7rem">
          <label for="db-port">Port</label>
          <input
            id="db-port"
            type="number"
            min={1}
            max={65535}
            value={values.port}
            onInput={set('port')}
            placeholder={String(ENGINES[values.engine].port)}
          />
        </div>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Adding…' : 'Add database'}
        </button>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  )
}

export function DatabaseList() {
  const [databases, setDatabases] = useState<DatabaseSummary[]>()
  const [overviews, setOverviews] = useState<Record<string, DatabaseHealth | Error>>({})
  const [error, setError] = useState<Error>()
  const [adding, setAdding] = useState(false)
  const [added, setAdded] = useState<DatabaseSummary>()
  const live = useRef(true)
  const addButton = useRef<HTMLButtonElement>(null)
  useEscape(adding, () => {
    setAdding(false)
    addButton.current?.focus()
  })

  const load = useCallback(async () => {
    try {
      const list = await get('/databases')
      if (!live.current) return
      setDatabases(list)
      setError(undefined)
      try {
        const health = await get('/databases/health')
        if (!live.current) return
        setOverviews(Object.fromEntries(health.map((h) => [h.id, h])))
      } catch (e) {
        if (!live.current) return
        setOverviews(Object.fromEntries(list.map((db) => [db.id, e as Error])))
      }
    } catch (e) {
      if (live.current) setError(e as Error)
    }
  }, [])

  useEffect(() => {
    live.current = true
    void load()
    const timer = setInterval(() => {
      if (!document.hidden) void load()
    }, POLL_MS)
    return () => {
      live.current = false
      clearInterval(timer)
    }
  }, [load])

  return (
    <main>
      <div class="page-head">
        <h1>Databases</h1>
        <span class="spacer" />
        <button
          type="button"
          ref={addButton}
          class={adding ? undefined : 'primary'}
          aria-expanded={adding}
          aria-controls="add-database"
          onClick={() => setAdding((a) => !a)}
        >
          {adding ? 'Close' : 'Add a database'}
        </button>
      </div>
      {adding && (
        <div id="add-database" style="margin-bottom:1rem">
          <AddDatabase
            onAdded={(db) => {
              setAdded(db)
              setAdding(false)
              void load()
            }}
          />
        </div>
      )}
      {added && (
        <p class="success" role="status">
          Added{' '}
          <a href={`#/databases/${encodeURIComponent(added.id)}`}>
            <DbText text={added.name} />
          </a>
          . It shows as connected once the agent sends its data.
        </p>
      )}
      {error && <ErrorBox error={error} />}
      {databases === undefined ? (
        !error && <Loading what="Loading databases" />
      ) : databases.length === 0 ? (
        <Empty title="No databases yet: start the agent">
          <p>
            Run <code>dbm agent</code> next to your databases with an API key: it registers each database of its config
            and sends its statistics every 10 seconds.
          </p>
          <p>
            <a href="#/settings/agent">Set up the agent</a> · <a href="#/settings/api-keys">Create an API key</a>
          </p>
        </Empty>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Databases of your organization</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col" class="num">
                  Health
                </th>
                <th scope="col">Engine</th>
                <th scope="col">Host</th>
                <th scope="col" class="num">
                  Active queries
                </th>
                <th scope="col">Last seen</th>
              </tr>
            </thead>
            <tbody>
              {databases.map((db) => {
                const overview = overviews[db.id]
                const ok = overview && !(overview instanceof Error) ? overview : undefined
                return (
                  <tr key={db.id} data-database={db.name}>
                    <td class="nowrap">
                      <a href={`#/databases/${encodeURIComponent(db.id)}`}>
                        <strong>
                          <DbText text={db.name} />
                        </strong>
                      </a>
                      {Object.entries(db.tags).map(([k, v]) => (
                        <span key={k} class="badge" style="margin-left:.35rem">
                          <DbText text={k} />=<DbText text={v} />
                        </span>
                      ))}
                    </td>
                    <td>
                      <StatusBadge db={db} />
                      {db.reason === 'database_down' && (
                        <div class="small error" data-down>
                          down since {fmtClock(db.down_since)}:{' '}
                          <DbText text={db.cause_message ?? db.cause ?? 'unreachable'} />
                        </div>
                      )}
                      {db.availability_30d !== null && db.availability_30d !== undefined && (
                        <div
                          class="small muted"
                          title="up / (up + down) over 30 days from the registration on; time the agent was silent counts as neither"
                        >
                          {(db.availability_30d * 100).toFixed(2)}% up{' '}
                          {watchedWords(db.availability_30d_watched_ms, 30)}
                        </div>
                      )}
                    </td>
                    <td class="num">
                      {overview instanceof Error ? (
                        <span class="error" title={escapeInvisible(overview.message)}>
                          error
                        </span>
                      ) : (
                        <span
                          title={
                            ok?.evaluated_at
                              ? `diagnosed ${fmtTime(ok.evaluated_at)} (about once a minute)`
                              : 'not diagnosed yet'
                          }
                        >
                          <ScoreBadge score={ok?.health_score} />
                        </span>
                      )}
                    </td>
                    <td class="nowrap">
                      {ENGINES[db.engine]?.label ?? db.engine}
                      {db.engine_version && (
                        <span class="muted">
                          {' '}
                          <DbText text={db.engine_version} />
                        </span>
                      )}
                    </td>
                    <td class="mono nowrap">
                      <DbText text={db.host} />:{db.port}
                    </td>
                    <td class="num">{fmtNum(ok?.active_queries)}</td>
                    <td class="nowrap" title={fmtTime(db.last_seen_at)}>
                      {ago(db.last_seen_at)}
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        </div>
      )}
    </main>
  )
}
