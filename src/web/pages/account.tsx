// Settings (#/settings): the signed-in user and the organization as /auth/me describes them, changing
// the password through the mailed reset link (POST /auth/forgot-password: the API has no other way), and
// the organization's alert webhook (GET, PUT and DELETE /organization/webhook): its URL, its delivery
// state, and its signing secret, which the API sends once, in the answer that creates the webhook. A test
// alert (POST /organization/webhook/test) is sent on demand and its outcome shown beside the button.
// Below it, the organization's alert destinations (alert-destinations.tsx).
import { useState } from 'preact/hooks'
import { ApiError, api } from '../api.ts'
import { CopyButton, ErrorBox, Loading, ago, fmtTime, useApi, useConfirmation } from '../components/ui.tsx'
import { type Me, useSession } from '../session.ts'
import type { Static } from '@sinclair/typebox'
import type { CreatedWebhook, Webhook as WebhookSchema, WebhookTestResult } from '../../shared/api/alerts.ts'
import { AlertDestinations } from './alert-destinations.tsx'
import { MembersSection, OwnersOnly, isOwner } from './members.tsx'

type Webhook = Static<typeof WebhookSchema>

/** The PUT answer: with `secret` only when it created the webhook (201). */
type PutAnswer = Webhook & Partial<Pick<Static<typeof CreatedWebhook>, 'secret'>>

/**
 * POST /organization/webhook/test: whether the receiver took the test alert. A failure's reason is the
 * same generic text whatever happened (the API tells nothing about the network it tried); the server's
 * log has the cause.
 */
export type TestOutcome = Static<typeof WebhookTestResult>

/** The outcome in words: "Delivered: the receiver answered 2xx." or "Not delivered: <reason> (the server's log has the cause)." */
export function describeTest(outcome: TestOutcome): string {
  if (outcome.delivered) return 'Delivered: the receiver answered 2xx.'
  return `Not delivered: ${outcome.reason?.trim().replace(/\.$/, '') || 'no answer'} (the server's log has the cause).`
}

/** Sends a test alert to the webhook and says beside the button whether it arrived. */
function TestWebhook({ onGone }: { onGone(): void }) {
  const [state, setState] = useState<{ busy?: boolean; outcome?: TestOutcome; error?: string }>({})
  const send = async () => {
    setState({ busy: true })
    try {
      const outcome = await api('POST', '/organization/webhook/test', {})
      setState({ outcome })
    } catch (e) {
      if (e instanceof ApiError && e.status === 404 && /webhook/.test(e.message)) {
        setState({ error: 'No webhook is set any more.' })
        onGone()
      } else if (e instanceof ApiError && e.status === 429) {
        setState({ error: `One test at a time: ${e.message.replace(/^too many requests; /, '')}.` })
      } else
        setState({
          error:
            e instanceof ApiError && e.status === 404
              ? 'This server cannot send test alerts yet.'
              : (e as Error).message,
        })
    }
  }
  return (
    <div class="row">
      <button type="button" onClick={send} disabled={state.busy}>
        {state.busy ? 'Sending…' : 'Send a test alert'}
      </button>
      {state.outcome && (
        <span
          class={state.outcome.delivered ? 'success' : 'error'}
          role="status"
          data-webhook-test={state.outcome.delivered ? 'delivered' : 'failed'}
        >
          {describeTest(state.outcome)}
        </span>
      )}
      {state.error && (
        <span class="error" role="alert" data-webhook-test="error">
          {state.error}
        </span>
      )}
    </div>
  )
}

/** The API's longest webhook URL (src/server/limits.ts webhookUrlMaxLength). */
const URL_MAX = 2048

function When({ at }: { at: string | null }) {
  return at ? <span title={fmtTime(at)}>{ago(at)}</span> : <span class="muted">never</span>
}

/** The signing secret, shown once with its copy button and how a receiver checks it. */
function NewSecret({ secret }: { secret: string }) {
  return (
    <div class="panel ok stack" role="status" aria-labelledby="webhook-secret-title">
      <h3 id="webhook-secret-title" style="margin-top:0">
        Signing secret
      </h3>
      <p>
        <strong>Copy it now: it will not be shown again.</strong> Each delivery carries{' '}
        <code>X-DBM-Signature: sha256=&lt;hex&gt;</code>, the HMAC-SHA256 of the raw body keyed with this secret: check
        it before trusting a delivery.
      </p>
      <div class="code">
        <pre>
          <code id="webhook-secret">{secret}</code>
        </pre>
        <CopyButton text={secret} />
      </div>
    </div>
  )
}

