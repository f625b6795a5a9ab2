// The agent's YAML config parsed into a validated AgentConfig (spec "Agent configuration", DECISIONS.md
// "Agent config additions"): defaults filled in, unknown keys rejected by name, and every problem
// reported as one ConfigError line that starts with where it is and never shows a password or API key.
// Also: Go duration syntax, engine detection from the DSN, the ClickHouse DSN → HTTP(S) mapping, and
// where the config file is looked for.
import { readFileSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { isAlias, isMap, isScalar, isSeq, parseDocument, type Document } from 'yaml'
import { ACTION_KINDS, type ActionKind } from '../shared/action-kinds.ts'
import { collectorsFor, type EngineName } from '../shared/collectors.ts'
import { DEFAULT_POLL_INTERVAL_SECONDS, MAX_POLL_INTERVAL_SECONDS, NAME_MAX_CHARS } from '../shared/database-limits.ts'
import { LOG_TEXT_MODES, type LogTextMode } from '../shared/log-kinds.ts'
import { redactSecrets } from '../shared/redact.ts'
import { tagLimits } from '../shared/wire.ts'
import { postgresDsnProblem } from './postgres-dsn.ts'

/** A config problem; the message is the one line the agent prints. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}

export interface DatabaseConfig {
  name: string
  engine: EngineName
  dsn: string
  pollIntervalMs: number
  /**
   * object_stats_interval: how often the per-object statistics (the collectors marked `cadence:
   * 'object_stats'`: tables, indexes, bloat, column_stats) are read, in ms; at most the poll interval
   * (0 included) = every cycle. PostgreSQL only; default 60 s (DEFAULT_OBJECT_STATS_INTERVAL_MS).
   */
  objectStatsIntervalMs: number
  /** Absent = every collector of the engine. */
  enabledCollectors?: string[]
  /** PostgreSQL only: directory of logs holding auto_explain JSON plans. */
  pgLogDir?: string
  /**
   * PostgreSQL only: roles besides superusers and the agent's own whose tables, views, types and functions
   * may run code with the agent's rights when plans are sampled (explain_trusted_roles); absent = none.
   */
  explainTrustedRoles?: string[]
  /**
   * PostgreSQL only, set by `dbm local` (not a config key): the connected database's owner is trusted for
   * EXPLAIN too, looked up at each sampling. On one's own database the owner's code is one's own.
   */
  explainTrustsOwner?: boolean
  /** Set by `dbm local` (not a config key): notes name its flags (--explain-trusted-role), as it has no config file. */
  local?: boolean
  /** PostgreSQL only: what the dashboard may have the agent run (allow_actions; src/agent/actions.ts); absent = explain only. */
  allowActions?: ActionKind[]
  /** PostgreSQL only: the backup tool's listing command, read by the `backups` collector; absent = not collected. */
  backup?: BackupConfig
  /** log_text: what log entries keep of statement texts and parameter values (redacted, full, none); absent = redacted. */
  logText?: LogTextMode
  /** enabled_exporter: the database's own figures as series on the agent's GET /metrics (exporter.ts). */
  exporter?: boolean
  /** custom_metrics: the operator's own SQL checks (custom-metrics.ts); absent = none. */
  customMetrics?: CustomMetricConfig[]
  tags: Record<string, string>
}

export const CUSTOM_METRIC_KINDS = ['gauge', 'counter'] as const
export type CustomMetricKind = (typeof CUSTOM_METRIC_KINDS)[number]

/** An alert on a custom metric: every sample of the `for` window above (or below) the threshold. */
export interface CustomMetricAlert {
  op: 'above' | 'below'
  threshold: number
  forMs: number
  severity: 'warning' | 'critical'
}

/** One entry of a database's custom_metrics: one SQL query, its label and value columns. */
export interface CustomMetricConfig {
  name: string
  sql: string
  intervalMs: number
  labels: string[]
  values: string[]
  kind: CustomMetricKind
  /** The query's statement timeout (default 5 s, at most 60 s). */
  timeoutMs: number
  description?: string
  alert?: CustomMetricAlert
}

/** Limits of custom metrics (config and results). */
export const customMetricLimits = {
  perDatabase: 50,
  rows: 1_000,
  columns: 20,
  labelLength: 200,
  sqlLength: 100_000,
  descriptionLength: 500,
  defaultTimeoutMs: 5_000,
  maxTimeoutMs: 60_000,
} as const

/** backup_command and its companions: what the `backups` collector runs, how often, and for how long at most. */
export interface BackupConfig {
  /** The argv, run without a shell. */
  command: string[]
  tool: BackupTool
  intervalMs: number
  timeoutMs: number
}

export const BACKUP_TOOLS = ['pgbackrest', 'walg'] as const
export type BackupTool = (typeof BACKUP_TOOLS)[number]

export interface AgentConfig {
  api: { endpoint: string; key: string }
  /** Empty when health.listen_addr is not set (no /healthz). */
  health: { listenAddr?: string; hostname?: string; port?: number }
  databases: DatabaseConfig[]
  /** The disk buffer of each database (service_buffer_{name}.db). */
  buffer: { maxBytes: number }
}

export interface ClickHouseTarget {
  url: string
  username: string
  password: string
  database: string
}

const DEFAULT_ENDPOINT = 'http://localhost:8080'
const DEFAULT_POLL_INTERVAL = `${DEFAULT_POLL_INTERVAL_SECONDS}s`
const MIN_POLL_INTERVAL_MS = 1000
const MAX_POLL_INTERVAL_MS = MAX_POLL_INTERVAL_SECONDS * 1000
/**
 * object_stats_interval when the entry leaves it out: tables and indexes statistics read once a minute
 * while statements go every poll (pgwatch's presets read them every 5 and 15 min): one row per table
 * and index of every database, these reads were half the agent's database time per cycle
 * (bench/RESULTS.md, Agent), and a minute is the resolution the server keeps their deltas at.
 */
export const DEFAULT_OBJECT_STATS_INTERVAL_MS = 60_000
/** The longest object_stats_interval: the server's hourly rows of tables and indexes need a report in every hour. */
const MAX_OBJECT_STATS_INTERVAL_MS = 3_600_000

