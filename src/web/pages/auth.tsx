// Sign up, sign in, email verification (the mailed link opens #/verify?token=…), the resend button for
// unverified accounts, and password reset (the mailed /reset-password link redirects to #/reset?token=…).
// Server validation messages start with the field they name; they are shown under that field.
import type { ComponentChildren } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { ApiError, api } from '../api.ts'
import { Loading } from '../components/ui.tsx'
import { navigate } from '../router.ts'
import { useSession } from '../session.ts'

const MIN_PASSWORD = 8

interface FormState {
  busy: boolean
  /** A message the server tied to one field (keyed by the field's API name). */
  fieldError?: { field: string; message: string }
  error?: string
}

/** Splits an API error into the field it names (when it is one of `fields`) or a form-level message. */
function describe(error: unknown, fields: string[]): Pick<FormState, 'fieldError' | 'error'> {
  const message = error instanceof Error ? error.message : String(error)
  if (error instanceof ApiError && error.status === 429)
    return { error: `Too many attempts: ${message.replace(/^too many requests; /, '')}.` }
  const first = /^[a-z_]+/.exec(message)?.[0] ?? ''
  if (fields.includes(first)) return { fieldError: { field: first, message } }
  return { error: message }
}

/** Runs `action` with the form's busy and error states. */
function useForm(fields: string[]) {
  const [state, setState] = useState<FormState>({ busy: false })
  const run = async (action: () => Promise<void>) => {
    setState({ busy: true })
    try {
      await action()
      setState({ busy: false })
    } catch (e) {
      setState({ busy: false, ...describe(e, fields) })
    }
  }
  return { state, run }
}