function WebhookState({ webhook }: { webhook: Webhook }) {
  const failing =
    webhook.last_failure_at !== null &&
    (webhook.last_success_at === null || webhook.last_failure_at > webhook.last_success_at)
  return (
    <dl class="kv" data-webhook-state>
      <dt>URL</dt>
      <dd class="mono" data-webhook-url>
        {webhook.url}
      </dd>
      <dt>Set</dt>
      <dd>
        <When at={webhook.created_at} />
        {webhook.updated_at !== webhook.created_at && (
          <>
            , URL changed <When at={webhook.updated_at} />
          </>
        )}
      </dd>
      <dt>Last delivered</dt>
      <dd>
        <When at={webhook.last_success_at} />
      </dd>
      <dt>Last failure</dt>
      <dd>
        <When at={webhook.last_failure_at} />
        {webhook.last_error && <span class={failing ? 'error' : 'muted'}> ({webhook.last_error})</span>}
      </dd>
    </dl>
  )
}

function RemoveWebhook({ onRemoved }: { onRemoved(): void }) {
  const { confirming, open, close, busy, error, run, opener, cancelButton } = useConfirmation()
  const remove = () =>
    run(async () => {
      try {
        await api('DELETE', '/organization/webhook')
      } catch (e) {
        // Already gone (removed elsewhere): the same outcome.
        if (!(e instanceof ApiError && e.status === 404)) throw e
      }
      close()
      onRemoved()
    })
  if (!confirming) {
    return (
      <button type="button" ref={opener} onClick={open}>
        Remove the webhook
      </button>
    )
  }
  return (
    <div class="row" role="group" aria-label="Remove the webhook?">
      <span class="small">Alerts are then mailed only; the secret is gone for good.</span>
      <button type="button" class="danger" disabled={busy} onClick={remove}>
        {busy ? 'Removing…' : 'Remove now'}
      </button>
      <button type="button" ref={cancelButton} disabled={busy} onClick={close}>
        Cancel
      </button>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </div>
  )
}

function WebhookForm({ current, onSaved }: { current: Webhook | null; onSaved(answer: PutAnswer): void }) {
  const [url, setUrl] = useState(current?.url ?? '')
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError('')
    try {
      onSaved(await api('PUT', '/organization/webhook', { url: url.trim() }))
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }
  const unchanged = current !== null && url.trim() === current.url
  return (
    <form class="form-row" onSubmit={submit}>
      <div class="field" style="flex:1 1 22rem">
        <label for="webhook-url">Webhook URL</label>
        <input
          id="webhook-url"
          type="url"
          required
          maxLength={URL_MAX}
          value={url}
          placeholder="https://hooks.example.com/dbm"
          autoComplete="off"
          spellcheck={false}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? 'webhook-error' : 'webhook-hint'}
          onInput={(e) => setUrl((e.currentTarget as HTMLInputElement).value)}
        />
        <span class="hint" id="webhook-hint">
          http or https, without a user name or password. Alerts are POSTed to it as JSON.
        </span>
      </div>
      <button type="submit" class="primary" disabled={busy || unchanged}>
        {busy ? 'Saving…' : current ? 'Change the URL' : 'Set the webhook'}
      </button>
      {error && (
        <p class="error" id="webhook-error" role="alert" style="flex-basis:100%">
          {error}
        </p>
      )}
    </form>
  )
}

/**
 * The webhook, read only when /auth/me says one is set (no request answered 404 on every visit); a 404
 * still reads as none (removed elsewhere meanwhile). Without SMTP, "by mail" is the server's log.
 */
function WebhookSettings({ notifications }: { notifications: Me['notifications'] }) {
  const [isSet, setIsSet] = useState(notifications.webhook)
  const loaded = useApi(isSet ? '/organization/webhook' : null)
  const [secret, setSecret] = useState<string>()
  const [saved, setSaved] = useState('')
  const none = !isSet || (loaded.error instanceof ApiError && loaded.error.status === 404)
  if (loaded.error && !none) return <ErrorBox error={loaded.error} />
  if (loaded.data === undefined && !none) return <Loading what="Loading the webhook" />
  const current = none ? null : (loaded.data ?? null)
  // The destinations below get alerts of their own: the line speaks of mail and this webhook only.
  const byMail =
    notifications.mail === 'log'
      ? "alert mails are only written to this server's log, as no mail server is set (DBM_SMTP_URL); the alert destinations below are sent alerts apart"
      : 'alerts go by mail, and to the alert destinations below'
  return (
    <div class="stack">
      {current ? <WebhookState webhook={current} /> : <p data-webhook-none>No webhook is set: {byMail}.</p>}
      {/* Keyed by the URL, so that the field shows the one saved. */}
      <WebhookForm
        key={current?.url ?? ''}
        current={current}
        onSaved={(answer) => {
          setSecret(answer.secret)
          setSaved(answer.secret ? 'Webhook set.' : 'URL changed. The signing secret is the same as before.')
          if (isSet) loaded.reload()
          else setIsSet(true)
        }}
      />
      {saved && (
        <p class="success" role="status">
          {saved}
        </p>
      )}
      {secret && <NewSecret secret={secret} />}
      {current && (
        <>
          {/* Keyed by the URL: an outcome is about the URL it was sent to. */}
          <TestWebhook key={current.url} onGone={() => setIsSet(false)} />
          <p class="muted small">
            The signing secret is shown once, when the webhook is set. For a new one, remove the webhook and set it
            again.
          </p>
          <RemoveWebhook
            onRemoved={() => {
              setSecret(undefined)
              setSaved('')
              setIsSet(false)
            }}
          />
        </>
      )}
    </div>
  )
}