/**
 * The poll interval the server sets for a database (ingest answers' settings), held to the bounds of
 * the config's: 1 s to 24 h. The server refuses others, but an older one stored any number, and a timer
 * past 2^31 - 1 ms fires at once, cycling in a busy loop. Not a finite number: `fallbackMs`.
 */
export function serverPollIntervalMs(seconds: number, fallbackMs: number): number {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return fallbackMs
  return Math.min(Math.max(seconds * 1000, MIN_POLL_INTERVAL_MS), MAX_POLL_INTERVAL_MS)
}
/** Same shape the server issues (src/server/auth/api-keys.ts); the agent may not import the server. */
const API_KEY_PATTERN = /^dbm_ak_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/

/** buffer.max_bytes when the config leaves it out: 256 MB. */
export const DEFAULT_BUFFER_MAX_BYTES = 256_000_000
/** Below this a buffer would keep hardly a batch: most likely a unit left out (`max_bytes: 256`). */
const MIN_BUFFER_MAX_BYTES = 1_000_000

const TOP_LEVEL_KEYS = ['api', 'health', 'buffer', 'databases']
const API_KEYS = ['endpoint', 'key']
const HEALTH_KEYS = ['listen_addr']
const BUFFER_KEYS = ['max_bytes']
const DATABASE_KEYS = [
  'name',
  'engine',
  'dsn',
  'poll_interval',
  'object_stats_interval',
  'enabled_collectors',
  'pg_log_dir',
  'explain_trusted_roles',
  'allow_actions',
  'enabled_exporter',
  'tags',
  'backup_command',
  'backup_tool',
  'backup_check_interval',
  'backup_timeout',
  'log_text',
  'custom_metrics',
]
const CUSTOM_METRIC_KEYS = ['name', 'sql', 'interval', 'labels', 'values', 'kind', 'timeout', 'description', 'alert']
const CUSTOM_ALERT_KEYS = ['above', 'below', 'for', 'severity']
/** A custom metric's name: what follows dbm_custom_ on /metrics. */
export const CUSTOM_METRIC_NAME = /^[a-z_][a-z0-9_]*$/
/** A label or value column: a Prometheus label name. */
const CUSTOM_COLUMN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

// ---------------------------------------------------------------------------------------------
// Go durations (time.ParseDuration, same grammar, limits and error texts)

const NS_PER_UNIT: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n, // U+00B5 micro sign
  μs: 1_000n, // U+03BC Greek mu
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
}
const MAX_UINT = 1n << 63n

/** Go's time-package quote: printable ASCII as is (with \" and \\), every other byte as \xNN. */
function goQuote(text: string): string {
  let out = '"'
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0
    if (code < 0x20 || code >= 0x80) {
      for (const byte of new TextEncoder().encode(ch)) out += `\\x${byte.toString(16).padStart(2, '0')}`
    } else {
      out += ch === '"' || ch === '\\' ? `\\${ch}` : ch
    }
  }
  return `${out}"`
}

const isDigit = (ch: string | undefined): boolean => ch !== undefined && ch >= '0' && ch <= '9'

/** Parses a Go duration ("300ms", "1.5h", "2h45m", "-10s", "0") into milliseconds (possibly fractional). */
export function parseGoDuration(text: string): number {
  const invalid = () => new ConfigError(`time: invalid duration ${goQuote(text)}`)
  let s = text
  let negative = false
  if (s.startsWith('-') || s.startsWith('+')) {
    negative = s[0] === '-'
    s = s.slice(1)
  }
  if (s === '0') return 0
  if (s === '') throw invalid()

  let total = 0n
  while (s !== '') {
    if (!(s[0] === '.' || isDigit(s[0]))) throw invalid()

    let i = 0
    let whole = 0n
    while (isDigit(s[i])) {
      if (whole > MAX_UINT / 10n) throw invalid()
      whole = whole * 10n + BigInt(s.charCodeAt(i) - 48)
      if (whole > MAX_UINT) throw invalid()
      i++
    }
    const hadWhole = i > 0
    s = s.slice(i)

    let fraction = 0n
    let scale = 1
    let hadFraction = false
    if (s[0] === '.') {
      s = s.slice(1)
      let j = 0
      let overflow = false
      while (isDigit(s[j])) {
        if (!overflow) {
          const next = fraction * 10n + BigInt(s.charCodeAt(j) - 48)
          if (fraction > (MAX_UINT - 1n) / 10n || next > MAX_UINT) overflow = true
          else {
            fraction = next
            scale *= 10
          }
        }
        j++
      }
      hadFraction = j > 0
      s = s.slice(j)
    }
    if (!hadWhole && !hadFraction) throw invalid()

    let u = 0
    while (u < s.length && s[u] !== '.' && !isDigit(s[u])) u++
    if (u === 0) throw new ConfigError(`time: missing unit in duration ${goQuote(text)}`)
    const unitName = s.slice(0, u)
    s = s.slice(u)
    const unit = NS_PER_UNIT[unitName]
    if (unit === undefined)
      throw new ConfigError(`time: unknown unit ${goQuote(unitName)} in duration ${goQuote(text)}`)

    if (whole > MAX_UINT / unit) throw invalid()
    let value = whole * unit
    if (fraction > 0n) {
      value += BigInt(Math.trunc(Number(fraction) * (Number(unit) / scale)))
      if (value > MAX_UINT) throw invalid()
    }
    total += value
    if (total > MAX_UINT) throw invalid()
  }
  if (!negative && total > MAX_UINT - 1n) throw invalid()
  const ms = Number(total) / 1e6
  return negative ? -ms : ms
}

// ---------------------------------------------------------------------------------------------
// DSNs

const POSTGRES_SCHEMES = ['postgres', 'postgresql']
const CLICKHOUSE_SCHEMES = ['clickhouse', 'tcp', 'http', 'https']

function dsnScheme(dsn: string): string | undefined {
  return /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(dsn)?.[1]?.toLowerCase()
}

