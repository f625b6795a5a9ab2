// The dashboard: one page served at `/` from assets compiled into the binary, hash routes, the session
// from the httpOnly cookies, light and dark themes. Pages live in pages/, one module per area.
import { render } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { api } from './api.ts'
import { Loading, useEscape } from './components/ui.tsx'
import { ForgotPassword, ResendVerification, ResetPassword, SignIn, SignUp, VerifyEmail } from './pages/auth.tsx'
import { DatabaseLayout } from './pages/database.tsx'
import { DatabaseList } from './pages/databases.tsx'
import { AccountSettings } from './pages/account.tsx'
import { AgentSetup, ApiKeys } from './pages/settings.tsx'
import { match, navigate, useRoute } from './router.ts'
import { type Me, SessionContext } from './session.ts'

/** Pages anyone may see; every other page needs a session. */
const PUBLIC = ['/signin', '/signup', '/verify', '/forgot', '/reset']
/** Pages a signed-in user has no use for: they go to the databases instead. */
const SIGNED_OUT_ONLY = ['/', '/signin', '/signup', '/forgot']

type Theme = 'light' | 'dark'

function useTheme(): [Theme, () => void] {
  const initial = (localStorage.getItem('dbm-theme') as Theme | null) ?? (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light')
  const [theme, setTheme] = useState<Theme>(initial)
  useEffect(() => {
    document.documentElement.dataset.theme = theme
    localStorage.setItem('dbm-theme', theme)
  }, [theme])
  return [theme, () => setTheme((t) => (t === 'dark' ? 'light' : 'dark'))]
}

/** The main navigation; `exact` items are current on their own path only (not on the pages under it). */
const NAV = [
  { path: '/databases', label: 'Databases' },
  { path: '/settings/api-keys', label: 'API keys' },
  { path: '/settings/agent', label: 'Agent setup' },
  { path: '/settings', label: 'Settings', exact: true },
]

function Header({ me, path, theme, toggleTheme, signOut }: { me: Me | null; path: string; theme: Theme; toggleTheme(): void; signOut(): void }) {
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
        <button type="button" ref={menuButton} class="ghost menu" aria-expanded={open} aria-controls="main-nav" onClick={() => setOpen((o) => !o)}>
          Menu
        </button>
      )}
      {me && (
        <nav id="main-nav" aria-label="Main" class={open ? 'open' : undefined}>
          {NAV.map((item) => (
            <a key={item.path} href={`#${item.path}`} aria-current={path === item.path || (!item.exact && path.startsWith(`${item.path}/`)) ? 'page' : undefined}>
              {item.label}
            </a>
          ))}
        </nav>
      )}
      <span class="spacer" />
      <button type="button" class="ghost" onClick={toggleTheme} aria-label={`Switch to the ${theme === 'dark' ? 'light' : 'dark'} theme`}>
        {theme === 'dark' ? 'Light' : 'Dark'}
      </button>
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
        <strong>Verify your email address</strong> with the link we mailed to {me.user.email}. Until then your organization can register one
        database, keeps 24 hours of data, and the doctor shows no fix commands.
      </p>
      <ResendVerification email={me.user.email} />
    </div>
  )
}

function Page({ path, query }: { path: string; query: URLSearchParams }) {
  if (path === '/signin') return <SignIn />
  if (path === '/signup') return <SignUp />
  if (path === '/verify') return <VerifyEmail token={query.get('token') ?? ''} />
  if (path === '/forgot') return <ForgotPassword />
  if (path === '/reset') return <ResetPassword token={query.get('token') ?? ''} />
  if (path === '/databases') return <DatabaseList />
  if (path === '/settings/api-keys') return <ApiKeys />
  if (path === '/settings/agent') return <AgentSetup />
  if (path === '/settings') return <AccountSettings />
  const db = match('/databases/:id', path) ?? match('/databases/:id/:tab', path) ?? match('/databases/:id/:tab/:item', path)
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
  const [theme, toggleTheme] = useTheme()
  const [me, setMe] = useState<Me | null | undefined>(undefined)
  const refresh = async () => {
    let next: Me | null
    try {
      next = await api<Me>('GET', '/auth/me')
      // An API key's /auth/me has no user: the dashboard needs a person's session.
      if (!next?.user) next = null
    } catch {
      next = null
    }
    setMe(next)
    return next
  }
  useEffect(() => {
    void refresh()
  }, [])
  const isPublic = PUBLIC.includes(route.path)
  useEffect(() => {
    if (me === null && !isPublic) navigate('/signin')
    if (me && SIGNED_OUT_ONLY.includes(route.path)) navigate('/databases')
  }, [me, route.path])
  const signOut = async () => {
    await api('POST', '/auth/logout').catch(() => {})
    setMe(null)
    navigate('/signin')
  }
  return (
    <SessionContext.Provider value={{ me: me ?? null, refresh }}>
      {/* Keyboard users jump over the header and tabs; a plain #anchor would change the hash route. */}
      <a
        class="skip"
        href="#"
        onClick={(e) => {
          e.preventDefault()
          const main = document.querySelector('main')
          main?.setAttribute('tabindex', '-1')
          main?.focus()
        }}
      >
        Skip to content
      </a>
      <Header me={me ?? null} path={route.path} theme={theme} toggleTheme={toggleTheme} signOut={signOut} />
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
  render(<App />, document.getElementById('app')!)
}