/** Mails the user a link to choose a new password: the reset flow is the API's way to change it. */
function ChangePassword({ email }: { email: string }) {
  const [state, setState] = useState<{ sending?: boolean; sent?: boolean; error?: string }>({})
  const send = async () => {
    setState({ sending: true })
    try {
      await api('POST', '/auth/forgot-password', { email })
      setState({ sent: true })
    } catch (e) {
      setState({
        error:
          e instanceof ApiError && e.status === 429
            ? `A link was sent a moment ago: ${e.message.replace(/^too many requests; /, '')}.`
            : (e as Error).message,
      })
    }
  }
  return (
    <div class="stack">
      <p class="small muted">
        dbm mails you a link to choose a new password (valid one hour). Setting it signs out every session of yours,
        this one included.
      </p>
      <div class="row">
        <button type="button" onClick={send} disabled={state.sending || state.sent}>
          {state.sending ? 'Sending…' : 'Mail me a link to change my password'}
        </button>
        {state.sent && (
          <span class="success" role="status">
            Sent to {email}.
          </span>
        )}
        {state.error && (
          <span class="error" role="alert">
            {state.error}
          </span>
        )}
      </div>
    </div>
  )
}

export function AccountSettings() {
  const { me } = useSession()
  if (!me) return null
  return (
    <main>
      <div class="page-head">
        <h1>Settings</h1>
      </div>
      <div class="stack">
        <section class="panel" aria-labelledby="settings-account">
          <h2 id="settings-account" style="margin-top:0">
            Your account
          </h2>
          <dl class="kv">
            <dt>Name</dt>
            <dd>{me.user.name}</dd>
            <dt>Email</dt>
            <dd>
              {me.user.email}{' '}
              {me.user.email_verified ? (
                <span class="badge badge-ok">verified</span>
              ) : (
                <span class="badge badge-warning">not verified</span>
              )}
            </dd>
            {me.user.role && (
              <>
                <dt>Role</dt>
                <dd>{me.user.role}</dd>
              </>
            )}
          </dl>
          <h3>Password</h3>
          <ChangePassword email={me.user.email} />
        </section>

        <section class="panel" aria-labelledby="settings-org">
          <h2 id="settings-org" style="margin-top:0">
            Organization
          </h2>
          <dl class="kv">
            <dt>Name</dt>
            <dd>{me.organization.name}</dd>
            <dt>Slug</dt>
            <dd class="mono">{me.organization.slug}</dd>
            <dt>Plan</dt>
            <dd>{me.organization.plan}</dd>
            <dt>Verified</dt>
            <dd>
              {me.organization.verified
                ? 'yes: unlimited databases, recommendations and fix commands'
                : 'not yet: one database, 24 hours of data; the link in the verification mail unlocks the rest'}
            </dd>
          </dl>
          <p class="small">
            <a href="#/settings/api-keys">API keys</a> · <a href="#/settings/agent">Agent setup</a>
          </p>
        </section>

        <section class="panel" aria-labelledby="settings-webhook">
          <h2 id="settings-webhook" style="margin-top:0">
            Alert webhook
          </h2>
          <p class="muted small">
            When a critical finding opens or resolves an alert, dbm mails the organization's verified users and POSTs
            the alert to this URL, signed with a secret (see docs/alerts.md). Failed deliveries are retried every minute
            for a day.
          </p>
          {isOwner(me.user.role) ? (
            <WebhookSettings notifications={me.notifications} />
          ) : (
            <OwnersOnly what="the webhook" />
          )}
        </section>

        <section class="panel" aria-labelledby="settings-destinations">
          <h2 id="settings-destinations" style="margin-top:0">
            Alert destinations
          </h2>
          <p class="muted small">
            Each enabled destination is sent every alert's opening and resolution too: Slack, Microsoft Teams,
            PagerDuty, Opsgenie, a Prometheus Alertmanager, a signed webhook or mail (see docs/alerts.md, Alert
            destinations).
          </p>
          <AlertDestinations owner={isOwner(me.user.role)} />
        </section>

        <section class="panel" aria-labelledby="settings-members">
          <h2 id="settings-members" style="margin-top:0">
            Members
          </h2>
          <MembersSection />
        </section>
      </div>
    </main>
  )
}