/** postgres:// and postgresql:// are PostgreSQL; clickhouse://, tcp://, http:// and https:// are ClickHouse. */
export function detectEngine(dsn: string): EngineName | undefined {
  const scheme = dsnScheme(dsn)
  if (scheme === undefined) return undefined
  if (POSTGRES_SCHEMES.includes(scheme)) return 'postgres'
  if (CLICKHOUSE_SCHEMES.includes(scheme)) return 'clickhouse'
  return undefined
}

function decode(part: string): string {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

/** strconv.ParseBool, as clickhouse-go reads `secure`; a bare `?secure` means true. */
function parseSecure(value: string): boolean {
  if (['', '1', 't', 'T', 'true', 'TRUE', 'True'].includes(value)) return true
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(value)) return false
  throw new ConfigError('secure: expected true or false')
}

/** The query parameters of a ClickHouse DSN the agent reads. */
const CLICKHOUSE_DSN_PARAMETERS = ['username', 'password', 'database', 'secure']

/**
 * What is wrong with a ClickHouse DSN's query parameters, or undefined: each at most once, none other than
 * CLICKHOUSE_DSN_PARAMETERS (clickhouse-go would take an unknown one as a server setting; the agent would
 * silently drop it), and on http:// and https:// a `secure` that agrees with the scheme.
 */
function clickhouseParamsProblem(query: URLSearchParams, scheme: string): string | undefined {
  const seen = new Set<string>()
  for (const [key, value] of query) {
    const name = JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}…` : key)
    if (seen.has(key)) return `parameter ${name} is given twice`
    seen.add(key)
    if (!CLICKHOUSE_DSN_PARAMETERS.includes(key))
      return `unknown parameter ${name} (the agent reads ${CLICKHOUSE_DSN_PARAMETERS.join(', ')})`
    if (key === 'secure') {
      const secure = parseSecure(value)
      if ((scheme === 'http' && secure) || (scheme === 'https' && !secure))
        return `secure=${value} contradicts the ${scheme}:// scheme, which decides; leave secure out`
    }
  }
  return undefined
}

/**
 * Where the agent sends ClickHouse queries over HTTP(S) (DECISIONS.md). clickhouse:// and tcp:// keep
 * user, password, host and database: port 9000 → 8123, 9440 → 8443 over https, no port → 8123 (8443 and
 * https with secure=true), any other port as given. http:// and https:// are used as they are. User,
 * password and database come from the URL, else from `username=`, `password=`, `database=` in the query;
 * defaults are user `default`, no password and database `default`. Errors never contain the DSN.
 */
