// Database settings: the server-side settings the agent applies from its next cycle (poll interval,
// plan and replication collection, the collectors to leave off), which only owners change (members see
// them read-only, with a note), and deleting the database, after typing its name to confirm (Esc cancels),
// also an owner's alone: members see a line saying so instead of the button. Under `dbm local` the notes
// speak of its command line, not of an agent config file it does not have. Between them, the doctor's
// thresholds of the database (thresholds.tsx).
import { useEffect, useRef, useState } from 'preact/hooks'
import { api } from '../../api.ts'
import { DbText, escapeInvisible } from '../../components/invisible.tsx'
import { ErrorBox, useEscape, useFocusSwap } from '../../components/ui.tsx'
import { navigate } from '../../router.ts'
import { useSession } from '../../session.ts'
import { isOwner } from '../members.tsx'
import { useLocalMode } from '../auth.tsx'
import { collectorNames } from '../../../shared/collectors.ts'
import { apiPath, engineName } from './common.tsx'
import { ThresholdsSection } from './thresholds.tsx'
import type { Database, PageProps } from './types.ts'

function SettingsForm({ db, reloadDb }: { db: Database; reloadDb(): void }) {
  // What is collected is the owners' decision (the server refuses a member's change: 403).
  const readOnly = !isOwner(useSession().me?.user.role)
  const local = useLocalMode()
  const collectors = collectorNames.filter((c) => c.engine === db.engine)
  const [interval, setPollInterval] = useState(String(db.poll_interval_seconds))
  const [plans, setPlans] = useState(db.collect_explain_plans)
  const [replication, setReplication] = useState(db.collect_replication)
  const [disabled, setDisabled] = useState<string[]>(db.disabled_collectors)
  const [state, setState] = useState<{ saving?: boolean; saved?: boolean; error?: Error }>({})
  useEffect(() => {
    setPollInterval(String(db.poll_interval_seconds))
    setPlans(db.collect_explain_plans)
    setReplication(db.collect_replication)
    setDisabled(db.disabled_collectors)
  }, [db.updated_at])

  const seconds = Number(interval)
  const intervalError = !Number.isInteger(seconds) || seconds < 1 ? 'A whole number of seconds, at least 1.' : ''
  const toggle = (name: string, on: boolean) =>
    setDisabled((d) => (on ? d.filter((n) => n !== name) : [...new Set([...d, name])]))
  const save = async (e: Event) => {
    e.preventDefault()
    if (intervalError) return
    setState({ saving: true })
    try {
      const body: Record<string, unknown> = { poll_interval_seconds: seconds, disabled_collectors: disabled }
      if (db.engine === 'postgres')
        Object.assign(body, { collect_explain_plans: plans, collect_replication: replication })
      await api('PATCH', apiPath(db, ''), body)
      setState({ saved: true })
      reloadDb()
    } catch (error) {
      setState({ error: error as Error })
    }
  }

  return (
    <form class="form settings-form" onSubmit={save} noValidate>
      {readOnly && (
        <p class="notice small" data-owners-only>
          Only the organization's owners change what is collected. These are the settings the agent applies; ask an
          owner to change them (see the members on the <a href="#/settings">settings page</a>).
        </p>
      )}
      <fieldset class="plain" disabled={readOnly} style="border:0;margin:0;padding:0;display:contents">
        <div class="field">
          <label for="poll-interval">Poll interval (seconds)</label>
          <input
            id="poll-interval"
            type="number"
            min={1}
            step={1}
            inputMode="numeric"
            value={interval}
            aria-invalid={intervalError ? 'true' : undefined}
            aria-describedby="poll-interval-hint"
            onInput={(e) => setPollInterval((e.target as HTMLInputElement).value)}
          />
          <span id="poll-interval-hint" class={intervalError ? 'error' : 'hint'}>
            {intervalError ||
              (local
                ? 'How often the agent collects. dbm local runs the agent in its own process: these settings apply from its next cycle, no restart needed.'
                : 'How often the agent collects. It answers with these settings at each ingest and applies them from its next cycle.')}
          </span>
        </div>
        {db.engine === 'postgres' && (
          <>
            <label class="check">
              <input
                type="checkbox"
                checked={plans}
                onChange={(e) => setPlans((e.target as HTMLInputElement).checked)}
              />{' '}
              Collect explain plans of the costliest statements
            </label>
            <label class="check">
              <input
                type="checkbox"
                checked={replication}
                onChange={(e) => setReplication((e.target as HTMLInputElement).checked)}
              />{' '}
              Collect replication status
            </label>
          </>
        )}
        <fieldset class="collectors">
          <legend>Collectors</legend>
          <p class="hint small muted">Unchecked collectors stop running on the agent for this database.</p>
          <div class="collector-grid">
            {collectors.map((c) => (
              <label key={c.name} class="check">
                <input
                  type="checkbox"
                  checked={!disabled.includes(c.name)}
                  onChange={(e) => toggle(c.name, (e.target as HTMLInputElement).checked)}
                />{' '}
                <code>{c.name}</code>
                {c.minVersion && (
                  <span class="muted small">
                    {' '}
                    ({engineName(db.engine)} {c.minVersion}+)
                  </span>
                )}
              </label>
            ))}
          </div>
        </fieldset>
      </fieldset>
      {!readOnly && (
        <div class="row">
          <button type="submit" class="primary" disabled={state.saving}>
            {state.saving ? 'Saving…' : 'Save settings'}
          </button>
          {state.saved && (
            <span class="success" role="status">
              Saved. The agent applies them from its next cycle.
            </span>
          )}
        </div>
      )}
      {state.error && <ErrorBox error={state.error} />}
    </form>
  )
}

