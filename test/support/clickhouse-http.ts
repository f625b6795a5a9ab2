// The ClickHouse HTTP interface as @clickhouse/client speaks it, translated for the chdb-backed test
// server (clickhouse-server.ts): where credentials come from, which URL parameters are settings, query
// parameters or HTTP-only options, how one request becomes the SQL chdb runs, and what the response
// headers and error bodies look like. Pure functions; no engine here.
import {
  brotliCompressSync,
  brotliDecompressSync,
  deflateSync,
  gzipSync,
  gunzipSync,
  inflateSync,
  zstdCompressSync,
  zstdDecompressSync,
} from 'node:zlib'

/** A ClickHouse exception raised by the rig itself (the engine's own arrive as chdb errors). */
export class ClickHouseHttpError extends Error {
  constructor(
    readonly code: number,
    readonly codeName: string,
    message: string,
  ) {
    super(message)
  }
}

/** URL parameters the HTTP interface consumes itself; any other one (but `param_*`) is a setting. */
const HTTP_ONLY_PARAMETERS = new Set([
  'query',
  'database',
  'default_format',
  'query_id',
  'user',
  'password',
  'quota_key',
  'role',
  'session_id',
  'session_timeout',
  'session_check',
  'close_session',
  'compress',
  'decompress',
  'buffer_size',
  'wait_end_of_query',
  'stacktrace',
  'client_protocol_version',
])

export interface Credentials {
  user: string
  password: string
}

/**
 * The credentials of a request, as ClickHouse takes them: Basic auth, or X-ClickHouse-User/-Key, or the
 * `user`/`password` URL parameters, never two of these at once; none at all is `default` without password.
 */
export function credentialsOf(url: URL, headers: Headers): Credentials {
  const authorization = headers.get('authorization')
  const headerUser = headers.get('x-clickhouse-user')
  const headerKey = headers.get('x-clickhouse-key')
  const paramUser = url.searchParams.get('user')
  const paramPassword = url.searchParams.get('password')
  const usesHeaders = headerUser !== null || headerKey !== null
  const usesParams = paramUser !== null || paramPassword !== null
  if (authorization !== null) {
    if (usesHeaders)
      throw authError(
        'Invalid authentication: it is not allowed to use X-ClickHouse HTTP headers and Authorization HTTP header simultaneously',
      )
    if (usesParams)
      throw authError(
        'Invalid authentication: it is not allowed to use Authorization HTTP header and authentication via parameters simultaneously',
      )
    const basic = /^Basic\s+(.+)$/i.exec(authorization)
    if (!basic?.[1]) throw authError('Invalid authentication: only Basic authorization is supported by this server')
    const decoded = Buffer.from(basic[1], 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    return colon < 0
      ? { user: decoded, password: '' }
      : { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) }
  }
  if (usesHeaders) {
    if (usesParams)
      throw authError(
        'Invalid authentication: it is not allowed to use X-ClickHouse HTTP headers and authentication via parameters simultaneously',
      )
    return { user: headerUser ?? 'default', password: headerKey ?? '' }
  }
  return { user: paramUser ?? 'default', password: paramPassword ?? '' }
}

/** The error a real server gives for a wrong user or password. */
export function wrongCredentials(user: string): ClickHouseHttpError {
  return authError(`${user}: Authentication failed: password is incorrect, or there is no user with such name`)
}

function authError(message: string): ClickHouseHttpError {
  return new ClickHouseHttpError(516, 'AUTHENTICATION_FAILED', message)
}

/** One query request, decoded from the URL and the body. */
export interface QueryRequest {
  /** The statement: the `query` parameter, a newline, then the body (INSERT data, or the SQL itself). */
  sql: string
  settings: [string, string][]
  params: [string, string][]
  database?: string
  queryId: string
  defaultFormat: string
  sessionId?: string
  sessionTimeoutSeconds: number
  sessionCheck: boolean
  closeSession: boolean
  /** GET requests are read-only on a real server (readonly=2); not applied in a session, where it would stick. */
  readOnly: boolean
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Decodes a query request. `form` holds the parts of a multipart/form-data body (the client sends
 * `query` and `param_*` that way with `use_multipart_params`); `body` is the plain body otherwise.
 */
export function parseQueryRequest(method: string, url: URL, body: string, form?: Map<string, string>): QueryRequest {
  const settings: [string, string][] = []
  const params: [string, string][] = []
  const addParam = (key: string, value: string) => {
    const name = key.slice('param_'.length)
    if (!IDENTIFIER.test(name))
      throw new ClickHouseHttpError(36, 'BAD_ARGUMENTS', `Invalid query parameter name '${name}'`)
    params.push([name, value])
  }
  for (const [key, value] of url.searchParams) {
    if (key.startsWith('param_')) addParam(key, value)
    else if (!HTTP_ONLY_PARAMETERS.has(key)) {
      if (!IDENTIFIER.test(key)) throw new ClickHouseHttpError(115, 'UNKNOWN_SETTING', `Unknown setting '${key}'`)
      settings.push([key, value])
    }
  }
  let queryParameter = url.searchParams.get('query') ?? ''
  let text = body
  if (form) {
    for (const [key, value] of form) if (key.startsWith('param_')) addParam(key, value)
    queryParameter = form.get('query') ?? queryParameter
    text = ''
  }
  const sql = queryParameter && text ? `${queryParameter}\n${text}` : queryParameter || text
  const sessionId = url.searchParams.get('session_id') || undefined
  return {
    sql,
    settings,
    params,
    database: url.searchParams.get('database') || undefined,
    queryId: url.searchParams.get('query_id') || crypto.randomUUID(),
    defaultFormat: url.searchParams.get('default_format') || 'TabSeparated',
    sessionId,
    sessionTimeoutSeconds: Number(url.searchParams.get('session_timeout') ?? 60) || 60,
    sessionCheck: url.searchParams.get('session_check') === '1',
    closeSession: url.searchParams.get('close_session') === '1',
    readOnly: method === 'GET' && sessionId === undefined,
  }
}

/** A ClickHouse string literal holding `value` exactly. */
export function sqlString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
}

