// The dashboard: one page served at `/` from assets compiled into the binary, hash routes, the session
// from the httpOnly cookies, System / Light / Dark themes. A session that ends while the page is open
// (signed out elsewhere, refresh expired) leads to the sign-in page, which returns to the page afterwards;
// a server that stops answering shows one banner while the pages keep what they showed and retry.
// Pages live in pages/, one module per area.
import { render } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { api, isUnreachable, mayHaveSession, onReachability, onSessionEnded } from './api.ts'
import { Loading, fmtClock, retryDelay, useEscape } from './components/ui.tsx'
import { ForgotPassword, ResendVerification, ResetPassword, SignIn, SignUp, VerifyEmail } from './pages/auth.tsx'
import { DatabaseLayout } from './pages/database.tsx'
import { DatabaseList } from './pages/databases.tsx'
import { AccountSettings } from './pages/account.tsx'
import { AgentSetup, ApiKeys } from './pages/settings.tsx'
import { AcceptInvite, OwnersOnly, isOwner } from './pages/members.tsx'
import { PUBLIC_PATHS as PUBLIC, currentRoute, match, navigate, safeNext, signInPath, useRoute } from './router.ts'
import { type Me, SessionContext, useSession } from './session.ts'
import { THEME_CHOICES, type ThemeChoice, applyInitialTheme, useTheme } from './theme.ts'

/** Pages a signed-in user has no use for: they go to the databases (or the page a sign-in returns to) instead. */
const SIGNED_OUT_ONLY = ['/', '/signin', '/signup', '/forgot']

/** The main navigation; `exact` items are current on their own path only (not on the pages under it). */
const NAV = [
  { path: '/databases', label: 'Databases' },
  { path: '/settings/api-keys', label: 'API keys' },
  { path: '/settings/agent', label: 'Agent setup' },
  { path: '/settings', label: 'Settings', exact: true },
]

function ThemePicker({ choice, choose }: { choice: ThemeChoice; choose(choice: ThemeChoice): void }) {
  return (
    <select
      class="theme-select ghost"
      aria-label="Theme"
      title="Theme: System follows your device"
      value={choice}
      onChange={(e) => choose((e.target as HTMLSelectElement).value as ThemeChoice)}
    >
      {THEME_CHOICES.map(([value, label]) => (
        <option key={value} value={value}>
          {label}
        </option>
      ))}
    </select>
  )
}

function Header({
  me,
  path,
  theme,
  chooseTheme,
  signOut,
}: {
  me: Me | null
  path: string
  theme: ThemeChoice
  chooseTheme(choice: ThemeChoice): void
  signOut(): void
}) {
  const [open, setOpen] = useState(false)
  const menuButton = useRef<HTMLButtonElement>(null)
  useEffect(() => setOpen(false), [path])
  // Esc folds the phone menu away again, back to its button.
  useEscape(open, () => {
    setOpen(false)
    menuButton.current?.focus()
  })
  return (
    <header class="top">
      <a class="brand" href={me ? '#/databases' : '#/signin'}>
        dbm
      </a>
      {me && (
        <button
          type="button"
          ref={menuButton}
          class="ghost menu"
          aria-expanded={open}
          aria-controls="main-nav"
          onClick={() => setOpen((o) => !o)}
        >
          Menu
        </button>
      )}
      {me && (
        <nav id="main-nav" aria-label="Main" class={open ? 'open' : undefined}>
          {NAV.map((item) => (
            <a
              key={item.path}
              href={`#${item.path}`}
              aria-current={
                path === item.path || (!item.exact && path.startsWith(`${item.path}/`)) ? 'page' : undefined
              }
            >
              {item.label}
            </a>
          ))}
        </nav>
      )}
      <span class="spacer" />
      <ThemePicker choice={theme} choose={chooseTheme} />
      {me && (
        <>
          <span class="muted who" title={`${me.user.email} · ${me.organization.name}`}>
            {me.user.email}
          </span>
          <button type="button" class="ghost" onClick={signOut}>
            Sign out
          </button>
        </>
      )}
    </header>
  )
}

/** Shown to a signed-in user whose email is not verified yet, with a button that mails the link again. */
function VerifyBanner({ me }: { me: Me }) {
  return (
    <div class="banner banner-warning" role="region" aria-label="Email verification">
      <p>
        <strong>Verify your email address</strong> with the link we mailed to {me.user.email}.{' '}
        {me.organization.verified
          ? 'Until then alert mails are not sent to you.'
          : 'Until then your organization can register one database, keeps 24 hours of data, and the doctor shows no fix commands.'}
      </p>
      <ResendVerification email={me.user.email} />
    </div>
  )
}

/** One banner while the server does not answer; the pages keep what they showed and retry by themselves. */
function Unreachable({ since }: { since: number }) {
  return (
    <div class="banner banner-warning" role="status" data-unreachable>
      <p>
        <strong>Cannot reach the dbm server — retrying.</strong> What the page shows is from before {fmtClock(since)}.
      </p>
    </div>
  )
}

/** The time the server stopped answering, or undefined while it answers. */
function useUnreachableSince(): number | undefined {
  const [since, setSince] = useState<number>()
  useEffect(() => onReachability((up) => setSince(up ? undefined : Date.now())), [])
  return since
}

