// The database's doctor thresholds, on its Settings page: each rule of its engine with its thresholds'
// defaults and the values this database uses. The rules where operators most often disagree (a prepared
// transaction's age, the commit ratio, the superusers they mean) are open; any rule with a value of the
// database's own is open too. Owners change a rule's values and save them, or reset one key to its
// default; members see them read-only. The server checks every value (a 400 names the key).
import { useState } from 'preact/hooks'
import { api } from '../../api.ts'
import { Async, ErrorBox, useApi } from '../../components/ui.tsx'
import { useSession } from '../../session.ts'
import type { GetAnswer } from '../../api-routes.ts'
import { isOwner } from '../members.tsx'
import { apiPath } from './common.tsx'
import type { Database } from './types.ts'

type Thresholds = GetAnswer<`/databases/${string}/thresholds`>
type RuleEntry = Thresholds['rules'][number]
type Entry = RuleEntry['thresholds'][number]

/** Rules shown open: where operators disagree (issue 32). */
const FEATURED = new Set(['pg_prepared_transactions', 'pg_rollback_ratio', 'pg_superusers'])

/** A value as the form shows it: a number as typed, a list one name a line. */
const asText = (value: Entry['value']) => (Array.isArray(value) ? value.join('\n') : String(value))
const showDefault = (value: Entry['default']) =>
  Array.isArray(value) ? (value.length === 0 ? 'none' : value.join(', ')) : String(value)

/** What the text of a key asks: a number, a list of names, or null (empty: back to the default). */
function parsed(entry: Entry, text: string): number | string[] | null {
  if (entry.kind === 'names') {
    const names = text
      .split('\n')
      .map((n) => n.trim())
      .filter((n) => n !== '')
    return names.length === 0 ? null : names
  }
  return text.trim() === '' ? null : Number(text)
}

function RuleForm({
  db,
  rule,
  readOnly,
  reload,
}: {
  db: Database
  rule: RuleEntry
  readOnly: boolean
  reload(): void
}) {
  const [texts, setTexts] = useState<Record<string, string>>({})
  const [state, setState] = useState<{ saving?: boolean; saved?: boolean; error?: Error }>({})
  const textOf = (e: Entry) => texts[e.key] ?? asText(e.value)
  const changed = rule.thresholds.filter((e) => texts[e.key] !== undefined && texts[e.key] !== asText(e.value))
  const send = async (values: Record<string, number | string[] | null>) => {
    setState({ saving: true })
    try {
      await api('PUT', apiPath(db, '/thresholds'), { thresholds: { [rule.rule]: values } })
      setTexts({})
      setState({ saved: true })
      reload()
    } catch (error) {
      setState({ error: error as Error })
    }
  }
  const save = (e: Event) => {
    e.preventDefault()
    if (changed.length > 0)
      void send(Object.fromEntries(changed.map((entry) => [entry.key, parsed(entry, texts[entry.key]!)])))
  }
  const overridden = rule.thresholds.filter((e) => e.overridden).length
  return (
    <details class="threshold-rule" open={FEATURED.has(rule.rule) || overridden > 0} data-rule={rule.rule}>
      <summary>
        <code>{rule.rule}</code> <span class="muted small">{rule.summary}</span>
        {overridden > 0 && <span class="badge badge-info">{overridden} set for this database</span>}
      </summary>
      <form class="form" onSubmit={save} noValidate>
        <div class="table-wrap">
          <table class="table compact">
            <thead>
              <tr>
                <th>Key</th>
                <th>Default</th>
                <th>Value</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {rule.thresholds.map((e) => {
                const label = `${rule.rule} ${e.key}`
                const range =
                  e.kind === 'number' ? `${e.minimum} to ${e.maximum}${e.whole ? ', whole' : ''}` : 'one name a line'
                return (
                  <tr key={e.key} data-key={e.key}>
                    <td>
                      <code>{e.key}</code>
                    </td>
                    <td>{showDefault(e.default)}</td>
                    <td>
                      {e.kind === 'names' ? (
                        <textarea
                          aria-label={label}
                          rows={2}
                          disabled={readOnly}
                          value={textOf(e)}
                          spellcheck={false}
                          onInput={(ev) =>
                            setTexts((t) => ({ ...t, [e.key]: (ev.target as HTMLTextAreaElement).value }))
                          }
                        />
                      ) : (
                        <input
                          aria-label={label}
                          type="number"
                          step="any"
                          disabled={readOnly}
                          value={textOf(e)}
                          onInput={(ev) => setTexts((t) => ({ ...t, [e.key]: (ev.target as HTMLInputElement).value }))}
                        />
                      )}
                      <span class="hint small muted"> {range}</span>
                    </td>
                    <td>
                      {e.overridden && !readOnly && (
                        <button
                          type="button"
                          disabled={state.saving}
                          onClick={() => void send({ [e.key]: null })}
                          aria-label={`Reset ${label} to its default`}
                        >
                          Reset
                        </button>
                      )}
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        </div>
        {!readOnly && (
          <div class="row">
            <button type="submit" class="primary" disabled={state.saving || changed.length === 0}>
              {state.saving ? 'Saving…' : `Save ${rule.rule}`}
            </button>
            {state.saved && (
              <span class="success" role="status">
                Saved. The next diagnosis applies them.
              </span>
            )}
          </div>
        )}
        {state.error && <ErrorBox error={state.error} />}
      </form>
    </details>
  )
}

export function ThresholdsSection({ db }: { db: Database }) {
  const readOnly = !isOwner(useSession().me?.user.role)
  const found = useApi(apiPath(db, '/thresholds'))
  return (
    <section class="panel thresholds">
      <h2>Doctor thresholds</h2>
      <p class="hint small muted">
        The values at which the doctor's rules raise a finding on this database. Each rule's defaults are in the doctor
        rule reference; a value set here applies from the next diagnosis.
        {readOnly ? " Only the organization's owners change them." : ''}
      </p>
      <Async loaded={found}>
        {(t) => (
          <>
            {t.rules.map((rule) => (
              <RuleForm key={rule.rule} db={db} rule={rule} readOnly={readOnly} reload={found.reload} />
            ))}
          </>
        )}
      </Async>
    </section>
  )
}