function DeleteDatabase({ db }: { db: Database }) {
  const local = useLocalMode()
  const [open, setOpen] = useState(false)
  const [typed, setTyped] = useState('')
  const [state, setState] = useState<{ deleting?: boolean; error?: Error }>({})
  const opener = useRef<HTMLButtonElement>(null)
  const confirmField = useRef<HTMLInputElement>(null)
  const cancel = () => {
    setOpen(false)
    setTyped('')
  }
  useEscape(open && !state.deleting, cancel)
  useFocusSwap(open, opener, confirmField)
  // The name as shown is accepted too: its invisible characters cannot be typed, their ⟨U+…⟩ markers can.
  const confirmed = typed === db.name || typed === escapeInvisible(db.name)
  const remove = async (e: Event) => {
    e.preventDefault()
    if (!confirmed) return
    setState({ deleting: true })
    try {
      await api('DELETE', apiPath(db, ''))
      navigate('/databases')
    } catch (error) {
      setState({ error: error as Error })
    }
  }
  return (
    <section class="panel critical danger-zone">
      <h2>Delete this database</h2>
      <p>
        Deletes{' '}
        <strong>
          <DbText text={db.name} />
        </strong>{' '}
        with all its telemetry, recommendations and alerts.{' '}
        {local
          ? 'dbm local registers it again while it watches it: stop dbm local and start it again without this database first.'
          : "An agent still configured with it registers it again at its next batch: remove it from the agent's config first."}
      </p>
      {!open ? (
        <button type="button" ref={opener} class="danger" onClick={() => setOpen(true)}>
          Delete database…
        </button>
      ) : (
        <form class="form" onSubmit={remove}>
          <div class="field">
            <label for="confirm-name">
              Type{' '}
              <code>
                <DbText text={db.name} />
              </code>{' '}
              to confirm
            </label>
            <input
              id="confirm-name"
              ref={confirmField}
              value={typed}
              autoComplete="off"
              onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
            />
          </div>
          <div class="row">
            <button type="submit" class="danger" disabled={!confirmed || state.deleting}>
              {state.deleting ? 'Deleting…' : `Delete ${escapeInvisible(db.name)}`}
            </button>
            <button type="button" onClick={cancel}>
              Cancel
            </button>
          </div>
          {state.error && <ErrorBox error={state.error} />}
        </form>
      )}
    </section>
  )
}

export function SettingsPage({ db, reloadDb }: PageProps) {
  const owner = isOwner(useSession().me?.user.role)
  return (
    <div class="stack settings-page">
      <section class="panel">
        <h2>Collection</h2>
        <SettingsForm db={db} reloadDb={reloadDb} />
      </section>
      <ThresholdsSection db={db} />
      {owner ? (
        <DeleteDatabase db={db} />
      ) : (
        <p class="notice small" data-owners-only-delete>
          Only the organization's owners delete a database and its history.
        </p>
      )}
    </div>
  )
}
