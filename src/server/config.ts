// `dbm serve` settings: flag first, then environment, then default (DECISIONS.md). Bad values are
// usage errors (exit 2) whose one-line message names the flag or variable.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type LogLevel, logLevels } from '../shared/log.ts'

export class UsageError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'UsageError'
  }
}

export const signupModes = ['open', 'closed'] as const
/** `local`: `dbm local`'s server (never from DBM_SIGNUP): no signups, and one sign-in link printed by the process. */
export type SignupMode = (typeof signupModes)[number] | 'local'

export interface ServeConfig {
  hostname: string
  port: number
  dataDir: string
  databaseUrl?: string
  publicUrl: string
  jwtSecret?: string
  smtpUrl?: string
  smtpFrom: string
  trustProxy: boolean
  logLevel: LogLevel
  retentionDays: number
  /** DBM_SIGNUP: open (anyone may sign up) or closed (only the first account, on an empty store). */
  signup: SignupMode
  /** DBM_WEBHOOK_ALLOW_PRIVATE: webhooks may go to loopback, private and other internal addresses. */
  webhookAllowPrivate: boolean
  /**
   * DBM_METRICS_TOKEN (or the content of DBM_METRICS_TOKEN_FILE): the bearer token of GET /metrics'
   * server-wide view; unset: that view is off (organizations' keys still read their own figures).
   */
  metricsToken?: string
}

/** Parses `host:port`, `:port` or `[v6]:port`. */
export function parseListen(value: string, source: string): { hostname: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value)
  const port = m ? Number(m[3]) : Number.NaN
  if (!m || !(port >= 0 && port <= 65535)) {
    throw new UsageError(`${source}: expected host:port (for example 0.0.0.0:8080 or :8080), got "${value}"`)
  }
  return { hostname: m[1] ?? (m[2] || '0.0.0.0'), port }
}

/** Whether a listen address stays on this machine: 127.0.0.0/8, ::1, localhost (0.0.0.0, :: and any other address reach the network). */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
}

/**
 * The warning `dbm serve` logs after its start line when anyone may sign up on an address that reaches
 * the network (any of `hostnames` not loopback); undefined otherwise.
 */
export function openSignupWarning(signup: SignupMode, hostnames: readonly string[]): string | undefined {
  if (signup !== 'open' || hostnames.every(isLoopbackHost)) return undefined
  return 'signup is open on an address beyond this machine: anyone who reaches it can create an account; set DBM_SIGNUP=closed once yours exists'
}

function parseBool(value: string, source: string): boolean {
  if (/^(1|true|yes|on)$/i.test(value)) return true
  if (/^(0|false|no|off|)$/i.test(value)) return false
  throw new UsageError(`${source}: expected true or false, got "${value}"`)
}

function dataDir([value, source]: [string | undefined, string]): string {
  if (value === undefined) return './dbm-data'
  if (value.trim() === '') throw new UsageError(`${source}: expected a directory path`)
  return value
}

/** The shortest DBM_METRICS_TOKEN accepted: as long as DBM_JWT_SECRET's minimum, too long to guess. */
export const METRICS_TOKEN_MIN_LENGTH = 32

/**
 * DBM_METRICS_TOKEN, or the content of the file DBM_METRICS_TOKEN_FILE names (one final line break ignored) (a Kubernetes Secret
 * mounted as a file); not both. At least METRICS_TOKEN_MIN_LENGTH printable ASCII characters without
 * spaces (what an `Authorization: Bearer` header carries as it is). Read once at start-up.
 */