/** Settings a real server has by default where chdb (clickhouse-local) differs. */
export const SERVER_DEFAULT_SETTINGS: [string, string][] = [['mutations_sync', '0']]

/**
 * The SQL script chdb runs for a request, in a Session of its own: the settings as SET statements (the
 * server defaults chdb lacks first), the request's log_comment (the query id unless the client set one:
 * it is how a running query is found again to be killed), `readonly` last (it forbids later SETs; a GET
 * is readonly=2 as on a server), the query parameters as `SET param_x`, USE of the database, then the
 * statement.
 */
export function scriptFor(request: QueryRequest): { script: string; logComment: string } {
  const statements: string[] = []
  const given = new Set(request.settings.map(([name]) => name))
  for (const [name, value] of SERVER_DEFAULT_SETTINGS)
    if (!given.has(name)) statements.push(`SET ${name} = ${sqlString(value)}`)
  for (const [name, value] of request.settings)
    if (name !== 'readonly') statements.push(`SET ${name} = ${sqlString(value)}`)
  const logComment = request.settings.find(([name]) => name === 'log_comment')?.[1] ?? request.queryId
  if (!given.has('log_comment')) statements.push(`SET log_comment = ${sqlString(logComment)}`)
  const readonly = request.settings.find(([name]) => name === 'readonly')?.[1]
  if (readonly !== undefined && readonly !== '0') statements.push(`SET readonly = ${sqlString(readonly)}`)
  else if (request.readOnly) statements.push('SET readonly = 2')
  for (const [name, value] of request.params) statements.push(`SET param_${name} = ${sqlString(value)}`)
  if (request.database) statements.push(`USE \`${request.database.replace(/\\/g, '\\\\').replace(/`/g, '\\`')}\``)
  statements.push(request.sql)
  return { script: statements.join(';\n'), logComment }
}

/** `KILL QUERY ... SYNC` never returns under chdb (the engine waits on itself); the rig refuses it. */
export function isKillSync(sql: string): boolean {
  return /^\s*KILL\s+QUERY\b[\s\S]*\bSYNC\s*;?\s*$/i.test(sql)
}

/** The output format: a trailing `FORMAT x` of a statement that is no INSERT, else the default. */
export function outputFormatOf(sql: string, defaultFormat: string): string {
  if (/^\s*INSERT\b/i.test(sql)) return defaultFormat
  const match = /\bFORMAT\s+([A-Za-z][A-Za-z0-9_]*)\s*(?:SETTINGS\b[^;]*)?;?\s*$/i.exec(sql)
  return match?.[1] ?? defaultFormat
}

export function contentTypeOf(format: string): string {
  if (/^(JSON|NDJSON|JSONL)/i.test(format)) return 'application/json; charset=UTF-8'
  if (/^(TabSeparated|TSV)/i.test(format)) return 'text/tab-separated-values; charset=UTF-8'
  if (/^CSV/i.test(format)) return 'text/csv; charset=UTF-8; header=absent'
  return 'text/plain; charset=UTF-8'
}

/** The X-ClickHouse-Summary header, counts as strings as the server sends them; read and written counts are 0 (chdb does not report them). */
export function summaryOf(counts: { resultRows: number; resultBytes: number; elapsedSeconds: number }): string {
  return JSON.stringify({
    read_rows: '0',
    read_bytes: '0',
    written_rows: '0',
    written_bytes: '0',
    total_rows_to_read: '0',
    result_rows: String(counts.resultRows),
    result_bytes: String(counts.resultBytes),
    elapsed_ns: String(Math.round(counts.elapsedSeconds * 1e9)),
  })
}

/** Exception code, name and message of an engine or rig error. */
export function exceptionOf(error: unknown): { code: number; name: string; message: string } {
  if (error instanceof ClickHouseHttpError) return { code: error.code, name: error.codeName, message: error.message }
  const text = error instanceof Error ? error.message : String(error)
  const parsed = /^Code: (\d+)\. DB::Exception: ([\s\S]*?)\.? \(([A-Z0-9_]+)\)\s*$/.exec(text)
  if (parsed) return { code: Number(parsed[1]), message: parsed[2]!, name: parsed[3]! }
  const code = (error as { clickhouseCode?: number })?.clickhouseCode
  return { code: code ?? 1001, name: code === undefined ? 'STD_EXCEPTION' : 'UNKNOWN_EXCEPTION', message: text }
}

