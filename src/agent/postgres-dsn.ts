// A PostgreSQL DSN as the agent connects with it. libpq reads a Unix-domain socket directory from the
// host (percent-encoded: postgres://me@%2Fvar%2Frun%2Fpostgresql/app) or from a `host` parameter
// (postgres:///app?host=/var/run/postgresql); postgres.js takes neither form from the URL (it looks the
// encoded host up in DNS, and would send `host` to the server as a setting), but connects to a socket
// when its `host` option is a directory. So the socket is taken out of the URL and given as that option,
// and libpq's other parameters of the URL form (host, port, user, dbname, password), which postgres.js
// would send to the server as settings, are moved into the URL.
// Every query parameter is checked before the agent starts (postgresDsnProblem): postgres.js takes an
// unknown one as a server setting (the server then refuses every connection, retried forever), reads a
// misspelled sslmode as "verify the certificate", and lets a DSN override the agent's own timeouts; so
// only the libpq parameters the agent honours are accepted, each with its values.

/** sslmode as libpq names it (postgres.js: require, allow and prefer do not verify the certificate; verify-ca verifies the host too). */
const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full']
const TARGET_SESSION_ATTRS = ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby']
/** The query parameters the agent reads, in the order its messages name them. */
export const POSTGRES_DSN_PARAMETERS = [
  'sslmode',
  'sslrootcert',
  'sslnegotiation',
  'connect_timeout',
  'target_session_attrs',
  'options',
  'host',
  'port',
  'user',
  'dbname',
  'password',
]
/** libpq's client-certificate parameters, which postgres.js does not take from a URL. */
const CLIENT_CERTIFICATE = ['sslcert', 'sslkey', 'sslpassword', 'sslcrl', 'sslcrldir', 'sslcertmode']

/** Where postgres.js should connect for `dsn`: the URL to give it, and the socket directory, if any. */
export function postgresConnection(dsn: string): { url: string; socket?: string } {
  let url: URL
  try {
    url = new URL(dsn)
  } catch {
    return { url: dsn }
  }
  const params = url.searchParams
  const param = params.get('host')
  const host = safeDecode(url.hostname)
  const socket = param?.startsWith('/') ? param : host.startsWith('/') ? host : undefined
  const moved =
    ['host', 'port', 'user', 'dbname', 'password'].some((k) => params.has(k)) ||
    params.get('target_session_attrs') === 'any'
  if (socket === undefined && !moved) return { url: dsn }
  if (socket !== undefined) url.hostname = 'localhost'
  else if (param !== null && param !== '') url.hostname = param
  // A URL without a host holds no port or user info: libpq's default host, as postgres.js's without PGHOST.
  else if (url.hostname === '' && ['port', 'user', 'password'].some((k) => params.has(k))) url.hostname = 'localhost'
  const port = params.get('port')
  if (port !== null && /^\d{1,5}$/.test(port)) url.port = port
  const user = params.get('user')
  if (user !== null && url.username === '') url.username = encodeURIComponent(user)
  const password = params.get('password')
  if (password !== null && url.password === '') url.password = encodeURIComponent(password)
  const dbname = params.get('dbname')
  if (dbname !== null && (url.pathname === '' || url.pathname === '/')) url.pathname = `/${encodeURIComponent(dbname)}`
  for (const k of ['host', 'port', 'user', 'dbname', 'password']) params.delete(k)
  // libpq's default, which postgres.js does not know (it refuses it): the same as leaving it out.
  if (params.get('target_session_attrs') === 'any') params.delete('target_session_attrs')
  return socket === undefined ? { url: url.toString() } : { url: url.toString(), socket }
}

/**
 * What is wrong with a PostgreSQL DSN's query parameters, as one line (`sslmode: expected one of …`), or
 * undefined. Never quotes a password; other values are cut to 40 characters.
 */