export function clickhouseTarget(dsn: string): ClickHouseTarget {
  const scheme = dsnScheme(dsn)
  if (scheme === undefined || !CLICKHOUSE_SCHEMES.includes(scheme)) {
    throw new ConfigError('expected a clickhouse://, tcp://, http:// or https:// URL')
  }
  const authority = dsn.slice(scheme.length + 3).split(/[/?#]/, 1)[0] ?? ''
  if (authority.slice(authority.lastIndexOf('@') + 1).includes(',')) {
    throw new ConfigError('expected one host: the agent watches a single ClickHouse instance, not a cluster')
  }
  let url: URL
  try {
    url = new URL(dsn)
  } catch {
    throw new ConfigError(`not a valid ${scheme}:// URL`)
  }
  const query = url.searchParams
  const problem = clickhouseParamsProblem(query, scheme)
  if (problem !== undefined) throw new ConfigError(problem)
  const pathSegments = url.pathname.split('/').filter((segment) => segment !== '')
  if (pathSegments.length > 1) throw new ConfigError('expected at most one path segment (the database)')
  const username = decode(url.username) || query.get('username') || 'default'
  const password = decode(url.password) || query.get('password') || ''
  const database = (pathSegments[0] !== undefined ? decode(pathSegments[0]) : '') || query.get('database') || 'default'

  if (scheme === 'http' || scheme === 'https') {
    if (url.hostname === '') throw new ConfigError(`not a valid ${scheme}:// URL`)
    return { url: url.origin, username, password, database }
  }

  const secureParam = query.get('secure')
  const secure = secureParam !== null && parseSecure(secureParam)
  const host = url.hostname || 'localhost'
  let port: string
  let https = secure
  if (url.port === '') port = secure ? '8443' : '8123'
  else if (url.port === '9000') port = '8123'
  else if (url.port === '9440') {
    port = '8443'
    https = true
  } else port = url.port
  return { url: `${https ? 'https' : 'http'}://${host}:${port}`, username, password, database }
}

// ---------------------------------------------------------------------------------------------
// YAML → plain values. Scalars keep the text they were written as ("10" stays "10", "1.50" stays "1.50");
// every leaf of the config is a string, so numbers and booleans are read as their text. null stays null.

type Plain = string | null | Plain[] | { [key: string]: Plain }

function toPlain(node: unknown, doc: Document, source: string): Plain {
  if (node === null || node === undefined) return null
  if (isAlias(node)) return toPlain(node.resolve(doc), doc, source)
  if (isMap(node)) {
    const out: Record<string, Plain> = Object.create(null)
    for (const pair of node.items) {
      const key = toPlain(pair.key, doc, source)
      out[typeof key === 'string' ? key : JSON.stringify(key)] = toPlain(pair.value, doc, source)
    }
    return out
  }
  if (isSeq(node)) return node.items.map((item) => toPlain(item, doc, source))
  if (isScalar(node)) {
    if (node.value === null || node.value === undefined) return null
    if (typeof node.value === 'string') return node.value
    const range = node.range
    return range ? source.slice(range[0], range[1]).trim() : String(node.value)
  }
  return null
}

function parseYaml(yamlText: string, source: string | undefined): Plain {
  const text = yamlText.startsWith('\uFEFF') ? yamlText.slice(1) : yamlText
  const doc = parseDocument(text, { logLevel: 'silent', uniqueKeys: true })
  const error = doc.errors[0]
  if (error) {
    const firstLine = error.message.split('\n', 1)[0] ?? ''
    const message = firstLine.replace(/ at line \d+, column \d+:?$/, '')
    const position = error.linePos?.[0]
    const where = position ? `line ${position.line}, column ${position.col}: ` : ''
    throw new ConfigError(`${source ? `${source}: ` : ''}${where}${message}`)
  }
  return toPlain(doc.contents, doc, text)
}

// ---------------------------------------------------------------------------------------------
// Validation

type PlainMap = { [key: string]: Plain }

const isPlainMap = (value: Plain | undefined): value is PlainMap =>
  value !== null && value !== undefined && typeof value === 'object' && !Array.isArray(value)

function rejectUnknownKeys(map: PlainMap, known: string[], where: string): void {
  for (const key of Object.keys(map)) {
    if (known.includes(key)) continue
    const near = nearestKey(key, known)
    throw new ConfigError(
      `unknown key ${JSON.stringify(key)} ${where}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ''}`,
    )
  }
}

/** The known key a misspelled one most likely meant: the same but for case, `_` and `-`, or at most 2 edits away. */
function nearestKey(key: string, known: string[]): string | undefined {
  const plain = (k: string) => k.toLowerCase().replace(/[_-]/g, '')
  let best: { key: string; distance: number } | undefined
  for (const candidate of known) {
    const distance = plain(key) === plain(candidate) ? 0 : editDistance(plain(key), plain(candidate))
    if (distance <= 2 && (!best || distance < best.distance)) best = { key: candidate, distance }
  }
  return best?.key
}

/** Levenshtein distance (insertions, deletions and substitutions of one character). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/** An optional string field: null, absent and "" all mean unset. */
function optionalString(map: PlainMap, key: string, path: string): string | undefined {
  const value = map[key]
  if (value === null || value === undefined || value === '') return undefined
  if (typeof value !== 'string') throw new ConfigError(`${path}: expected a string`)
  return value
}

function parseApi(value: Plain | undefined): AgentConfig['api'] {
  if (value === null || value === undefined) throw new ConfigError('api.key is required')
  if (!isPlainMap(value)) throw new ConfigError('api: expected a map')
  rejectUnknownKeys(value, API_KEYS, 'in api')

  const endpointText = optionalString(value, 'endpoint', 'api.endpoint') ?? DEFAULT_ENDPOINT
  const endpoint = endpointText.replace(/\/+$/, '')
  let url: URL | undefined
  try {
    url = new URL(endpoint)
  } catch {
    url = undefined
  }
  if (
    !url ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.hostname === '' ||
    url.search ||
    url.hash
  ) {
    throw new ConfigError('api.endpoint: expected an http:// or https:// URL')
  }

  const key = optionalString(value, 'key', 'api.key')
  if (key === undefined) throw new ConfigError('api.key is required')
  if (!API_KEY_PATTERN.test(key))
    throw new ConfigError('api.key: expected an API key of the form dbm_ak_<key_id>_<secret>')
  return { endpoint, key }
}

function parseHealth(value: Plain | undefined): AgentConfig['health'] {
  if (value === null || value === undefined) return {}
  if (!isPlainMap(value)) throw new ConfigError('health: expected a map')
  rejectUnknownKeys(value, HEALTH_KEYS, 'in health')
  const listenAddr = optionalString(value, 'listen_addr', 'health.listen_addr')
  if (listenAddr === undefined) return {}
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(listenAddr)
  const port = match ? Number(match[3]) : Number.NaN
  if (!match || !(port >= 1 && port <= 65535)) {
    throw new ConfigError(`health.listen_addr: expected host:port or :port, got ${JSON.stringify(listenAddr)}`)
  }
  return { listenAddr, hostname: match[1] ?? (match[2] || '0.0.0.0'), port }
}

/** Byte units of buffer.max_bytes: SI (powers of 1000) and IEC (powers of 1024), in any case (256mb is 256MB). */
const BYTE_UNITS: Record<string, number> = {
  B: 1,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
}
const UNIT_BY_LOWER_CASE = new Map(Object.entries(BYTE_UNITS).map(([unit, bytes]) => [unit.toLowerCase(), bytes]))

/** A size: a whole number of bytes, optionally followed (with no space) by one of BYTE_UNITS: 268435456, 256MB, 1GiB. */
export function parseByteSize(text: string): number | undefined {
  const match = /^(\d+)([A-Za-z]*)$/.exec(text)
  if (!match) return undefined
  const unit = match[2] === '' ? 1 : UNIT_BY_LOWER_CASE.get(match[2]!.toLowerCase())
  if (unit === undefined) return undefined
  const bytes = Number(match[1]) * unit
  return Number.isSafeInteger(bytes) ? bytes : undefined
}

function parseBuffer(value: Plain | undefined): AgentConfig['buffer'] {
  if (value === null || value === undefined) return { maxBytes: DEFAULT_BUFFER_MAX_BYTES }
  if (!isPlainMap(value)) throw new ConfigError('buffer: expected a map')
  rejectUnknownKeys(value, BUFFER_KEYS, 'in buffer')
  const text = optionalString(value, 'max_bytes', 'buffer.max_bytes')
  if (text === undefined) return { maxBytes: DEFAULT_BUFFER_MAX_BYTES }
  const maxBytes = parseByteSize(text)
  if (maxBytes === undefined) {
    throw new ConfigError(
      `buffer.max_bytes: expected a whole number of bytes, optionally with a unit (${Object.keys(BYTE_UNITS).join(', ')}) such as 256MB or 1GiB, got ${JSON.stringify(text)}`,
    )
  }
  if (maxBytes < MIN_BUFFER_MAX_BYTES)
    throw new ConfigError(`buffer.max_bytes: must be at least 1MB, got ${JSON.stringify(text)}`)
  return { maxBytes }
}

function resolveEngine(entry: PlainMap, dsn: string, path: string): EngineName {
  const engineText = optionalString(entry, 'engine', `${path}.engine`)
  const detected = detectEngine(dsn)
  if (engineText === undefined) {
    if (detected !== undefined) return detected
    throw new ConfigError(
      `${path}.dsn: unsupported engine: cannot tell the engine from ${JSON.stringify(redactSecrets(dsn))} (set engine: postgres or clickhouse)`,
    )
  }
  if (engineText !== 'postgres' && engineText !== 'clickhouse') {
    throw new ConfigError(
      `${path}.engine: unsupported engine ${JSON.stringify(engineText)} (use postgres or clickhouse)`,
    )
  }
  if (detected === undefined) {
    const schemes =
      engineText === 'postgres' ? 'a postgres:// or postgresql://' : 'a clickhouse://, tcp://, http:// or https://'
    throw new ConfigError(`${path}.dsn: engine ${engineText} expects ${schemes} URL`)
  }
  if (detected !== engineText) {
    throw new ConfigError(
      `${path}.engine: engine is ${engineText} but the DSN scheme ${dsnScheme(dsn)}:// is for ${detected}`,
    )
  }
  return engineText
}

function parsePollInterval(entry: PlainMap, path: string): number {
  const text = optionalString(entry, 'poll_interval', `${path}.poll_interval`) ?? DEFAULT_POLL_INTERVAL
  let ms: number
  try {
    ms = parseGoDuration(text)
  } catch (error) {
    throw new ConfigError(`${path}.poll_interval: ${(error as Error).message}`)
  }
  if (ms < MIN_POLL_INTERVAL_MS) throw new ConfigError(`${path}.poll_interval: must be at least 1s, got ${text}`)
  if (ms > MAX_POLL_INTERVAL_MS) throw new ConfigError(`${path}.poll_interval: must be at most 24h, got ${text}`)
  return ms
}

/**
 * object_stats_interval: a Go duration, 0 (every cycle) or from the poll interval up to an hour; absent:
 * DEFAULT_OBJECT_STATS_INTERVAL_MS (every cycle, then, when the poll interval is as long or longer).
 */
function parseObjectStatsInterval(entry: PlainMap, engine: EngineName, pollIntervalMs: number, path: string): number {
  const where = `${path}.object_stats_interval`
  const text = optionalString(entry, 'object_stats_interval', where)
  if (text === undefined) return DEFAULT_OBJECT_STATS_INTERVAL_MS
  if (engine !== 'postgres') throw new ConfigError(`${where}: only for postgres databases`)
  let ms: number
  try {
    ms = parseGoDuration(text)
  } catch (error) {
    throw new ConfigError(`${where}: ${(error as Error).message}`)
  }
  if (ms === 0) return 0
  if (ms < pollIntervalMs)
    throw new ConfigError(
      `${where}: must be 0 (every cycle) or at least the database's poll_interval (${pollIntervalMs / 1000}s), got ${text}`,
    )
  if (ms > MAX_OBJECT_STATS_INTERVAL_MS) throw new ConfigError(`${where}: must be at most 1h, got ${text}`)
  return ms
}

function parseCollectors(entry: PlainMap, engine: EngineName, path: string): string[] | undefined {
  const value = entry.enabled_collectors
  if (value === null || value === undefined) return undefined
  const where = `${path}.enabled_collectors`
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
    throw new ConfigError(`${where}: expected a list of collector names`)
  }
  if (value.length === 0)
    throw new ConfigError(`${where}: name at least one collector, or leave the key out to run them all`)
  const known = collectorsFor(engine)
  const names: string[] = []
  for (const item of value as string[]) {
    if (!known.includes(item)) {
      throw new ConfigError(
        `${where}: unknown ${engine} collector ${JSON.stringify(item)} (known: ${known.join(', ')})`,
      )
    }
    if (!names.includes(item)) names.push(item)
  }
  return names
}

/** PostgreSQL role names are at most 63 bytes; any characters are allowed (they are only ever compared, never spliced into SQL). */
function parseTrustedRoles(entry: PlainMap, engine: EngineName, path: string): string[] | undefined {
  const value = entry.explain_trusted_roles
  if (value === null || value === undefined) return undefined
  const where = `${path}.explain_trusted_roles`
  if (engine !== 'postgres') throw new ConfigError(`${where}: only for postgres databases`)
  if (
    !Array.isArray(value) ||
    value.some((item) => typeof item !== 'string' || item.length === 0 || Buffer.byteLength(item) > 63)
  ) {
    throw new ConfigError(`${where}: expected a list of role names`)
  }
  return [...new Set(value as string[])]
}

/** allow_actions: some of cancel, terminate, explain (an empty list allows none). */
function parseAllowActions(entry: PlainMap, engine: EngineName, path: string): ActionKind[] | undefined {
  const value = entry.allow_actions
  if (value === null || value === undefined) return undefined
  const where = `${path}.allow_actions`
  if (engine !== 'postgres') throw new ConfigError(`${where}: only for postgres databases`)
  if (!Array.isArray(value)) throw new ConfigError(`${where}: expected a list of ${ACTION_KINDS.join(', ')}`)
  for (const item of value) {
    if (!(ACTION_KINDS as readonly unknown[]).includes(item))
      throw new ConfigError(`${where}: unknown action ${JSON.stringify(item)} (known: ${ACTION_KINDS.join(', ')})`)
  }
  return ACTION_KINDS.filter((k) => value.includes(k))
}

const DEFAULT_BACKUP_INTERVAL = '10m'
const DEFAULT_BACKUP_TIMEOUT = '60s'

/** A duration key of the backup settings, within [minMs, maxMs]. */
function backupDuration(
  entry: PlainMap,
  key: string,
  fallback: string,
  minMs: number,
  maxMs: number,
  path: string,
): number {
  const text = optionalString(entry, key, `${path}.${key}`) ?? fallback
  let ms: number
  try {
    ms = parseGoDuration(text)
  } catch (error) {
    throw new ConfigError(`${path}.${key}: ${(error as Error).message}`)
  }
  if (ms < minMs || ms > maxMs)
    throw new ConfigError(`${path}.${key}: must be between ${minMs / 1000}s and ${maxMs / 3_600_000}h, got ${text}`)
  return ms
}

/**
 * backup_command (an argv list: the program and its arguments, run without a shell), backup_tool
 * (pgbackrest or walg; inferred from the program's name when it is pgbackrest, wal-g or wal-g-pg),
 * backup_check_interval (default 10m, at least 10s) and backup_timeout (default 60s, 1s to 1h).
 */
function parseBackup(entry: PlainMap, engine: EngineName, path: string): BackupConfig | undefined {
  const value = entry.backup_command
  const companions = ['backup_tool', 'backup_check_interval', 'backup_timeout'].filter(
    (k) => entry[k] !== undefined && entry[k] !== null,
  )
  if (value === null || value === undefined) {
    if (companions.length > 0) throw new ConfigError(`${path}.${companions[0]}: set backup_command too`)
    return undefined
  }
  const where = `${path}.backup_command`
  if (engine !== 'postgres') throw new ConfigError(`${where}: only for postgres databases`)
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    value.some((item) => typeof item !== 'string' || item === '' || item.includes('\0'))
  ) {
    throw new ConfigError(
      `${where}: expected a list: the program and its arguments, e.g. [pgbackrest, --stanza=main, info, --output=json]`,
    )
  }
  const command = value as string[]
  const toolText = optionalString(entry, 'backup_tool', `${path}.backup_tool`)
  const program = (command[0]!.split('/').pop() ?? '').toLowerCase()
  const inferred: BackupTool | undefined = program.startsWith('pgbackrest')
    ? 'pgbackrest'
    : /^wal-?g/.test(program)
      ? 'walg'
      : undefined
  if (toolText !== undefined && !(BACKUP_TOOLS as readonly string[]).includes(toolText)) {
    throw new ConfigError(`${path}.backup_tool: expected pgbackrest or walg, got ${JSON.stringify(toolText)}`)
  }
  const tool = (toolText as BackupTool | undefined) ?? inferred
  if (tool === undefined)
    throw new ConfigError(
      `${path}.backup_tool: cannot tell the tool from ${JSON.stringify(command[0])}: set backup_tool: pgbackrest or walg`,
    )
  return {
    command,
    tool,
    intervalMs: backupDuration(
      entry,
      'backup_check_interval',
      DEFAULT_BACKUP_INTERVAL,
      10_000,
      MAX_POLL_INTERVAL_MS,
      path,
    ),
    timeoutMs: backupDuration(entry, 'backup_timeout', DEFAULT_BACKUP_TIMEOUT, 1_000, 3_600_000, path),
  }
}

