// Settings' "Alert destinations" section (/organization/alert-destinations): each destination with its
// kind, whether it is on, where it posts (a secret only as the API's hint), its delivered and failed
// counts and its last error; owners add one (a kind chooser, then that kind's fields), turn it on or off,
// send it a test alert and delete it (after a confirmation). Members see the list read-only. Every text
// the API answers (names, URLs, addresses, hints, errors) is shown through DbText.
import { useState } from 'preact/hooks'
import type { Static } from '@sinclair/typebox'
import { ApiError, api } from '../api.ts'
import { CopyButton, ErrorBox, Loading, ago, fmtNum, fmtTime, useApi, useConfirmation } from '../components/ui.tsx'
import { DbText } from '../components/invisible.tsx'
import type {
  AlertDestination,
  CreatedAlertDestination,
  DestinationKind,
  DestinationTestResult,
} from '../../shared/api/alert-destinations.ts'

type Destination = Static<typeof AlertDestination>
type Kind = Static<typeof DestinationKind>
type Created = Static<typeof CreatedAlertDestination>
type TestResult = Static<typeof DestinationTestResult>

const PATH = '/organization/alert-destinations'
/** The API's longest URL and key (src/server/limits.ts). */
const URL_MAX = 2048
const KEY_MAX = 200

type Field = 'url' | 'to' | 'routing_key' | 'api_key'

interface KindForm {
  label: string
  /** The kind's fields in the add form: label, whether required, placeholder and hint. */
  fields: { name: Field; label: string; required: boolean; placeholder: string; hint: string }[]
}

/** The kinds in the chooser's order, each with the fields the API takes for it (alerts/destinations.ts). */
export const KIND_FORMS: Record<Kind, KindForm> = {
  slack: {
    label: 'Slack',
    fields: [
      {
        name: 'url',
        label: 'Incoming webhook URL',
        required: true,
        placeholder: 'https://hooks.slack.com/services/…',
        hint: "The URL is the webhook's credential: it is kept secret and shown by its last characters.",
      },
    ],
  },
  teams: {
    label: 'Microsoft Teams',
    fields: [
      {
        name: 'url',
        label: 'Workflow webhook URL',
        required: true,
        placeholder: 'https://…/workflows/…',
        hint: "The URL is the workflow's credential: it is kept secret and shown by its last characters.",
      },
    ],
  },
  pagerduty: {
    label: 'PagerDuty',
    fields: [
      {
        name: 'routing_key',
        label: 'Integration (routing) key',
        required: true,
        placeholder: '32 characters',
        hint: 'Events API v2 integration key of the service.',
      },
      {
        name: 'url',
        label: 'Events API URL (optional)',
        required: false,
        placeholder: 'https://events.pagerduty.com/v2/enqueue',
        hint: 'Leave empty for PagerDuty itself.',
      },
    ],
  },
  opsgenie: {
    label: 'Opsgenie',
    fields: [
      {
        name: 'api_key',
        label: 'API key',
        required: true,
        placeholder: 'an API integration key',
        hint: 'Of an API integration, with create and close rights.',
      },
      {
        name: 'url',
        label: 'API URL (optional)',
        required: false,
        placeholder: 'https://api.opsgenie.com',
        hint: 'Leave empty for the US site; https://api.eu.opsgenie.com for the EU.',
      },
    ],
  },
  alertmanager: {
    label: 'Prometheus Alertmanager',
    fields: [
      {
        name: 'url',
        label: 'Alertmanager URL',
        required: true,
        placeholder: 'http://alertmanager.internal:9093',
        hint: 'Its base URL: alerts are POSTed to /api/v2/alerts under it.',
      },
    ],
  },
  webhook: {
    label: 'Signed webhook',
    fields: [
      {
        name: 'url',
        label: 'Webhook URL',
        required: true,
        placeholder: 'https://hooks.example.com/dbm',
        hint: 'Signed JSON, as the alert webhook above; its secret is shown once.',
      },
    ],
  },
  email: {
    label: 'Email',
    fields: [
      {
        name: 'to',
        label: 'Addresses',
        required: true,
        placeholder: 'oncall@example.com, dba@example.com',
        hint: 'Up to 20, separated by commas or spaces (verified organizations only).',
      },
    ],
  },
}

const KINDS = Object.keys(KIND_FORMS) as Kind[]

function When({ at }: { at: string | null }) {
  return at ? <span title={fmtTime(at)}>{ago(at)}</span> : <span class="muted">never</span>
}