function metricsToken(env: Record<string, string | undefined>): string | undefined {
  const direct = env.DBM_METRICS_TOKEN || undefined
  const file = env.DBM_METRICS_TOKEN_FILE || undefined
  if (direct !== undefined && file !== undefined)
    throw new UsageError('DBM_METRICS_TOKEN and DBM_METRICS_TOKEN_FILE: set one of them, not both')
  let token = direct
  let source = 'DBM_METRICS_TOKEN'
  if (file !== undefined) {
    source = 'DBM_METRICS_TOKEN_FILE'
    try {
      token = readFileSync(file, 'utf8').replace(/\r?\n$/, '')
    } catch (e) {
      throw new UsageError(
        `DBM_METRICS_TOKEN_FILE: cannot read ${JSON.stringify(file)} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
      )
    }
  }
  if (token === undefined) return undefined
  if (!/^[\x21-\x7e]*$/.test(token))
    throw new UsageError(`${source}: the token must be printable ASCII without spaces or line breaks`)
  if (token.length < METRICS_TOKEN_MIN_LENGTH)
    throw new UsageError(
      `${source}: the token must be at least ${METRICS_TOKEN_MIN_LENGTH} characters (for example: openssl rand -hex 32)`,
    )
  return token
}

/** True for a postgres:// or postgresql:// URL (the PostgreSQL store). */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url)
}

/** Where `dbm serve` listens when neither --listen nor DBM_LISTEN says: this machine only. */
export const DEFAULT_LISTEN = '127.0.0.1:8080'

export function resolveServeConfig(
  flags: Record<string, string>,
  env: Record<string, string | undefined>,
): ServeConfig {
  const pick = (flag: string, variable: string): [string | undefined, string] =>
    flags[flag] !== undefined ? [flags[flag], `--${flag}`] : [env[variable] || undefined, variable]

  const [listenValue, listenSource] = pick('listen', 'DBM_LISTEN')
  // Loopback until told otherwise (issue 26): signup is open by default, so the port reaches the network
  // only when the operator says so (--listen 0.0.0.0:8080), having decided who may sign up.
  const { hostname, port } = parseListen(listenValue ?? DEFAULT_LISTEN, listenSource)

  const [databaseUrl, urlSource] = pick('database-url', 'DBM_DATABASE_URL')
  if (databaseUrl !== undefined && !isPostgresUrl(databaseUrl)) {
    throw new UsageError(`${urlSource}: expected a postgres:// URL (leave it unset for embedded SQLite)`)
  }

  const [publicUrlValue, publicSource] = pick('public-url', 'DBM_PUBLIC_URL')
  const publicUrl = (publicUrlValue ?? 'http://localhost:8080').replace(/\/+$/, '')
  if (!/^https?:\/\/[^/]+/.test(publicUrl)) throw new UsageError(`${publicSource}: expected an http:// or https:// URL`)

  const [levelValue, levelSource] = pick('log-level', 'DBM_LOG_LEVEL')
  const logLevel = (levelValue ?? 'info') as LogLevel
  if (!logLevels.includes(logLevel)) throw new UsageError(`${levelSource}: expected one of ${logLevels.join(', ')}`)

  const jwtSecret = env.DBM_JWT_SECRET || undefined
  if (jwtSecret !== undefined && jwtSecret.length < 32)
    throw new UsageError('DBM_JWT_SECRET: must be at least 32 characters')

  const retention = env.DBM_RETENTION_DAYS ?? '30'
  const retentionDays = Number(retention)
  if (!Number.isInteger(retentionDays) || retentionDays < 1)
    throw new UsageError('DBM_RETENTION_DAYS: expected a whole number of days ≥ 1')

  const signup = (env.DBM_SIGNUP || 'open') as (typeof signupModes)[number]
  if (!signupModes.includes(signup))
    throw new UsageError(`DBM_SIGNUP: expected open or closed, got "${env.DBM_SIGNUP}"`)

  return {
    hostname,
    port,
    dataDir: dataDir(pick('data-dir', 'DBM_DATA_DIR')),
    databaseUrl,
    publicUrl,
    jwtSecret,
    smtpUrl: env.DBM_SMTP_URL || undefined,
    smtpFrom: env.DBM_SMTP_FROM || 'dbm <dbm@localhost>',
    trustProxy: parseBool(env.DBM_TRUST_PROXY ?? '', 'DBM_TRUST_PROXY'),
    logLevel,
    retentionDays,
    signup,
    webhookAllowPrivate: parseBool(env.DBM_WEBHOOK_ALLOW_PRIVATE ?? '', 'DBM_WEBHOOK_ALLOW_PRIVATE'),
    metricsToken: metricsToken(env),
  }
}

/** DBM_JWT_SECRET when set; else the secret generated once into the data dir with mode 0600. */
export function loadJwtSecret(config: Pick<ServeConfig, 'jwtSecret' | 'dataDir'>): string {
  if (config.jwtSecret) return config.jwtSecret
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const file = join(config.dataDir, 'jwt-secret')
  if (existsSync(file)) {
    const stored = readFileSync(file, 'utf8').trim()
    if (stored.length < 32) {
      throw new Error(
        `${file}: the stored JWT secret must be at least 32 characters; delete the file to generate a new one (signs everyone out) or set DBM_JWT_SECRET`,
      )
    }
    return stored
  }
  const secret = Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url')
  writeFileSync(file, `${secret}\n`, { mode: 0o600, flag: 'wx' })
  chmodSync(file, 0o600)
  return secret
}
