// Why a database cannot be reached: the class of a failed ping or connection attempt, from the driver's
// error codes (postgres.js: SQLSTATE in `code`, Node's errno for sockets; @clickhouse/client: the
// server's numeric error code, Node's errno), looked for through wrapped errors (`cause`, an
// AggregateError's `errors`). The message travels to the server without passwords (redactSecrets, and
// the DSN's own password wherever it appears literally). connectionFailure() tells a failed connection
// attempt (refused, a wrong password, a name that does not resolve) from a query's own failure: whoever
// meets one (the ping, a collector, a sampler), the runner marks the database down at once.
import type { AvailabilityCause } from '../shared/wire.ts'
import { redactSecrets } from '../shared/redact.ts'

const BY_CODE: Record<string, AvailabilityCause> = {
  ECONNREFUSED: 'refused',
  ECONNRESET: 'refused',
  CONNECTION_CLOSED: 'refused',
  CONNECTION_ENDED: 'refused',
  CONNECTION_DESTROYED: 'refused',
  EHOSTUNREACH: 'timeout',
  ENETUNREACH: 'timeout',
  ETIMEDOUT: 'timeout',
  CONNECT_TIMEOUT: 'timeout',
  ENOTFOUND: 'name_resolution',
  EAI_AGAIN: 'name_resolution',
  EAI_NONAME: 'name_resolution',
  // PostgreSQL SQLSTATE: invalid_authorization_specification, invalid_password.
  '28000': 'authentication',
  '28P01': 'authentication',
  // too_many_connections; cannot_connect_now (starting, shutting down, in recovery) refuses too.
  '53300': 'too_many_connections',
  '57P03': 'refused',
  '57P01': 'refused',
  '57P02': 'refused',
  // insufficient_privilege; invalid_catalog_name (the DSN's database is gone) is a permission matter for the user.
  '42501': 'permission',
  '3D000': 'permission',
  // query_canceled: a ping past its statement_timeout.
  '57014': 'timeout',
  // ClickHouse: AUTHENTICATION_FAILED, UNKNOWN_USER, REQUIRED_PASSWORD, WRONG_PASSWORD.
  '516': 'authentication',
  '192': 'authentication',
  '194': 'authentication',
  '193': 'authentication',
  // ClickHouse: ACCESS_DENIED, NOT_ENOUGH_PRIVILEGES, UNKNOWN_DATABASE.
  '497': 'permission',
  '164': 'permission',
  '81': 'permission',
  // Bun's own socket errors.
  ConnectionRefused: 'refused',
  FailedToOpenSocket: 'refused',
  // ClickHouse: TOO_MANY_SIMULTANEOUS_QUERIES; TIMEOUT_EXCEEDED, SOCKET_TIMEOUT.
  '202': 'too_many_connections',
  '159': 'timeout',
  '209': 'timeout',
}

/** Node's TLS failures: ERR_TLS_*, ERR_SSL_*, and OpenSSL's certificate verdicts. */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/

function causeOfCode(code: unknown): AvailabilityCause | undefined {
  if (typeof code === 'number') code = String(code)
  if (typeof code !== 'string') return undefined
  const known = BY_CODE[code]
  if (known) return known
  if (TLS_CODE.test(code)) return 'tls'
  // SQLSTATE class 08: connection exceptions.
  if (/^08[0-9A-Z]{3}$/.test(code)) return 'refused'
  return undefined
}

/**
 * The class of `error`, from its code or a wrapped error's. Only an error that carries no code anywhere
 * is classed by its message: a code the table does not know (22023, an invalid setting) is `other`, however
 * its text reads ("statement_timeout").
 */
export function failureClass(error: unknown, depth = 0): AvailabilityCause {
  return findClass(error, depth) ?? (hasCode(error, depth) ? 'other' : messageClass(error))
}

function hasCode(error: unknown, depth: number): boolean {
  if (typeof error !== 'object' || error === null || depth > 8) return false
  const e = error as { code?: unknown; cause?: unknown; errors?: unknown }
  if ((typeof e.code === 'string' && e.code !== '') || typeof e.code === 'number') return true
  if (Array.isArray(e.errors) && e.errors.some((inner) => hasCode(inner, depth + 1))) return true
  return hasCode(e.cause, depth + 1)
}