/** Moves the focus to the page's main content heading: past the header, a database's breadcrumb and its tabs. */
function skipToContent() {
  const target =
    document.querySelector<HTMLElement>('[data-main-heading]') ??
    document.querySelector<HTMLElement>('main h1') ??
    document.querySelector('main')
  if (!target) return
  target.setAttribute('tabindex', '-1')
  target.focus()
  target.scrollIntoView({ block: 'nearest' })
}

/** The API keys page of a member: only owners manage keys. */
function MembersApiKeys() {
  return (
    <main>
      <div class="page-head">
        <h1>API keys</h1>
      </div>
      <OwnersOnly what="API keys" />
    </main>
  )
}

function Page({ path, query }: { path: string; query: URLSearchParams }) {
  const { me } = useSession()
  if (path === '/signin') return <SignIn next={safeNext(query.get('next'))} ended={query.get('ended') === '1'} />
  if (path === '/signup') return <SignUp />
  if (path === '/verify') return <VerifyEmail token={query.get('token') ?? ''} />
  if (path === '/forgot') return <ForgotPassword />
  if (path === '/reset') return <ResetPassword token={query.get('token') ?? ''} />
  if (path === '/accept-invite') return <AcceptInvite token={query.get('token') ?? ''} />
  if (path === '/databases') return <DatabaseList />
  if (path === '/settings/api-keys') return isOwner(me?.user.role) ? <ApiKeys /> : <MembersApiKeys />
  if (path === '/settings/agent') return <AgentSetup />
  if (path === '/settings') return <AccountSettings />
  const db =
    match('/databases/:id', path) ?? match('/databases/:id/:tab', path) ?? match('/databases/:id/:tab/:item', path)
  if (db) return <DatabaseLayout id={db.id!} tab={db.tab ?? 'overview'} item={db.item} query={query} />
  return (
    <main>
      <h1>Not found</h1>
      <p>
        There is no page at <code>{path}</code>. <a href="#/databases">Go to your databases</a>.
      </p>
    </main>
  )
}

function App() {
  const route = useRoute()
  const [theme, chooseTheme] = useTheme()
  const [me, setMe] = useState<Me | null | undefined>(undefined)
  const unreachableSince = useUnreachableSince()
  const refresh = async (attempt = 0): Promise<Me | null> => {
    let next: Me | null
    // Signed out (no session hint cookie): nothing to ask, so no request that must fail.
    if (!mayHaveSession()) {
      setMe(null)
      return null
    }
    try {
      const answer = await api('GET', '/auth/me')
      // An API key's /auth/me has no user: the dashboard needs a person's session.
      next = answer && 'user' in answer && answer.user ? answer : null
    } catch (e) {
      // A server that does not answer says nothing about the session: ask again.
      if (isUnreachable(e))
        return new Promise((resolve) => setTimeout(() => resolve(refresh(attempt + 1)), retryDelay(attempt + 1)))
      next = null
    }
    setMe(next)
    return next
  }
  useEffect(() => {
    void refresh()
  }, [])
  // A call refused for good (the refresh cookie gone or revoked): sign in again, then back to this page.
  useEffect(
    () =>
      onSessionEnded(() => {
        setMe(null)
        const now = currentRoute()
        if (!PUBLIC.includes(now.path)) navigate(signInPath(now, true))
      }),
    [],
  )
  const isPublic = PUBLIC.includes(route.path)
  useEffect(() => {
    // The live route, not this render's: a session-ended navigation may already be under way (its
    // hashchange not yet seen), and an effect run late (Preact runs it after paint, or before the next
    // render) must not send a signed-in user who already went on from /signin back to the list.
    const now = currentRoute()
    if (me === null && !PUBLIC.includes(now.path)) navigate(signInPath(now))
    if (me && SIGNED_OUT_ONLY.includes(now.path))
      navigate((now.path === '/signin' && safeNext(now.query.get('next'))) || '/databases')
  }, [me, route.path])
  const signOut = async () => {
    await api('POST', '/auth/logout').catch(() => {})
    setMe(null)
    navigate('/signin')
  }
  return (
    <SessionContext.Provider value={{ me: me ?? null, refresh: () => refresh() }}>
      {/* Keyboard users jump over the header, breadcrumb and tabs; a plain #anchor would change the hash route. */}
      <a
        class="skip"
        href="#"
        onClick={(e) => {
          e.preventDefault()
          skipToContent()
        }}
      >
        Skip to content
      </a>
      <Header me={me ?? null} path={route.path} theme={theme} chooseTheme={chooseTheme} signOut={signOut} />
      {unreachableSince !== undefined && <Unreachable since={unreachableSince} />}
      {me && !me.user.email_verified && route.path !== '/verify' && <VerifyBanner me={me} />}
      {me === undefined ? (
        <main>
          <Loading />
        </main>
      ) : me === null && !isPublic ? null : (
        <Page path={route.path} query={route.query} />
      )}
    </SessionContext.Provider>
  )
}

// The dashboard never runs inside another site's frame (clickjacking): Bun serves its static page without
// headers of ours, so it refuses here. (The session cookies are SameSite=Lax and are not sent to a
// cross-site frame either.)
if (window.top !== window.self) {
  document.body.textContent = 'dbm cannot be shown inside another page.'
} else {
  applyInitialTheme()
  render(<App />, document.getElementById('app')!)
}