export function postgresDsnProblem(url: URL): string | undefined {
  const seen = new Set<string>()
  for (const [key, value] of url.searchParams) {
    const name = quote(key)
    if (seen.has(key)) return `parameter ${name} is given twice`
    seen.add(key)
    const problem = parameterProblem(key, value, url)
    if (problem !== undefined) return problem
  }
  const params = url.searchParams
  if (
    params.get('sslnegotiation') === 'direct' &&
    !['require', 'verify-ca', 'verify-full'].includes(params.get('sslmode') ?? '')
  ) {
    return 'sslnegotiation=direct needs sslmode=require, verify-ca or verify-full'
  }
  return undefined
}

function parameterProblem(key: string, value: string, url: URL): string | undefined {
  const oneOf = (values: string[]) =>
    values.includes(value) ? undefined : `${key}: expected one of ${values.join(', ')}, got ${quote(value)}`
  switch (key) {
    case 'sslmode':
      return oneOf(SSL_MODES)
    case 'sslrootcert':
      return value === 'system'
        ? undefined
        : `sslrootcert: only sslrootcert=system (the system's certificate authorities) is supported, got ${quote(value)}`
    case 'sslnegotiation':
      return oneOf(['postgres', 'direct'])
    case 'target_session_attrs':
      return oneOf(TARGET_SESSION_ATTRS)
    case 'connect_timeout':
      return /^\d{1,6}$/.test(value)
        ? undefined
        : `connect_timeout: expected a whole number of seconds, got ${quote(value)}`
    case 'options':
      return optionsProblem(value)
    case 'host':
      if (value === '') return 'host: expected a host name or a socket directory'
      if (value.includes(',')) return 'host: expected one host: the agent watches a single server'
      return !value.startsWith('/') && url.hostname !== ''
        ? 'host: the URL names its host already; give it once'
        : undefined
    case 'port':
      if (!/^\d{1,5}$/.test(value) || Number(value) < 1 || Number(value) > 65535)
        return `port: expected a port number from 1 to 65535, got ${quote(value)}`
      return url.port !== '' ? 'port: the URL names its port already; give it once' : undefined
    case 'user':
      if (value === '') return 'user: expected a role name'
      return url.username !== '' ? 'user: the URL names its user already; give it once' : undefined
    case 'dbname':
      if (value === '') return 'dbname: expected a database name'
      return url.pathname !== '' && url.pathname !== '/'
        ? 'dbname: the URL names its database already; give it once'
        : undefined
    case 'password':
      return url.password !== '' ? 'password: the URL holds a password already; give it once' : undefined
    case 'application_name':
      return 'application_name: the agent names its sessions dbm-agent (its log reader and the activity pages tell its own sessions apart by it); leave it out'
  }
  if (CLIENT_CERTIFICATE.includes(key))
    return `${key}: client certificates are not supported by the agent; use a password (in the DSN, PGPASSWORD or ~/.pgpass)`
  return `unknown parameter ${quote(key)} (the agent reads ${POSTGRES_DSN_PARAMETERS.join(', ')}; server settings go in options=-c name=value)`
}

/** libpq's `options`: server settings as `-c name=value` or `--name=value`, separated by spaces (`\ ` a literal space). */
function optionsProblem(value: string): string | undefined {
  const tokens: string[] = []
  let current = ''
  let escaped = false
  for (const ch of value) {
    if (escaped) {
      current += ch
      escaped = false
    } else if (ch === '\\') escaped = true
    else if (/\s/.test(ch)) {
      if (current !== '') tokens.push(current)
      current = ''
    } else current += ch
  }
  if (current !== '') tokens.push(current)
  const expected = 'options: expected server settings as -c name=value or --name=value'
  if (tokens.length === 0) return expected
  for (let i = 0; i < tokens.length; i++) {
    let setting = tokens[i]!
    if (setting === '-c') {
      const next = tokens[++i]
      if (next === undefined) return `${expected} (-c without a setting)`
      setting = next
    } else if (setting.startsWith('-c')) setting = setting.slice(2)
    else if (setting.startsWith('--')) setting = setting.slice(2)
    else return `${expected}, got ${quote(setting)}`
    const name = setting.split('=', 1)[0]!
    if (!setting.includes('=') || !/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(name)) return `${expected}, got ${quote(setting)}`
  }
  return undefined
}

/** A value for a message: JSON-quoted, at most 40 characters. */
function quote(value: string): string {
  return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)
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