function Field(props: {
  id: string
  name: string
  label: string
  type?: 'text' | 'email' | 'password'
  autocomplete?: string
  hint?: string
  minLength?: number
  form: FormState
  value: string
  onInput(value: string): void
}) {
  const error = props.form.fieldError?.field === props.name ? props.form.fieldError.message : undefined
  const hintId = props.hint ? `${props.id}-hint` : undefined
  const errorId = error ? `${props.id}-error` : undefined
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        name={props.name}
        type={(props.type ?? 'text') as 'text'}
        autocomplete={props.autocomplete}
        minLength={props.minLength}
        required
        value={props.value}
        onInput={(e) => props.onInput((e.currentTarget as HTMLInputElement).value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={[hintId, errorId].filter(Boolean).join(' ') || undefined}
      />
      {props.hint && (
        <span class="hint" id={hintId}>
          {props.hint}
        </span>
      )}
      {error && (
        <span class="error" id={errorId} role="alert">
          {error}
        </span>
      )}
    </div>
  )
}

function FormError({ form }: { form: FormState }) {
  return form.error ? (
    <p class="error" role="alert">
      {form.error}
    </p>
  ) : null
}

function AuthPage({ title, children }: { title: string; children: ComponentChildren }) {
  return (
    <main class="narrow">
      <div class="panel stack">
        <h1>{title}</h1>
        {children}
      </div>
    </main>
  )
}

/**
 * How this server takes new sessions, from `GET /healthz`'s `signup`: `open`, `closed` (DBM_SIGNUP=closed
 * once an account exists) or `local` (`dbm local`: no signup, no password, the link its process prints).
 * Undefined until it answers (the page then offers signup, as the API decides anyway).
 */
export function useSignupMode(): string | undefined {
  const [mode, setMode] = useState<string | undefined>(knownMode)
  useEffect(() => {
    if (knownMode !== undefined) return
    let live = true
    modeRequest ??= fetch('/healthz')
      .then((res) => res.json() as Promise<{ signup?: string }>)
      .then((body) => body.signup ?? 'open')
    modeRequest.then(
      (m) => {
        // `dbm local` stays local for the page's life; open and closed may change (the first account closes signup).
        if (m === 'local') knownMode = m
        else modeRequest = undefined
        if (live) setMode(m)
      },
      () => {
        modeRequest = undefined
      },
    )
    return () => {
      live = false
    }
  }, [])
  return mode
}

/** GET /healthz's signup mode, asked once for the components mounted meanwhile; kept once it says local. */
let modeRequest: Promise<string> | undefined
let knownMode: string | undefined

/** Whether this is `dbm local` (its agent runs in the server's process, with no config file): false until known. */
export const useLocalMode = () => useSignupMode() === 'local'

/** Whether this server takes signups now; undefined until /healthz answers. */
function useSignupOpen(): boolean | undefined {
  const mode = useSignupMode()
  return mode === undefined ? undefined : mode === 'open'
}

/** `dbm local`'s way back in: its user has no password, the process prints a one-time link. */
const LOCAL_SIGN_IN =
  'This is dbm local: sign in with the one-time link it printed in its terminal. A used or expired link? Stop dbm local (Ctrl-C) and start it again for a new one; the history is kept.'

/**
 * dbm local by a bare loopback address (127.0.0.1 or [::1]), which answers for its agent but signs nobody in:
 * sessions live only under the run's own name, which this page must not tell (whoever knows it can aim the
 * owner's browser at a port of theirs). A restart would end the session the user may have under the name.
 */
const LOCAL_BY_ADDRESS =
  'This address of dbm local does not sign in. Open the Dashboard address it printed in its terminal (a name ending in .localhost): if you signed in there, you still are.'

/** Whether the page was opened by the run's name (dbm local prints http://dbm-….localhost:PORT/), not a bare address. */
const byLocalName = () => location.hostname.endsWith('.localhost')

const SIGNUP_CLOSED = 'Sign-up is closed on this server: ask its administrator for an account.'

/** The sign-in form; afterwards the user goes to `next` (a page of the app, vetted by safeNext) or the databases. */
export function SignIn({ next, ended = false }: { next?: string; ended?: boolean }) {
  const { refresh } = useSession()
  const mode = useSignupMode()
  const signupOpen = mode === undefined ? undefined : mode === 'open'
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const { state, run } = useForm(['email', 'password'])
  const submit = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      await api('POST', '/auth/login', { email, password })
      await refresh()
      navigate(next ?? '/databases')
    })
  }
  if (mode === 'local') {
    return (
      <AuthPage title="Sign in to dbm">
        {ended && (
          <p class="notice" role="status" data-signin-reason>
            Your session has ended.
          </p>
        )}
        <p class="notice" role="status" data-local-sign-in>
          {byLocalName() ? LOCAL_SIGN_IN : LOCAL_BY_ADDRESS}
        </p>
      </AuthPage>
    )
  }
  return (
    <AuthPage title="Sign in to dbm">
      {(ended || next) && (
        <p class={ended ? 'notice' : 'muted small'} role="status" data-signin-reason>
          {ended
            ? 'Your session has ended. Sign in again to go back to the page you were on.'
            : 'Sign in to open the page you asked for.'}
        </p>
      )}
      <form class="form" onSubmit={submit}>
        <Field
          id="signin-email"
          name="email"
          label="Email"
          type="email"
          autocomplete="username"
          form={state}
          value={email}
          onInput={setEmail}
        />
        <Field
          id="signin-password"
          name="password"
          label="Password"
          type="password"
          autocomplete="current-password"
          form={state}
          value={password}
          onInput={setPassword}
        />
        <FormError form={state} />
        <button type="submit" class="primary" disabled={state.busy}>
          {state.busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p class="small">
        <a href="#/forgot">Forgot your password?</a> ·{' '}
        {signupOpen === false ? (
          <span data-signup-closed>{SIGNUP_CLOSED}</span>
        ) : (
          <>
            No account yet? <a href="#/signup">Create one</a>
          </>
        )}
      </p>
    </AuthPage>
  )
}

