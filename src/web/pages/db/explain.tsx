// Explain with parameters on a statement's page (PostgreSQL): one field per $n of the statement's text,
// "Explain" asks the database's agent (POST /actions, kind explain; any member may), and the plan it sends
// back is drawn with the plan tree. The agent runs EXPLAIN (FORMAT JSON), never ANALYZE, of the text
// pg_stat_statements holds for this statement, with the values bound as constants, under the plan
// sampler's trust rules; a refusal's reason (which may hold the database's text) is shown through DbText.
import type { Static } from '@sinclair/typebox'
import { useEffect, useState } from 'preact/hooks'
import type { ActionView } from '../../../shared/api/actions.ts'
import { api } from '../../api.ts'
import { DbText } from '../../components/invisible.tsx'
import { apiPath } from './common.tsx'
import { PlanTree } from './plan-tree.tsx'
import type { Database } from './types.ts'

type Action = Static<typeof ActionView>

/** The highest $n in a normalised statement (its parameters are $1 … $n). */
export function parameterCount(text: string): number {
  let max = 0
  for (const m of text.matchAll(/\$(\d+)/g)) max = Math.max(max, Number(m[1]))
  return Math.min(max, 100)
}

export function ExplainForm({ db, hash, text }: { db: Database; hash: string; text: string }) {
  const count = parameterCount(text)
  const [values, setValues] = useState<(string | null)[]>(() => Array(count).fill(''))
  const [asked, setAsked] = useState<string>()
  const [action, setAction] = useState<Action>()
  const [error, setError] = useState<string>()
  useEffect(() => {
    if (!asked) return
    let stop = false
    let timer: ReturnType<typeof setTimeout>
    const read = async () => {
      try {
        const a = await api('GET', apiPath(db, `/actions/${asked}`))
        if (stop) return
        setAction(a)
        if (a.state !== 'pending' && a.state !== 'running') return
      } catch {}
      if (!stop) timer = setTimeout(read, 1000)
    }
    void read()
    return () => {
      stop = true
      clearTimeout(timer)
    }
  }, [db.id, asked])
  const explain = async (e: Event) => {
    e.preventDefault()
    setError(undefined)
    setAction(undefined)
    try {
      const a = await api('POST', apiPath(db, '/actions'), { kind: 'explain', query_hash: hash, parameters: values })
      setAsked(a.id)
    } catch (err) {
      setError((err as Error).message)
    }
  }
  const busy = asked !== undefined && (action === undefined || action.state === 'pending' || action.state === 'running')
  return (
    <section class="explain-form" aria-label="Explain with parameters">
      <h2>Explain with parameters</h2>
      <p class="muted small">
        The agent plans this statement with the values below (EXPLAIN, never ANALYZE: nothing runs). An empty field is
        the empty string; tick NULL for NULL.
      </p>
      <form onSubmit={explain}>
        {values.map((v, i) => (
          <div class="field-row" key={i}>
            <label>
              <span class="mono">${i + 1}</span>{' '}
              <input
                type="text"
                value={v ?? ''}
                disabled={v === null}
                onInput={(e) => setValues(values.map((x, j) => (j === i ? (e.target as HTMLInputElement).value : x)))}
                data-parameter={i + 1}
              />
            </label>{' '}
            <label class="check small">
              <input
                type="checkbox"
                checked={v === null}
                onChange={(e) =>
                  setValues(values.map((x, j) => (j === i ? ((e.target as HTMLInputElement).checked ? null : '') : x)))
                }
              />{' '}
              NULL
            </label>
          </div>
        ))}
        <button type="submit" disabled={busy} data-explain>
          {busy ? 'Explaining…' : 'Explain'}
        </button>
        {error && <span class="sev-critical small"> {error}</span>}
      </form>
      {action && action.state !== 'done' && (
        <div data-explain-outcome={action.state}>
          <p role="status">
            {action.state === 'pending'
              ? 'Waiting for the agent…'
              : action.state === 'running'
                ? 'The agent is planning it…'
                : action.state === 'expired'
                  ? 'Expired: no agent took it in time.'
                  : `Not explained (${action.state}).`}
          </p>
          {action.reason && (
            <p class="small">
              <DbText text={action.reason} />
            </p>
          )}
        </div>
      )}
      {action?.state === 'done' && action.plan !== undefined && (
        <div data-explain-outcome="done">
          <PlanTree planJson={action.plan} />
        </div>
      )}
    </section>
  )
}