/** A duration key of a custom metric, in whole seconds, within [minMs, maxMs]; undefined when absent. */
function customDuration(entry: PlainMap, key: string, where: string, minMs: number, maxMs: number): number | undefined {
  const text = optionalString(entry, key, `${where}.${key}`)
  if (text === undefined) return undefined
  let ms: number
  try {
    ms = parseGoDuration(text)
  } catch (error) {
    throw new ConfigError(`${where}.${key}: ${(error as Error).message}`)
  }
  if (ms % 1000 !== 0) throw new ConfigError(`${where}.${key}: must be a whole number of seconds, got ${text}`)
  if (ms < minMs) throw new ConfigError(`${where}.${key}: must be at least ${minMs / 1000}s, got ${text}`)
  if (ms > maxMs) throw new ConfigError(`${where}.${key}: must be at most ${maxMs / 1000}s, got ${text}`)
  return ms
}

function customColumns(entry: PlainMap, key: 'labels' | 'values', where: string): string[] {
  const value = entry[key]
  if (value === null || value === undefined) {
    if (key === 'labels') return []
    throw new ConfigError(`${where}.values: name at least one column of the query's result`)
  }
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string'))
    throw new ConfigError(`${where}.${key}: expected a list of column names`)
  if (key === 'values' && value.length === 0)
    throw new ConfigError(`${where}.values: name at least one column of the query's result`)
  const columns: string[] = []
  for (const column of value as string[]) {
    if (!CUSTOM_COLUMN_NAME.test(column) || column.length > 100) {
      throw new ConfigError(
        `${where}.${key}: ${JSON.stringify(column)} is not a usable column name (letters, digits and _, not starting with a digit; alias it in the SQL)`,
      )
    }
    if (key === 'labels' && (column === 'database' || column.startsWith('__'))) {
      throw new ConfigError(
        `${where}.labels: ${JSON.stringify(column)} is reserved (dbm adds the database label); alias it in the SQL`,
      )
    }
    if (columns.includes(column)) throw new ConfigError(`${where}.${key}: ${JSON.stringify(column)} is named twice`)
    columns.push(column)
  }
  return columns
}