export function SignUp() {
  const { refresh } = useSession()
  const signupOpen = useSignupOpen()
  const [values, setValues] = useState({ name: '', email: '', password: '', org_name: '' })
  const set = (key: keyof typeof values) => (value: string) => setValues((v) => ({ ...v, [key]: value }))
  const { state, run } = useForm(['name', 'email', 'password', 'org_name'])
  const submit = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      await api('POST', '/auth/signup', values)
      await refresh()
      navigate('/databases')
    })
  }
  if (signupOpen === false) {
    return (
      <AuthPage title="Create your dbm account">
        <p class="notice" role="status" data-signup-closed>
          {SIGNUP_CLOSED}
        </p>
        <p class="small">
          Already have an account? <a href="#/signin">Sign in</a>
        </p>
      </AuthPage>
    )
  }
  return (
    <AuthPage title="Create your dbm account">
      <form class="form" onSubmit={submit}>
        <Field
          id="signup-name"
          name="name"
          label="Your name"
          autocomplete="name"
          form={state}
          value={values.name}
          onInput={set('name')}
        />
        <Field
          id="signup-email"
          name="email"
          label="Email"
          type="email"
          autocomplete="email"
          form={state}
          value={values.email}
          onInput={set('email')}
        />
        <Field
          id="signup-password"
          name="password"
          label="Password"
          type="password"
          autocomplete="new-password"
          minLength={MIN_PASSWORD}
          hint={`At least ${MIN_PASSWORD} characters.`}
          form={state}
          value={values.password}
          onInput={set('password')}
        />
        <Field
          id="signup-org"
          name="org_name"
          label="Organization name"
          autocomplete="organization"
          hint="Your team or company; its databases are shared by its members."
          form={state}
          value={values.org_name}
          onInput={set('org_name')}
        />
        <FormError form={state} />
        <button type="submit" class="primary" disabled={state.busy}>
          {state.busy ? 'Creating…' : 'Create account'}
        </button>
      </form>
      <p class="small">
        We send a link to verify your email address. Already have an account? <a href="#/signin">Sign in</a>
      </p>
    </AuthPage>
  )
}

/** Mails the verification link again (POST /auth/resend-verification; one mail a minute). */
export function ResendVerification({ email }: { email: string }) {
  const [state, setState] = useState<{ sending?: boolean; message?: string; error?: string }>({})
  const resend = async () => {
    setState({ sending: true })
    try {
      await api('POST', '/auth/resend-verification')
      setState({ message: `Sent: open the link in the mail to ${email}.` })
    } catch (e) {
      setState({
        error:
          e instanceof ApiError && e.status === 429
            ? `A mail was sent a moment ago: ${e.message.replace(/^too many requests; /, '')}.`
            : (e as Error).message,
      })
    }
  }
  return (
    <>
      <button type="button" onClick={resend} disabled={state.sending}>
        {state.sending ? 'Sending…' : 'Resend the verification mail'}
      </button>
      {state.message && (
        <span class="success" role="status">
          {state.message}
        </span>
      )}
      {state.error && (
        <span class="error" role="alert">
          {state.error}
        </span>
      )}
    </>
  )
}

export function VerifyEmail({ token }: { token: string }) {
  const { me, refresh } = useSession()
  const [state, setState] = useState<{ done?: boolean; error?: string }>({})
  const tried = useRef('')
  useEffect(() => {
    // A token works once: never send the same one twice (re-renders, a session refresh).
    if (!token || tried.current === token) return
    tried.current = token
    api('GET', `/auth/verify-email?token=${encodeURIComponent(token)}`).then(
      async () => {
        setState({ done: true })
        await refresh()
      },
      (e: Error) => setState({ error: e.message }),
    )
  }, [token])
  if (!token) {
    return (
      <AuthPage title="Verify your email">
        <p class="error" role="alert">
          This link has no token. Open the link from the verification mail as it is.
        </p>
      </AuthPage>
    )
  }
  return (
    <AuthPage title="Verify your email">
      {!state.done && !state.error && <Loading what="Verifying your email address" />}
      {state.done && (
        <>
          <p class="success" role="status">
            Your email address is verified. Your organization can now register any number of databases and keeps 30 days
            of data.
          </p>
          <p>{me ? <a href="#/databases">Go to your databases</a> : <a href="#/signin">Sign in</a>}</p>
        </>
      )}
      {state.error && (
        <>
          <p class="error" role="alert">
            {state.error === 'invalid or expired verification token'
              ? 'This verification link is invalid, already used or expired (links are valid for 7 days).'
              : state.error}
          </p>
          {me && !me.user.email_verified ? (
            <p class="row">
              <ResendVerification email={me.user.email} />
            </p>
          ) : me ? (
            <p>
              Your email address is already verified. <a href="#/databases">Go to your databases</a>
            </p>
          ) : (
            <p>
              <a href="#/signin">Sign in</a> to have a new link mailed to you.
            </p>
          )}
        </>
      )}
    </AuthPage>
  )
}

