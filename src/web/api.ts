// The dashboard's one way to call the API: same-origin fetches that carry the httpOnly session
// cookies. An expired access token is renewed once through POST /auth/refresh (the refresh cookie)
// and the call repeated, so a signed-in user never sees the 15-minute token lifetime.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

const BASE = '/api/v1'

let refreshing: Promise<boolean> | undefined

/** Renews the session from the refresh cookie; concurrent callers share one attempt. */
function refreshSession(): Promise<boolean> {
  refreshing ??= fetch(`${BASE}/auth/refresh`, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: '{}' })
    .then((r) => r.ok)
    .catch(() => false)
    .finally(() => {
      refreshing = undefined
    })
  return refreshing
}

async function send(method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(BASE + path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
}

/** Calls `method path` under /api/v1 and returns the parsed JSON (undefined for 204); throws ApiError with the server's message. */
export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  let res = await send(method, path, body)
  if (res.status === 401 && !path.startsWith('/auth/') && (await refreshSession())) res = await send(method, path, body)
  if (res.status === 204) return undefined as T
  const text = await res.text()
  let parsed: any
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  if (!res.ok) throw new ApiError(res.status, parsed?.error ?? `${res.status} ${res.statusText}`)
  return parsed as T
}

export const get = <T = any>(path: string) => api<T>('GET', path)
