// Hash routes (`#/databases/<id>/queries`): the server serves one page at `/`, and links work from a
// bookmark or a mail. A route is a pattern with `:name` segments; the query string after `?` is parsed.
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
