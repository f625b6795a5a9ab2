// The dashboard's calls to the API when the session ends or the server goes away: a 401 that the silent
// renewal cannot fix tells the listeners once and reads "Your session has ended"; a fetch that fails
// throws UnreachableError (not the browser's "Failed to fetch") and the next answer says the server is
// back. Also the page a sign-in returns to (in-app routes only) and the theme choice.
import { afterEach, describe, expect, test } from 'bun:test'
import {
  ApiError,
  SESSION_ENDED,
  UnreachableError,
  api,
  isUnreachable,
  onReachability,
  onSessionEnded,
} from '../../src/web/api.ts'
import { safeNext, signInPath } from '../../src/web/router.ts'
import { parseChoice, resolveTheme } from '../../src/web/theme.ts'

const realFetch = globalThis.fetch
afterEach(() => {
  globalThis.fetch = realFetch
})

type Answer = { status: number; body?: unknown } | 'network down'

/** Replaces fetch by one that answers `answers` in turn and records each call's path. */
function fakeFetch(answers: Answer[]): string[] {
  const calls: string[] = []
  globalThis.fetch = (async (input: string | URL | Request) => {
    calls.push(String(input))
    const next = answers.shift()
    if (next === undefined) throw new Error(`unexpected call ${String(input)}`)
    if (next === 'network down') throw new TypeError('Failed to fetch')
    return new Response(next.body === undefined ? null : JSON.stringify(next.body), {
      status: next.status,
      headers: { 'content-type': 'application/json' },
    })
  }) as typeof fetch
  return calls
}

describe('session end', () => {
  test('a 401 the refresh cannot fix ends the session: listeners hear it, the error says so', async () => {
    const calls = fakeFetch([
      { status: 401, body: { error: 'authentication required: send X-API-Key…' } },
      { status: 401, body: { error: 'invalid or expired refresh token' } },
    ])
    let ended = 0
    const off = onSessionEnded(() => ended++)
    const error = await api('GET', '/databases').catch((e) => e)
    off()
    expect(calls).toEqual(['/api/v1/databases', '/api/v1/auth/refresh'])
    expect(error).toBeInstanceOf(ApiError)
    expect(error.status).toBe(401)
    expect(error.message).toBe(SESSION_ENDED)
    expect(ended).toBe(1)
  })

  test('a refresh without its cookie (400) ends it too', async () => {
    fakeFetch([{ status: 401 }, { status: 400, body: { error: 'refresh_token is required' } }])
    let ended = 0
    const off = onSessionEnded(() => ended++)
    await api('GET', '/databases').catch(() => undefined)
    off()
    expect(ended).toBe(1)
  })

  test('a renewed session repeats the call and ends nothing', async () => {
    const calls = fakeFetch([{ status: 401 }, { status: 200, body: {} }, { status: 200, body: [{ id: 'a' }] }])
    let ended = 0
    const off = onSessionEnded(() => ended++)
    // The fake answers are not the route's schema: compared as plain values.
    expect((await api('GET', '/databases')) as unknown).toEqual([{ id: 'a' }])
    off()
    expect(calls).toEqual(['/api/v1/databases', '/api/v1/auth/refresh', '/api/v1/databases'])
    expect(ended).toBe(0)
  })

  test("the start-up /auth/me is renewed too, but its 401 is the caller's answer, not a session end", async () => {
    const calls = fakeFetch([{ status: 401, body: { error: 'authentication required' } }, { status: 401 }])
    let ended = 0
    const off = onSessionEnded(() => ended++)
    const error = await api('GET', '/auth/me').catch((e) => e)
    off()
    expect(calls).toEqual(['/api/v1/auth/me', '/api/v1/auth/refresh'])
    expect(error.status).toBe(401)
    expect(ended).toBe(0)
  })

  test("a wrong password's 401 is an answer: no renewal", async () => {
    const calls = fakeFetch([{ status: 401, body: { error: 'invalid email or password' } }])
    const error = await api('POST', '/auth/login', { email: 'a@b.c', password: 'x' }).catch((e) => e)
    expect(calls).toEqual(['/api/v1/auth/login'])
    expect(error.message).toBe('invalid email or password')
  })
})