function parseCustomAlert(value: Plain | undefined, where: string, intervalMs: number): CustomMetricAlert | undefined {
  if (value === null || value === undefined) return undefined
  if (!isPlainMap(value)) throw new ConfigError(`${where}: expected a map with above or below, for and severity`)
  rejectUnknownKeys(value, CUSTOM_ALERT_KEYS, `in ${where}`)
  const above = optionalString(value, 'above', `${where}.above`)
  const below = optionalString(value, 'below', `${where}.below`)
  if ((above === undefined) === (below === undefined)) throw new ConfigError(`${where}: set one of above or below`)
  const text = (above ?? below)!
  const threshold = Number(text.replaceAll('_', ''))
  if (text.trim() === '' || !Number.isFinite(threshold))
    throw new ConfigError(
      `${where}.${above !== undefined ? 'above' : 'below'}: expected a number, got ${JSON.stringify(text)}`,
    )
  const forMs = customDuration(value, 'for', where, 0, 7 * 24 * 3_600_000) ?? 0
  if (forMs > 0 && forMs < intervalMs)
    throw new ConfigError(`${where}.for: must be 0 or at least the metric's interval (${intervalMs / 1000}s)`)
  const severity = optionalString(value, 'severity', `${where}.severity`) ?? 'warning'
  if (severity !== 'warning' && severity !== 'critical')
    throw new ConfigError(`${where}.severity: expected warning or critical, got ${JSON.stringify(severity)}`)
  return { op: above !== undefined ? 'above' : 'below', threshold, forMs, severity }
}

