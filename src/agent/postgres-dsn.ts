// A PostgreSQL DSN as the agent connects with it. libpq reads a Unix-domain socket directory from the
// host (percent-encoded: postgres://me@%2Fvar%2Frun%2Fpostgresql/app) or from a `host` parameter
// (postgres:///app?host=/var/run/postgresql); postgres.js takes neither form from the URL (it looks the
// encoded host up in DNS, and would send `host` to the server as a setting), but connects to a socket
// when its `host` option is a directory. So the socket is taken out of the URL and given as that option
// (with the parameter form's `port` and `user`, which postgres.js would also send as settings).

/** Where postgres.js should connect for `dsn`: the URL to give it, and the socket directory, if any. */
export function postgresConnection(dsn: string): { url: string; socket?: string } {
  let url: URL
  try {
    url = new URL(dsn)
  } catch {
    return { url: dsn }
  }
  const param = url.searchParams.get('host')
  const host = safeDecode(url.hostname)
  const socket = param?.startsWith('/') ? param : host.startsWith('/') ? host : undefined
  if (socket === undefined) return { url: dsn }
  url.searchParams.delete('host')
  url.hostname = 'localhost'
  // libpq's other connection parameters of that form, which postgres.js would send to the server as settings.
  const port = url.searchParams.get('port')
  if (port !== null && /^\d{1,5}$/.test(port)) url.port = port
  const user = url.searchParams.get('user')
  if (user !== null && url.username === '') url.username = encodeURIComponent(user)
  url.searchParams.delete('port')
  url.searchParams.delete('user')
  return { url: url.toString(), socket }
}

/** The host a DSN names for messages and names: its socket directory, else its host name, else localhost. */
export function postgresHost(dsn: string): string {
  const { url, socket } = postgresConnection(dsn)
  if (socket !== undefined) return socket
  try {
    return safeDecode(new URL(url).hostname) || 'localhost'
  } catch {
    return 'localhost'
  }
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value)
  } catch {
    return value
  }
}