describe('server unreachable', () => {
  test('a failed fetch throws UnreachableError with a message for people; the next answer says the server is back', async () => {
    fakeFetch(['network down', { status: 200, body: { ok: true } }])
    const seen: boolean[] = []
    const off = onReachability((up) => seen.push(up))
    const error = await api('GET', '/databases').catch((e) => e)
    expect(error).toBeInstanceOf(UnreachableError)
    expect(isUnreachable(error)).toBe(true)
    expect(error.message).toBe('Cannot reach the dbm server — retrying')
    expect((await api('GET', '/databases')) as unknown).toEqual({ ok: true })
    off()
    expect(seen).toEqual([false, true])
  })

  test("a proxy's 502 without JSON is the server being away, an API error is not", async () => {
    globalThis.fetch = (async () =>
      new Response('<html>Bad Gateway</html>', {
        status: 502,
        headers: { 'content-type': 'text/html' },
      })) as unknown as typeof fetch
    expect(isUnreachable(await api('GET', '/databases').catch((e) => e))).toBe(true)
    fakeFetch([{ status: 500, body: { error: 'internal error' } }])
    const error = await api('GET', '/databases').catch((e) => e)
    expect(isUnreachable(error)).toBe(false)
    expect(error.message).toBe('internal error')
  })

  test('a renewal that cannot reach the server does not end the session', async () => {
    fakeFetch([{ status: 401 }, 'network down'])
    let ended = 0
    const off = onSessionEnded(() => ended++)
    const error = await api('GET', '/databases').catch((e) => e)
    off()
    expect(isUnreachable(error)).toBe(true)
    expect(ended).toBe(0)
  })
})

describe('the page a sign-in returns to', () => {
  test('pages of the app, with their query', () => {
    expect(safeNext('/databases')).toBe('/databases')
    expect(safeNext('/databases/7/queries?range=24h&q=orders')).toBe('/databases/7/queries?range=24h&q=orders')
    expect(safeNext('/settings/api-keys')).toBe('/settings/api-keys')
  })

  test('nothing else: sign-in and token pages, other sites, odd paths', () => {
    for (const bad of [
      null,
      '',
      '/',
      '/signin',
      '/verify?token=abc',
      '/reset?token=abc',
      '//evil.example',
      'https://evil.example/',
      'databases',
      '/databasesx',
      '/databases\\evil',
      '/databases/ x',
      '/javascript:alert(1)',
    ]) {
      expect(safeNext(bad)).toBeUndefined()
    }
    expect(safeNext(`/databases/${'a'.repeat(3000)}`)).toBeUndefined()
  })

  test('the sign-in route carries the page, and says when the session ended', () => {
    const route = { path: '/databases/7/queries', query: new URLSearchParams('range=24h') }
    const path = signInPath(route, true)
    const [p, search] = path.split('?') as [string, string]
    expect(p).toBe('/signin')
    const query = new URLSearchParams(search)
    expect(query.get('next')).toBe('/databases/7/queries?range=24h')
    expect(query.get('ended')).toBe('1')
    expect(signInPath({ path: '/', query: new URLSearchParams() })).toBe('/signin')
    expect(signInPath({ path: '/verify', query: new URLSearchParams('token=x') })).toBe('/signin')
  })
})

describe('theme', () => {
  test('System unless Light or Dark was chosen; System follows the device', () => {
    expect(parseChoice(null)).toBe('system')
    expect(parseChoice('bogus')).toBe('system')
    expect(parseChoice('dark')).toBe('dark')
    expect(resolveTheme('system', true)).toBe('dark')
    expect(resolveTheme('system', false)).toBe('light')
    expect(resolveTheme('light', true)).toBe('light')
    expect(resolveTheme('dark', false)).toBe('dark')
  })
})