/** The body of an error response, byte for byte as the server writes it. */
export function errorBody(exception: { code: number; name: string; message: string }, version: string): string {
  return `Code: ${exception.code}. DB::Exception: ${exception.message}. (${exception.name}) (version ${version})\n`
}

const STATUS_BY_EXCEPTION: Record<number, string[]> = {
  401: ['REQUIRED_PASSWORD'],
  403: ['UNKNOWN_USER', 'WRONG_PASSWORD', 'AUTHENTICATION_FAILED', 'SET_NON_GRANTED_ROLE', 'ACCESS_DENIED'],
  400: [
    'BAD_ARGUMENTS',
    'CANNOT_COMPILE_REGEXP',
    'CANNOT_PARSE_TEXT',
    'CANNOT_PARSE_ESCAPE_SEQUENCE',
    'CANNOT_PARSE_QUOTED_STRING',
    'CANNOT_PARSE_DATE',
    'CANNOT_PARSE_DATETIME',
    'CANNOT_PARSE_NUMBER',
    'CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING',
    'CANNOT_PARSE_IPV4',
    'CANNOT_PARSE_IPV6',
    'CANNOT_PARSE_INPUT_ASSERTION_FAILED',
    'CANNOT_PARSE_UUID',
    'DUPLICATE_COLUMN',
    'ILLEGAL_COLUMN',
    'UNKNOWN_ELEMENT_IN_AST',
    'UNKNOWN_TYPE_OF_AST_NODE',
    'THERE_IS_NO_COLUMN',
    'TOO_DEEP_AST',
    'TOO_BIG_AST',
    'UNEXPECTED_AST_STRUCTURE',
    'SYNTAX_ERROR',
    'INCORRECT_DATA',
    'TYPE_MISMATCH',
    'VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE',
  ],
  404: [
    'UNKNOWN_TABLE',
    'UNKNOWN_FUNCTION',
    'UNKNOWN_IDENTIFIER',
    'UNKNOWN_TYPE',
    'UNKNOWN_STORAGE',
    'UNKNOWN_DATABASE',
    'UNKNOWN_SETTING',
    'UNKNOWN_DIRECTION_OF_SORTING',
    'UNKNOWN_AGGREGATE_FUNCTION',
    'UNKNOWN_FORMAT',
    'UNKNOWN_DATABASE_ENGINE',
    'UNKNOWN_TYPE_OF_QUERY',
    'UNKNOWN_ROLE',
  ],
  408: ['TIMEOUT_EXCEEDED'],
  411: ['HTTP_LENGTH_REQUIRED'],
  413: ['QUERY_IS_TOO_LARGE'],
  415: ['UNSUPPORTED_MEDIA_TYPE'],
  501: ['NOT_IMPLEMENTED'],
  503: ['SOCKET_TIMEOUT', 'CANNOT_OPEN_FILE', 'CANNOT_SCHEDULE_TASK'],
}
const statusByName = new Map(
  Object.entries(STATUS_BY_EXCEPTION).flatMap(([status, names]) => names.map((n) => [n, Number(status)] as const)),
)

/** The HTTP status ClickHouse answers an exception with (its exceptionCodeToHTTPStatus); 500 otherwise. */
export function httpStatusOf(exceptionName: string): number {
  return statusByName.get(exceptionName) ?? 500
}

/** The request body with its Content-Encoding undone. */
export function decodeBody(bytes: Uint8Array<ArrayBuffer>, contentEncoding: string | null): Uint8Array<ArrayBuffer> {
  switch (contentEncoding?.trim().toLowerCase()) {
    case undefined:
    case '':
    case 'identity':
      return bytes
    case 'gzip':
      return gunzipSync(bytes)
    case 'deflate':
      return inflateSync(bytes)
    case 'br':
      return brotliDecompressSync(bytes)
    case 'zstd':
      return zstdDecompressSync(bytes)
    default:
      throw new ClickHouseHttpError(415, 'UNSUPPORTED_MEDIA_TYPE', `Unknown Content-Encoding: ${contentEncoding}`)
  }
}

/** Compresses a response body as the server does when enable_http_compression=1 and the client accepts it. */
export function encodeBody(
  bytes: Uint8Array<ArrayBuffer>,
  acceptEncoding: string | null,
): { body: Uint8Array<ArrayBuffer>; encoding?: string } {
  const accepted = (acceptEncoding ?? '')
    .toLowerCase()
    .split(',')
    .map((e) => e.trim().split(';')[0])
  if (accepted.includes('gzip')) return { body: gzipSync(bytes), encoding: 'gzip' }
  if (accepted.includes('zstd')) return { body: zstdCompressSync(bytes), encoding: 'zstd' }
  if (accepted.includes('br')) return { body: brotliCompressSync(bytes), encoding: 'br' }
  if (accepted.includes('deflate')) return { body: deflateSync(bytes), encoding: 'deflate' }
  return { body: bytes }
}