/** Where the destination sends: its URL, its addresses, or its secret's hint. */
function Target({ d }: { d: Destination }) {
  if (d.to) return <DbText text={d.to.join(', ')} />
  return (
    <>
      {d.url && <DbText text={d.url} />}
      {d.url && d.secret_hint && ' · '}
      {d.secret_hint && (
        <span title="the secret's last characters">
          secret <DbText text={d.secret_hint} />
        </span>
      )}
    </>
  )
}

/** Sends the destination a test alert and its resolution; says beside the button whether they arrived. */
function SendTest({ d }: { d: Destination }) {
  const [state, setState] = useState<{ busy?: boolean; result?: TestResult; error?: string }>({})
  const send = async () => {
    setState({ busy: true })
    try {
      setState({ result: await api('POST', `${PATH}/${d.id}/test`, {}) })
    } catch (e) {
      setState({
        error:
          e instanceof ApiError && e.status === 429
            ? `One test at a time: ${e.message.replace(/^too many requests; /, '')}.`
            : (e as Error).message,
      })
    }
  }
  return (
    <>
      <button type="button" onClick={send} disabled={state.busy}>
        {state.busy ? 'Sending…' : 'Send test'}
      </button>
      {state.result && (
        <span
          class={state.result.delivered ? 'success' : 'error'}
          role="status"
          data-destination-test={state.result.delivered ? 'delivered' : 'failed'}
        >
          {state.result.delivered ? (
            'Delivered: the test alert and its resolution.'
          ) : (
            <>
              Not delivered: <DbText text={state.result.reason ?? 'no answer'} /> (the server's log has the cause).
            </>
          )}
        </span>
      )}
      {state.error && (
        <span class="error" role="alert" data-destination-test="error">
          <DbText text={state.error} />
        </span>
      )}
    </>
  )
}

function Toggle({ d, onChanged }: { d: Destination; onChanged(): void }) {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  const flip = async () => {
    setBusy(true)
    setError('')
    try {
      await api('PATCH', `${PATH}/${d.id}`, { enabled: !d.enabled })
      onChanged()
    } catch (e) {
      setError((e as Error).message)
    } finally {
      setBusy(false)
    }
  }
  return (
    <>
      <button type="button" onClick={flip} disabled={busy}>
        {d.enabled ? 'Disable' : 'Enable'}
      </button>
      {error && (
        <span class="error" role="alert">
          <DbText text={error} />
        </span>
      )}
    </>
  )
}

function Delete({ d, onDeleted }: { d: Destination; onDeleted(): void }) {
  const { confirming, open, close, busy, error, run, opener, cancelButton } = useConfirmation()
  const remove = () =>
    run(async () => {
      try {
        await api('DELETE', `${PATH}/${d.id}`)
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) throw e // gone already: the same outcome
      }
      close()
      onDeleted()
    })
  if (!confirming) {
    return (
      <button type="button" ref={opener} onClick={open}>
        Delete
      </button>
    )
  }
  return (
    <span class="row" role="group" aria-label="Delete this destination?">
      <span class="small">Delete it? Its undelivered alerts are given up.</span>
      <button type="button" class="danger" disabled={busy} onClick={remove}>
        {busy ? 'Deleting…' : 'Delete now'}
      </button>
      <button type="button" ref={cancelButton} disabled={busy} onClick={close}>
        Cancel
      </button>
      {error && (
        <span class="error" role="alert">
          <DbText text={error} />
        </span>
      )}
    </span>
  )
}

function DestinationItem({ d, owner, onChanged }: { d: Destination; owner: boolean; onChanged(): void }) {
  return (
    <li class="panel destination" data-destination={d.id}>
      <div class="row">
        <strong data-destination-name>
          <DbText text={d.name} />
        </strong>
        <span class="badge">{KIND_FORMS[d.kind]?.label ?? <DbText text={d.kind} />}</span>
        <span class={`badge ${d.enabled ? 'badge-ok' : 'badge-muted'}`} data-destination-enabled={d.enabled}>
          {d.enabled ? 'enabled' : 'disabled'}
        </span>
      </div>
      <dl class="kv">
        <dt>Sends to</dt>
        <dd class="mono">
          <Target d={d} />
        </dd>
        <dt>Delivered</dt>
        <dd data-destination-sent>
          {fmtNum(d.sent)}, last <When at={d.last_success_at} />
        </dd>
        <dt>Failed</dt>
        <dd data-destination-failed>
          {fmtNum(d.failed)}
          {d.last_failure_at && (
            <>
              , last <When at={d.last_failure_at} />
            </>
          )}
        </dd>
        {d.last_error && (
          <>
            <dt>Last error</dt>
            <dd class="error" data-destination-error>
              <DbText text={d.last_error} />
            </dd>
          </>
        )}
      </dl>
      {owner && (
        <div class="row">
          <Toggle d={d} onChanged={onChanged} />
          <SendTest d={d} />
          <Delete d={d} onDeleted={onChanged} />
        </div>
      )}
    </li>
  )
}