function findClass(error: unknown, depth: number): AvailabilityCause | undefined {
  if (typeof error !== 'object' || error === null || depth > 8) return undefined
  const e = error as { code?: unknown; errno?: unknown; cause?: unknown; errors?: unknown }
  const own = causeOfCode(e.code)
  if (own) return own
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors) {
      const found = findClass(inner, depth + 1)
      if (found) return found
    }
  }
  return findClass(e.cause, depth + 1)
}

/**
 * Codes that say a connection attempt itself failed, not a query on a working connection: the server is
 * not listening or refuses new sessions, the name does not resolve, the host cannot be reached, TLS or
 * the login failed, the DSN's database is gone. A session ended under a query (57P01, ECONNRESET,
 * CONNECTION_CLOSED) is not one: the next query's connection attempt says what is wrong. Too many
 * connections is left out too: the agent's open connections may still work.
 */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ConnectionRefused',
  'FailedToOpenSocket',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'CONNECT_TIMEOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_NONAME',
  '28000',
  '28P01',
  '57P03',
  '3D000',
  '08001',
  '08004',
  '516',
  '192',
  '193',
  '194',
])

function hasConnectionCode(error: unknown, depth: number): boolean {
  if (typeof error !== 'object' || error === null || depth > 8) return false
  const e = error as { code?: unknown; cause?: unknown; errors?: unknown }
  const code = typeof e.code === 'number' ? String(e.code) : e.code
  if (typeof code === 'string' && (CONNECTION_CODES.has(code) || TLS_CODE.test(code))) return true
  if (Array.isArray(e.errors) && e.errors.some((inner) => hasConnectionCode(inner, depth + 1))) return true
  return hasConnectionCode(e.cause, depth + 1)
}

/** The class of `error` when it says a connection attempt failed (see CONNECTION_CODES); undefined for a query's own failure. */
export function connectionFailure(error: unknown): AvailabilityCause | undefined {
  if (hasConnectionCode(error, 0)) return failureClass(error)
  if (hasCode(error, 0)) return undefined
  // Code-less texts of a refused connection or a failed login (drivers that lose the code on the way).
  const cause = messageClass(error)
  return cause === 'refused' || cause === 'authentication' ? cause : undefined
}

/** A timeout that says nothing about why (the runner's own deadline, no code): an earlier definite failure tells more. */
export function isVagueTimeout(error: unknown): boolean {
  return !hasCode(error, 0) && messageClass(error) === 'timeout'
}

/** Errors without a code: the runner's own deadlines, and texts the drivers word so, as whole phrases. */
function messageClass(error: unknown): AvailabilityCause {
  const message = error instanceof Error ? error.message : String(error)
  if (/\btook longer than\b|\bwithin \d+ s\b|\btimed out\b|\btimeout\b/i.test(message)) return 'timeout'
  if (/\bECONNREFUSED\b|\bconnection refused\b|\bUnable to connect\b/i.test(message)) return 'refused'
  if (/\bcertificate\b|\bTLS\b|\bSSL\b/i.test(message)) return 'tls'
  if (/\bauthentication failed\b|\bpassword authentication\b|\bwrong password\b/i.test(message)) return 'authentication'
  return 'other'
}

/** The failure's message as the server may keep it: no passwords, at most 2,000 characters, no NUL. */
export function failureMessage(error: unknown, dsnPassword?: string): string {
  const e = error as { message?: unknown; code?: unknown }
  let message = typeof e?.message === 'string' && e.message !== '' ? e.message : String(error)
  if (typeof e?.code === 'string' && !message.includes(e.code)) message = `${e.code}: ${message}`
  message = redactSecrets(message)
  if (dsnPassword && dsnPassword.length >= 3) message = message.split(dsnPassword).join('***')
  message = message.replaceAll('\u0000', '')
  return message.length > 2000 ? `${message.slice(0, 1999)}…` : message
}

/** The password of a URL DSN (postgres://, clickhouse://, http(s)://), decoded; undefined without one. */
export function dsnPassword(dsn: string): string | undefined {
  try {
    const password = new URL(dsn).password
    return password === '' ? undefined : decodeURIComponent(password)
  } catch {
    return /password\s*=\s*'?([^'\s]+)/i.exec(dsn)?.[1]
  }
}