/**
 * custom_metrics: a list of {name, sql, interval, labels, values, kind, timeout, description, alert}.
 * Errors name the database (by its name) and the metric.
 */
function parseCustomMetrics(
  entry: PlainMap,
  path: string,
  databaseName: string,
  pollIntervalMs: number,
): CustomMetricConfig[] | undefined {
  const value = entry.custom_metrics
  if (value === null || value === undefined) return undefined
  const base = `${path}.custom_metrics`
  if (!Array.isArray(value))
    throw new ConfigError(`${base} (database ${JSON.stringify(databaseName)}): expected a list`)
  if (value.length > customMetricLimits.perDatabase)
    throw new ConfigError(
      `${base} (database ${JSON.stringify(databaseName)}): at most ${customMetricLimits.perDatabase} metrics`,
    )
  const metrics: CustomMetricConfig[] = []
  value.forEach((item, i) => {
    const rawName = isPlainMap(item) && typeof item.name === 'string' ? item.name : undefined
    const where = `${base}[${i}]`
    try {
      if (!isPlainMap(item)) throw new ConfigError(`${where}: expected a map with name, sql and values`)
      rejectUnknownKeys(item, CUSTOM_METRIC_KEYS, `in ${where}`)
      const name = optionalString(item, 'name', `${where}.name`)
      if (name === undefined) throw new ConfigError(`${where}.name is required`)
      if (!CUSTOM_METRIC_NAME.test(name) || name.length > 100) {
        throw new ConfigError(
          `${where}.name: ${JSON.stringify(name)} must match [a-z_][a-z0-9_]* (at most 100 characters)`,
        )
      }
      if (metrics.some((m) => m.name === name))
        throw new ConfigError(`${where}.name: ${JSON.stringify(name)} is used twice in this database`)
      const sql = optionalString(item, 'sql', `${where}.sql`)
      if (sql === undefined || sql.trim() === '') throw new ConfigError(`${where}.sql is required`)
      if (sql.length > customMetricLimits.sqlLength || sql.includes('\0'))
        throw new ConfigError(`${where}.sql: at most ${customMetricLimits.sqlLength} characters, no NUL`)
      const intervalMs =
        customDuration(item, 'interval', where, 1000, MAX_POLL_INTERVAL_MS) ?? Math.ceil(pollIntervalMs / 1000) * 1000
      if (intervalMs < pollIntervalMs)
        throw new ConfigError(
          `${where}.interval: must be at least the database's poll_interval (${pollIntervalMs / 1000}s)`,
        )
      const labels = customColumns(item, 'labels', where)
      const values = customColumns(item, 'values', where)
      const both = labels.find((c) => values.includes(c))
      if (both !== undefined)
        throw new ConfigError(
          `${where}: ${JSON.stringify(both)} is both a label and a value; a column is one or the other`,
        )
      if (labels.length + values.length > customMetricLimits.columns)
        throw new ConfigError(`${where}: at most ${customMetricLimits.columns} label and value columns`)
      const kind = optionalString(item, 'kind', `${where}.kind`) ?? 'gauge'
      if (!(CUSTOM_METRIC_KINDS as readonly string[]).includes(kind))
        throw new ConfigError(`${where}.kind: expected gauge or counter, got ${JSON.stringify(kind)}`)
      const timeoutMs =
        customDuration(item, 'timeout', where, 1000, customMetricLimits.maxTimeoutMs) ??
        customMetricLimits.defaultTimeoutMs
      const description = optionalString(item, 'description', `${where}.description`)
      if (
        description !== undefined &&
        (description.length > customMetricLimits.descriptionLength || description.includes('\0'))
      ) {
        throw new ConfigError(`${where}.description: at most ${customMetricLimits.descriptionLength} characters`)
      }
      const alert = parseCustomAlert(item.alert, `${where}.alert`, intervalMs)
      const metric: CustomMetricConfig = {
        name,
        sql,
        intervalMs,
        labels,
        values,
        kind: kind as CustomMetricKind,
        timeoutMs,
      }
      if (description !== undefined) metric.description = description
      if (alert !== undefined) metric.alert = alert
      metrics.push(metric)
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error
      const metricName = rawName !== undefined ? `, metric ${JSON.stringify(rawName.slice(0, 100))}` : ''
      throw new ConfigError(`database ${JSON.stringify(databaseName)}${metricName}: ${error.message}`)
    }
  })
  return metrics.length > 0 ? metrics : undefined
}

function parseTags(entry: PlainMap, path: string): Record<string, string> {
  const value = entry.tags
  if (value === null || value === undefined) return {}
  if (!isPlainMap(value)) throw new ConfigError(`${path}.tags: expected a map of strings`)
  const tags: Record<string, string> = {}
  const entries = Object.entries(value)
  // The API's limits: a batch over them would be refused as malformed and its data dropped.
  if (entries.length > tagLimits.count) throw new ConfigError(`${path}.tags: at most ${tagLimits.count} tags`)
  for (const [key, tag] of entries) {
    if (typeof tag !== 'string') throw new ConfigError(`${path}.tags.${key}: expected a string`)
    if (key.length === 0 || key.length > tagLimits.key || key.includes('\0')) {
      throw new ConfigError(`${path}.tags: keys must be 1 to ${tagLimits.key} characters`)
    }
    if (tag.length > tagLimits.value || tag.includes('\0'))
      throw new ConfigError(`${path}.tags.${key}: at most ${tagLimits.value} characters`)
    tags[key] = tag
  }
  return tags
}