/** The add form: a kind, a name, and that kind's fields. */
function AddDestination({ onAdded }: { onAdded(created: Created): void }) {
  const [kind, setKind] = useState<Kind>('slack')
  const [name, setName] = useState('')
  const [values, setValues] = useState<Partial<Record<Field, string>>>({})
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  const form = KIND_FORMS[kind]
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError('')
    const body: Record<string, unknown> = { kind, name: name.trim() }
    for (const f of form.fields) {
      const value = values[f.name]?.trim()
      if (!value) continue
      body[f.name] = f.name === 'to' ? value.split(/[\s,;]+/).filter(Boolean) : value
    }
    try {
      onAdded(await api('POST', PATH, body))
      setName('')
      setValues({})
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class="stack" onSubmit={submit} aria-labelledby="destination-add-title">
      <h3 id="destination-add-title">Add a destination</h3>
      <div class="form-row">
        <div class="field">
          <label for="destination-kind">Kind</label>
          <select
            id="destination-kind"
            value={kind}
            onChange={(e) => setKind((e.currentTarget as HTMLSelectElement).value as Kind)}
          >
            {KINDS.map((k) => (
              <option key={k} value={k}>
                {KIND_FORMS[k].label}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="destination-name">Name</label>
          <input
            id="destination-name"
            required
            maxLength={200}
            value={name}
            autoComplete="off"
            placeholder="on-call channel"
            onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)}
          />
        </div>
      </div>
      {form.fields.map((f) => (
        <div class="field" key={`${kind}-${f.name}`}>
          <label for={`destination-${f.name}`}>{f.label}</label>
          <input
            id={`destination-${f.name}`}
            type="text"
            inputMode={f.name === 'url' ? 'url' : f.name === 'to' ? 'email' : undefined}
            required={f.required}
            maxLength={f.name === 'url' || f.name === 'to' ? URL_MAX : KEY_MAX}
            value={values[f.name] ?? ''}
            placeholder={f.placeholder}
            autoComplete="off"
            spellcheck={false}
            aria-describedby={`destination-${f.name}-hint`}
            onInput={(e) => setValues({ ...values, [f.name]: (e.currentTarget as HTMLInputElement).value })}
          />
          <span class="hint" id={`destination-${f.name}-hint`}>
            {f.hint}
          </span>
        </div>
      ))}
      <div class="row">
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Adding…' : 'Add destination'}
        </button>
        {error && (
          <span class="error" role="alert" data-destination-add-error>
            <DbText text={error} />
          </span>
        )}
      </div>
    </form>
  )
}

/** A new webhook destination's signing secret, shown once. */
function NewSecret({ created }: { created: Created }) {
  if (!created.secret) return null
  return (
    <div class="panel ok stack" role="status">
      <p>
        <strong>
          Signing secret of <DbText text={created.name} />: copy it now, it will not be shown again.
        </strong>
      </p>
      <div class="code">
        <pre>
          <code data-destination-secret>
            <DbText text={created.secret} />
          </code>
        </pre>
        <CopyButton text={created.secret} />
      </div>
    </div>
  )
}

export function AlertDestinations({ owner }: { owner: boolean }) {
  const loaded = useApi(PATH)
  const [created, setCreated] = useState<Created>()
  if (loaded.error) return <ErrorBox error={loaded.error} />
  if (loaded.data === undefined) return <Loading what="Loading the alert destinations" />
  const list = loaded.data
  return (
    <div class="stack">
      {list.length === 0 ? (
        <p data-destinations-none>No destinations yet.</p>
      ) : (
        <ul class="destinations" aria-label="Alert destinations">
          {list.map((d) => (
            <DestinationItem key={d.id} d={d} owner={owner} onChanged={loaded.reload} />
          ))}
        </ul>
      )}
      {created && <NewSecret created={created} />}
      {owner ? (
        <AddDestination
          onAdded={(d) => {
            setCreated(d)
            loaded.reload()
          }}
        />
      ) : (
        <p class="muted" data-destinations-owners-only>
          Only the organization's owners add, change, test or delete destinations.
        </p>
      )}
    </div>
  )
}
