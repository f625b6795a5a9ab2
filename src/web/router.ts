// Hash routes (`#/databases/<id>/queries`): the server serves one page at `/`, and links work from a
// bookmark or a mail. A route is a pattern with `:name` segments; the query string after `?` is parsed.
// replaceRoute() changes the route without a history entry (a filter typed key by key), and safeNext()
// vets the page a sign-in returns to.
import { useEffect, useState } from 'preact/hooks'

export interface Route {
  path: string
  query: URLSearchParams
}

function current(): Route {
  const hash = decodeURI(location.hash.replace(/^#/, '')) || '/'
  const [path, search] = hash.split('?', 2) as [string, string | undefined]
  return { path: path || '/', query: new URLSearchParams(search ?? '') }
}

/** The route shown now. */
export const currentRoute = current

export function useRoute(): Route {
  const [route, setRoute] = useState(current)
  useEffect(() => {
    const onChange = () => setRoute(current())
    addEventListener('hashchange', onChange)
    return () => removeEventListener('hashchange', onChange)
  }, [])
  return route
}

export function navigate(path: string): void {
  location.hash = path
}

/**
 * Replaces the route by `path` (with its query) without adding a history entry, and tells useRoute():
 * replaceState fires no hashchange, so one is dispatched.
 */
export function replaceRoute(path: string): void {
  const url = `${location.pathname}${location.search}#${path}`
  if (`#${path}` === location.hash) return
  history.replaceState(history.state, '', url)
  dispatchEvent(new HashChangeEvent('hashchange'))
}

/** The pages anyone may see (sign-in, sign-up, verification, password reset, an invitation); every other page needs a session. */
export const PUBLIC_PATHS = ['/signin', '/signup', '/verify', '/forgot', '/reset', '/accept-invite']

/** The areas a sign-in may return to: the app's own pages, never a sign-in, a token link or another site. */
const RETURN_AREAS = /^\/(databases|settings)(\/|\?|$)/

/** `next` when it is a route of the app (e.g. "/databases/7/queries?range=24h"), else undefined. */
export function safeNext(next: string | null | undefined): string | undefined {
  if (!next || next.length > 2048 || !RETURN_AREAS.test(next)) return undefined
  // A route as this page writes it has its query encoded: no backslashes, spaces or control characters.
  if (/[\\\s\u0000-\u001f]/.test(next)) return undefined
  return next
}

/** The sign-in page that returns to `route` afterwards (when it is a page of the app). */
export function signInPath(route: Route, ended = false): string {
  const search = route.query.toString()
  const next = safeNext(search ? `${route.path}?${search}` : route.path)
  const query = new URLSearchParams()
  if (next) query.set('next', next)
  if (ended) query.set('ended', '1')
  const q = query.toString()
  return q ? `/signin?${q}` : '/signin'
}

/** The `:name` values of `path` when it matches `pattern`, else undefined. */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split('/')
  const got = path.split('/')
  if (want.length !== got.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!
    if (w.startsWith(':')) params[w.slice(1)] = decodeURIComponent(got[i]!)
    else if (w !== got[i]) return undefined
  }
  return params
}

/** `#/path` for links. */
export const href = (path: string) => `#${path}`