function parseDatabase(value: Plain, index: number): DatabaseConfig {
  const path = `databases[${index}]`
  if (!isPlainMap(value)) throw new ConfigError(`${path}: expected a map`)
  rejectUnknownKeys(value, DATABASE_KEYS, `in ${path}`)

  const name = optionalString(value, 'name', `${path}.name`) ?? `db-${index}`
  if (name.length > NAME_MAX_CHARS)
    throw new ConfigError(`${path}.name: must be 1 to ${NAME_MAX_CHARS} characters, got ${name.length}`)
  if (/[\u0000-\u001f\u007f]/.test(name)) throw new ConfigError(`${path}.name: must not contain control characters`)

  const dsn = optionalString(value, 'dsn', `${path}.dsn`)
  if (dsn === undefined) throw new ConfigError(`${path}.dsn is required`)
  const engine = resolveEngine(value, dsn, path)
  if (engine === 'postgres') {
    let url: URL
    try {
      url = new URL(dsn)
    } catch {
      throw new ConfigError(`${path}.dsn: not a valid ${dsnScheme(dsn)}:// URL`)
    }
    // postgres.js reads `[::1]` as a host named `[` (getaddrinfo ENOTFOUND [) and a bare ::1 as localhost.
    if (url.hostname.startsWith('[')) {
      throw new ConfigError(
        `${path}.dsn: IPv6 address literals are not supported in PostgreSQL DSNs; use a host name that resolves to ${url.hostname}`,
      )
    }
    const problem = postgresDsnProblem(url)
    if (problem !== undefined) throw new ConfigError(`${path}.dsn: ${problem}`)
  } else {
    try {
      clickhouseTarget(dsn)
    } catch (error) {
      throw new ConfigError(`${path}.dsn: ${(error as Error).message}`)
    }
  }

  const pollIntervalMs = parsePollInterval(value, path)
  const objectStatsIntervalMs = parseObjectStatsInterval(value, engine, pollIntervalMs, path)
  const enabledCollectors = parseCollectors(value, engine, path)
  const pgLogDir = optionalString(value, 'pg_log_dir', `${path}.pg_log_dir`)
  if (pgLogDir !== undefined && engine !== 'postgres')
    throw new ConfigError(`${path}.pg_log_dir: only for postgres databases`)
  const explainTrustedRoles = parseTrustedRoles(value, engine, path)
  const allowActions = parseAllowActions(value, engine, path)
  const backup = parseBackup(value, engine, path)
  const logText = optionalString(value, 'log_text', `${path}.log_text`)
  if (logText !== undefined && !(LOG_TEXT_MODES as readonly string[]).includes(logText)) {
    throw new ConfigError(
      `${path}.log_text: expected one of ${LOG_TEXT_MODES.join(', ')}, got ${JSON.stringify(logText)}`,
    )
  }
  const tags = parseTags(value, path)
  const exporter = optionalString(value, 'enabled_exporter', `${path}.enabled_exporter`)
  if (exporter !== undefined && exporter !== 'true' && exporter !== 'false') {
    throw new ConfigError(`${path}.enabled_exporter: expected true or false, got ${JSON.stringify(exporter)}`)
  }

  const customMetrics = parseCustomMetrics(value, path, name, pollIntervalMs)

  const database: DatabaseConfig = { name, engine, dsn, pollIntervalMs, objectStatsIntervalMs, tags }
  if (customMetrics !== undefined) database.customMetrics = customMetrics
  if (exporter === 'true') database.exporter = true
  if (enabledCollectors !== undefined) database.enabledCollectors = enabledCollectors
  if (pgLogDir !== undefined) database.pgLogDir = pgLogDir
  if (explainTrustedRoles !== undefined) database.explainTrustedRoles = explainTrustedRoles
  if (allowActions !== undefined) database.allowActions = allowActions
  if (backup !== undefined) database.backup = backup
  if (logText !== undefined) database.logText = logText as LogTextMode
  return database
}

/**
 * Parses and validates the agent config. The first problem found is thrown as a ConfigError; YAML syntax
 * errors carry `source` (the file name) and the line and column.
 */
export function parseAgentConfig(yamlText: string, source?: string): AgentConfig {
  const root = parseYaml(yamlText, source) ?? {}
  if (!isPlainMap(root)) throw new ConfigError('top level: expected a map with api, health, buffer and databases')
  rejectUnknownKeys(root, TOP_LEVEL_KEYS, 'at the top level')

  const api = parseApi(root.api)
  const health = parseHealth(root.health)
  const buffer = parseBuffer(root.buffer)

  const list = root.databases
  if (list !== null && list !== undefined && !Array.isArray(list)) throw new ConfigError('databases: expected a list')
  if (!list || list.length === 0) throw new ConfigError('at least one database entry is required')
  const databases: DatabaseConfig[] = []
  const seen = new Set<string>()
  list.forEach((entry, index) => {
    const database = parseDatabase(entry, index)
    if (seen.has(database.name))
      throw new ConfigError(`databases[${index}].name: duplicate name ${JSON.stringify(database.name)}`)
    seen.add(database.name)
    databases.push(database)
  })
  return { api, health, databases, buffer }
}

// ---------------------------------------------------------------------------------------------
// Files

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile()
  } catch {
    return false
  }
}

/**
 * The config file to use: --config, else $SERVICE_CONFIG, else <cwd>/config.yaml (an empty value counts
 * as unset). Relative paths are resolved against cwd. A chosen file that is missing is an error; there is
 * no falling back to the next place.
 */
export function findConfigPath(
  flagPath: string | undefined,
  env: Record<string, string | undefined>,
  cwd: string,
): string {
  const chosen = flagPath || env.SERVICE_CONFIG || undefined
  if (chosen !== undefined) {
    const path = resolve(cwd, chosen)
    if (!isFile(path)) throw new ConfigError(`no config file found: ${path}`)
    return path
  }
  const path = resolve(cwd, 'config.yaml')
  if (!isFile(path)) throw new ConfigError(`no config file found (looked at --config, $SERVICE_CONFIG, ${path})`)
  return path
}

/** Reads and parses the config file at `path`. */
export function loadAgentConfig(path: string): AgentConfig {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') throw new ConfigError(`no config file found: ${path}`)
    if (code === 'EACCES') throw new ConfigError(`cannot read config file ${path}: permission denied`)
    if (code === 'EISDIR') throw new ConfigError(`cannot read config file ${path}: it is a directory`)
    throw new ConfigError(`cannot read config file ${path}: ${(error as Error).message}`)
  }
  return parseAgentConfig(text, path)
}
