// A ClickHouse HTTP server for tests: the real ClickHouse engine (chdb, in this process) behind the
// ClickHouse HTTP interface, so @clickhouse/client talks to it as to a real server. It runs as a child
// process of the tests (started by clickhouse.ts) because chdb allows one data directory per process
// and runs at most UV_THREADPOOL_SIZE queries at once, which must be raised before the process starts.
//
//   bun test/support/clickhouse-server.ts --data-dir DIR   (user and password in CLICKHOUSE_RIG_USER /
//   CLICKHOUSE_RIG_PASSWORD; default `default` without password; CLICKHOUSE_RIG_CONFIG: a server config
//   file for the engine, e.g. one declaring users in users.xml)
//
// Prints one JSON line `{"port":N,"version":"26.x"}` to stdout once it listens on 127.0.0.1. Stops on
// SIGTERM/SIGINT, and when its stdin closes (the test process died), then also removing the data dir.
import { rmSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { Session } from 'chdb'
import type { Server } from 'bun'
import {
  ClickHouseHttpError,
  contentTypeOf,
  credentialsOf,
  decodeBody,
  encodeBody,
  errorBody,
  exceptionOf,
  httpStatusOf,
  isKillSync,
  outputFormatOf,
  parseQueryRequest,
  scriptFor,
  sqlString,
  summaryOf,
  wrongCredentials,
  type QueryRequest,
} from './clickhouse-http.ts'

const { values } = parseArgs({ options: { 'data-dir': { type: 'string' } } })
const dataDir = values['data-dir']
if (!dataDir) {
  console.error('usage: clickhouse-server.ts --data-dir DIR')
  process.exit(2)
}
const account = {
  user: process.env.CLICKHOUSE_RIG_USER || 'default',
  password: process.env.CLICKHOUSE_RIG_PASSWORD ?? '',
}
const configFile = process.env.CLICKHOUSE_RIG_CONFIG
/** A chdb Session on the data directory, with the server config file when one was given. */
const openSession = () =>
  new Session(dataDir!, configFile ? { connectionArgs: [`--config-file=${configFile}`] } : undefined)

// Held open for the life of the process: the engine, and what lives only in its memory (the `system`
// database is a Memory database), stays up between requests.
const keeper = openSession()
const version = (await keeper.queryAsync('SELECT version()', { format: 'TSV' })).text().trim()
const timezone = (await keeper.queryAsync('SELECT timezone()', { format: 'TSV' })).text().trim()

/** Running queries by query id, with the log_comment that finds them in system.processes. */
const running = new Map<string, string>()

/** HTTP sessions (session_id): one chdb Session each, so SET, USE and temporary tables persist. */
interface HttpSession {
  session: Session
  busy: boolean
  expiry?: ReturnType<typeof setTimeout>
}
const httpSessions = new Map<string, HttpSession>()

function baseHeaders(queryId?: string): Headers {
  const headers = new Headers({
    'X-ClickHouse-Server-Display-Name': 'chdb-rig',
    'X-ClickHouse-Timezone': timezone,
    'Keep-Alive': 'timeout=30',
  })
  if (queryId) headers.set('X-ClickHouse-Query-Id', queryId)
  return headers
}

function errorResponse(error: unknown, queryId?: string): Response {
  const exception = exceptionOf(error)
  const headers = baseHeaders(queryId)
  headers.set('Content-Type', 'text/plain; charset=UTF-8')
  headers.set('X-ClickHouse-Exception-Code', String(exception.code))
  return new Response(errorBody(exception, version), { status: httpStatusOf(exception.name), headers })
}

function ok(): Response {
  return new Response('Ok.\n', { headers: { 'Content-Type': 'text/html; charset=UTF-8' } })
}

/** Kills a running query from another Session (ASYNC: SYNC never returns under chdb). */
async function kill(logComment: string): Promise<void> {
  const session = openSession()
  try {
    await session.queryAsync(`KILL QUERY WHERE Settings['log_comment'] = ${sqlString(logComment)} ASYNC`, {
      format: 'TSV',
    })
  } catch {
    // the query may be gone already
  } finally {
    session.close()
  }
}

function acquireSession(request: QueryRequest): { session: Session; release(): void } {
  if (!request.sessionId) {
    const session = openSession()
    return { session, release: () => session.close() }
  }
  const id = request.sessionId
  let entry = httpSessions.get(id)
  if (!entry) {
    if (request.sessionCheck) throw new ClickHouseHttpError(372, 'SESSION_NOT_FOUND', `Session ${id} not found`)
    entry = { session: openSession(), busy: false }
    httpSessions.set(id, entry)
  }
  if (entry.busy)
    throw new ClickHouseHttpError(373, 'SESSION_IS_LOCKED', `Session ${id} is locked by a concurrent client`)
  entry.busy = true
  clearTimeout(entry.expiry)
  const held = entry
  return {
    session: held.session,
    release() {
      held.busy = false
      const close = () => {
        httpSessions.delete(id)
        held.session.close()
      }
      if (request.closeSession) close()
      else held.expiry = setTimeout(close, request.sessionTimeoutSeconds * 1000)
    },
  }
}

async function runQuery(req: Request, url: URL, server: Server<undefined>): Promise<Response> {
  const credentials = credentialsOf(url, req.headers)
  if (credentials.user !== account.user || credentials.password !== account.password)
    throw wrongCredentials(credentials.user)

  const body = decodeBody(new Uint8Array(await req.arrayBuffer()), req.headers.get('content-encoding'))
  let form: Map<string, string> | undefined
  const contentType = req.headers.get('content-type') ?? ''
  if (contentType.startsWith('multipart/form-data')) {
    const parsed = await new Response(body, { headers: { 'Content-Type': contentType } }).formData()
    form = new Map([...parsed.entries()].map(([key, value]) => [key, typeof value === 'string' ? value : '']))
  }
  const request = parseQueryRequest(req.method, url, new TextDecoder().decode(body), form)
  if (!request.sql.trim()) throw new ClickHouseHttpError(62, 'SYNTAX_ERROR', 'Empty query')
  if (isKillSync(request.sql)) {
    throw new ClickHouseHttpError(
      48,
      'NOT_IMPLEMENTED',
      'KILL QUERY ... SYNC never returns on this chdb test server; use KILL QUERY ... ASYNC',
    )
  }
  if (running.has(request.queryId)) {
    throw new ClickHouseHttpError(
      216,
      'QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING',
      `Query with id = ${request.queryId} is already running`,
    )
  }
  const { script, logComment } = scriptFor(request)
  const format = outputFormatOf(request.sql, request.defaultFormat)
  const { session, release } = acquireSession(request)
  running.set(request.queryId, logComment)
  server.timeout(req, 0) // a long query is not an idle connection
  let finished = false
  const onAbort = () => {
    if (!finished) void kill(logComment)
  }
  req.signal.addEventListener('abort', onAbort)
  try {
    const result = await session.queryAsync(script, { format: request.defaultFormat })
    const headers = baseHeaders(request.queryId)
    headers.set('Content-Type', contentTypeOf(format))
    headers.set('X-ClickHouse-Format', format)
    // chdb reports the result's rows and in-memory bytes only, not what was read or written.
    headers.set(
      'X-ClickHouse-Summary',
      summaryOf({ resultRows: result.rowsRead, resultBytes: result.bytesRead, elapsedSeconds: result.elapsed }),
    )
    const compressionEnabled = request.settings.some(
      ([name, value]) => name === 'enable_http_compression' && value === '1',
    )
    const bytes = result.bytes() as Uint8Array<ArrayBuffer> // read as bytes: a string would stop at the first NUL
    const encoded = compressionEnabled ? encodeBody(bytes, req.headers.get('accept-encoding')) : { body: bytes }
    if (encoded.encoding) headers.set('Content-Encoding', encoded.encoding)
    return new Response(encoded.body, { headers })
  } finally {
    finished = true
    req.signal.removeEventListener('abort', onAbort)
    running.delete(request.queryId)
    release()
  }
}

async function handle(req: Request, server: Server<undefined>): Promise<Response> {
  const url = new URL(req.url)
  if (url.pathname === '/ping' || url.pathname === '/replicas_status') return ok()
  // A GET of / without a query is the server's health answer, given without authentication.
  if (url.pathname === '/' && (req.method === 'GET' || req.method === 'HEAD') && !url.searchParams.has('query'))
    return ok()
  if (url.pathname !== '/') {
    return new Response(`There is no handle ${url.pathname}\n\nUse / or /ping for health checks.\n`, {
      status: 404,
      headers: { 'Content-Type': 'text/plain; charset=UTF-8' },
    })
  }
  const queryId = url.searchParams.get('query_id') ?? undefined
  try {
    return await runQuery(req, url, server)
  } catch (error) {
    return errorResponse(error, queryId)
  }
}

const server = Bun.serve({ hostname: '127.0.0.1', port: 0, idleTimeout: 30, fetch: handle })
console.log(JSON.stringify({ port: server.port, version }))

let stopping = false
async function shutdown(removeDataDir: boolean): Promise<never> {
  if (!stopping) {
    stopping = true
    await server.stop(true)
    for (const entry of httpSessions.values()) entry.session.close()
    keeper.close()
    if (removeDataDir) rmSync(dataDir!, { recursive: true, force: true })
  }
  process.exit(0)
}
process.on('SIGTERM', () => void shutdown(false))
process.on('SIGINT', () => void shutdown(false))
// The test process holds our stdin open; when it ends (however it died), so do we.
void (async () => {
  for await (const _ of Bun.stdin.stream()) {
    // nothing is ever written; reading only notices the end
  }
  await shutdown(true)
})()