export function ForgotPassword() {
  const [email, setEmail] = useState('')
  const [sent, setSent] = useState('')
  const { state, run } = useForm(['email'])
  const submit = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      const res = await api('POST', '/auth/forgot-password', { email })
      setSent(res.message)
    })
  }
  return (
    <AuthPage title="Forgot your password">
      {sent ? (
        <>
          <p class="success" role="status">
            If an account exists for {email}, we mailed it a link to choose a new password. The link is valid for one
            hour.
          </p>
          <p>
            <a href="#/signin">Back to sign in</a>
          </p>
        </>
      ) : (
        <>
          <p class="muted">Enter your email address and we mail you a link to choose a new password.</p>
          <form class="form" onSubmit={submit}>
            <Field
              id="forgot-email"
              name="email"
              label="Email"
              type="email"
              autocomplete="email"
              form={state}
              value={email}
              onInput={setEmail}
            />
            <FormError form={state} />
            <button type="submit" class="primary" disabled={state.busy}>
              {state.busy ? 'Sending…' : 'Mail me a reset link'}
            </button>
          </form>
          <p class="small">
            <a href="#/signin">Back to sign in</a>
          </p>
        </>
      )}
    </AuthPage>
  )
}

export function ResetPassword({ token }: { token: string }) {
  const { refresh } = useSession()
  const [password, setPassword] = useState('')
  const [confirm, setConfirm] = useState('')
  const [done, setDone] = useState(false)
  const { state, run } = useForm(['password', 'confirm'])
  const submit = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      if (password !== confirm) throw new Error('confirm: the two passwords differ')
      await api('POST', '/auth/reset-password', { token, password })
      setDone(true)
      // The reset signed out every session of this user, this browser's included.
      await refresh()
    })
  }
  if (!token) {
    return (
      <AuthPage title="Reset your password">
        <p class="error" role="alert">
          This link has no token. Open the link from the reset mail as it is, or{' '}
          <a href="#/forgot">ask for a new one</a>.
        </p>
      </AuthPage>
    )
  }
  return (
    <AuthPage title="Reset your password">
      {done ? (
        <>
          <p class="success" role="status">
            Your password is changed, and every session was signed out.
          </p>
          <p>
            <a href="#/signin">Sign in with the new password</a>
          </p>
        </>
      ) : (
        <form class="form" onSubmit={submit}>
          <Field
            id="reset-password"
            name="password"
            label="New password"
            type="password"
            autocomplete="new-password"
            minLength={MIN_PASSWORD}
            hint={`At least ${MIN_PASSWORD} characters.`}
            form={state}
            value={password}
            onInput={setPassword}
          />
          <Field
            id="reset-confirm"
            name="confirm"
            label="Repeat it"
            type="password"
            autocomplete="new-password"
            minLength={MIN_PASSWORD}
            form={{
              ...state,
              fieldError: state.fieldError && {
                ...state.fieldError,
                message: state.fieldError.message.replace(/^confirm: /, ''),
              },
            }}
            value={confirm}
            onInput={setConfirm}
          />
          {state.error && (
            <p class="error" role="alert">
              {state.error === 'invalid or expired reset token' ? (
                <>
                  This reset link is invalid, already used or older than one hour.{' '}
                  <a href="#/forgot">Ask for a new one</a>.
                </>
              ) : (
                state.error
              )}
            </p>
          )}
          <button type="submit" class="primary" disabled={state.busy}>
            {state.busy ? 'Saving…' : 'Set the new password'}
          </button>
        </form>
      )}
    </AuthPage>
  )
}
