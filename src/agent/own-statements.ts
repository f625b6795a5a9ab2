// Every statement the agent sends to a monitored PostgreSQL starts and ends with OWN_MARKER, whatever
// role it connects with, so that query_stats can leave the agent's own statements out of the
// application's (comments do not change a queryid). pg_stat_statements keeps a statement's leading
// comment in its text up to PostgreSQL 17 and its trailing one on every major (18 starts the text at the
// statement's first token); the server log and pg_stat_activity show the leading one. The trailing
// marker is on a line of its own, so that a statement ending in a `--` comment does not swallow it.
// The marker is added in one place: markOwnStatements wraps the postgres.js `sql` the
// collectors use. A query is marked when it is sent, not when it is built: a query nested in another
// as a fragment is never sent and stays as written, and helpers (sql.array, sql(identifier)) are
// untouched. Tagged templates keep one marked copy of their strings, so prepared statements are reused.
//
// postgres.js sends some statements on its own. The array types it would read on each new connection
// are read here instead, marked, once per session (agentPostgres turns its fetch_types off and
// addArrayTypes installs them as postgres.js does). A transaction's BEGIN goes through the pool's
// `unsafe`, marked here; the connection it runs on is handed to the transaction by postgres.js (its
// onexecute option), and that connection's execute is wrapped so that the transaction's SAVEPOINT,
// ROLLBACK TO, COMMIT and ROLLBACK, which postgres.js builds itself, are marked as they are sent.
//
// These are postgres.js internals (no public hook rewrites a statement as it is sent), so postgres.js is
// pinned exactly in package.json and test/agent/postgres-internals.test.ts checks each one: run it before
// raising the pin; a failure names the internal that changed.
import postgres from 'postgres'
import { postgresConnection } from './postgres-dsn.ts'

export const OWN_MARKER = '/* dbm-agent */'

/**
 * Query options for `unsafe` with one of the agent's fixed statements: a text that is the same every
 * cycle for a server version (values, if any, as scalar parameters). It goes as a prepared statement,
 * which PostgreSQL plans once per connection and reuses, rather than planning it every cycle as the
 * simple and unnamed extended protocols do: planning the catalog views was 5-8 ms of the agent's
 * database time a cycle with 1,000 tables (PostgreSQL 17; bench/RESULTS.md, Agent). Tagged templates
 * are prepared already. Not for texts built from anything else (a statement of the application, a
 * list of names), which would each stay prepared on the connection, nor for array parameters, whose
 * length a reused generic plan cannot know. A statement with parameters is planned anew for its first
 * five runs (PostgreSQL's custom plans) before its generic plan is kept, so the agent's own limits
 * (integers of its code) are written into the texts rather than passed. `simple: false` is postgres.js's (not in its types): a
 * statement without parameters otherwise goes by the simple protocol, which cannot be prepared.
 */
export const PREPARED = { prepare: true, simple: false } as postgres.UnsafeQueryOptions

/** What the agent touches of a postgres.js query before it is sent. */
interface SentQuery {
  strings: readonly string[]
  handler: ((query: SentQuery) => unknown) & { debug?: unknown }
}

function isQuery(value: unknown): value is SentQuery {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { handler?: unknown }).handler === 'function' &&
    Array.isArray((value as { strings?: unknown }).strings)
  )
}

/** The marked strings of each template: one copy per template (postgres.js caches by the strings' identity). */
const markedTemplates = new WeakMap<readonly string[], string[]>()

function marked(strings: readonly string[]): readonly string[] {
  if (strings.length === 0 || strings[0]!.startsWith(OWN_MARKER)) return strings
  const tagged = Array.isArray((strings as { raw?: unknown }).raw)
  const cached = tagged ? markedTemplates.get(strings) : undefined
  if (cached) return cached
  const out = [`${OWN_MARKER} ${strings[0]}`, ...strings.slice(1)]
  out[out.length - 1] = `${out[out.length - 1]}\n${OWN_MARKER}`
  if (tagged) markedTemplates.set(strings, out)
  return out
}

/** Marks `value` when it is a query, at the moment postgres.js sends it. */
function mark<T>(value: T): T {
  if (!isQuery(value)) return value
  const send = value.handler
  const handler = ((query: SentQuery) => {
    query.strings = marked(query.strings)
    return send(query)
  }) as SentQuery['handler']
  handler.debug = send.debug
  value.handler = handler
  return value
}

/** The part of a postgres.js connection a transaction's statements go through. */
type Execute = ((query: SentQuery) => unknown) & { marked?: true }

/** postgres.js's `onexecute` of a BEGIN, with the transaction's connection marking what it sends from then on. */
function markingConnection(onexecute: (connection: { execute: Execute }) => unknown) {
  return (connection: { execute: Execute }) => {
    const execute = connection.execute
    if (typeof execute === 'function' && !execute.marked) {
      connection.execute = Object.assign(
        (query: SentQuery) => {
          if (Array.isArray(query.strings)) query.strings = marked(query.strings)
          return execute(query)
        },
        { marked: true as const },
      )
    }
    return onexecute(connection)
  }
}

/** The last argument is the callback of begin/savepoint. */
function splitCallback(args: unknown[]): [unknown[], (sql: postgres.Sql) => unknown] {
  const rest = [...args]
  const fn = rest.pop() as (sql: postgres.Sql) => unknown
  return [rest, fn]
}

/**
 * `sql` with every statement it sends marked as the agent's: tagged templates, `unsafe`, and those of
 * transactions (their BEGIN, SAVEPOINT, COMMIT and ROLLBACK included), savepoints and reserved connections.
 */
export function markOwnStatements(sql: postgres.Sql): postgres.Sql {
  const own = sql as unknown as Record<string, unknown>
  const unsafe = own.unsafe as ((...args: unknown[]) => unknown) & { marked?: true }
  if (typeof unsafe === 'function' && !unsafe.marked) {
    // Replaced on the object itself: postgres.js's begin sends its BEGIN through it.
    const markedUnsafe = Object.assign(
      (...args: unknown[]) => {
        const options = args[2] as { onexecute?: (connection: { execute: Execute }) => unknown } | undefined
        if (typeof options?.onexecute === 'function')
          args[2] = { ...options, onexecute: markingConnection(options.onexecute) }
        return mark(unsafe.apply(sql, args))
      },
      { marked: true as const },
    )
    own.unsafe = markedUnsafe
  }
  return new Proxy(sql, {
    apply: (target, thisArg, args) =>
      mark(Reflect.apply(target as unknown as (...a: unknown[]) => unknown, thisArg, args)),
    get: (target, property) => {
      const value = Reflect.get(target, property) as unknown
      if (typeof value !== 'function') return value
      const method = value as (...args: unknown[]) => unknown
      if (property === 'begin' || property === 'savepoint') {
        return (...args: unknown[]) => {
          const [rest, fn] = splitCallback(args)
          return method.call(target, ...rest, (tx: postgres.Sql) => fn(markOwnStatements(tx)))
        }
      }
      if (property === 'reserve') return async () => markOwnStatements((await method.call(target)) as postgres.Sql)
      return method
    },
  })
}

/** Array types of the server: each element type's oid and its array type's oid. */
export type ArrayTypes = { oid: number; typarray: number }[]

/** What addArrayTypes fills of a pool's postgres.js options. */
interface TypeOptions {
  parsers: Record<number, ((x: string) => unknown) & { array?: boolean }>
  serializers: Record<number, (x: unknown) => unknown>
  shared: { typeArrayMap: Record<number, number> }
  transform: { undefined?: unknown }
}

/** The agent's postgres.js pool: its statements marked, its array types from `types` (fetchArrayTypes) rather than read unmarked per connection. */
export function agentPostgres(
  dsn: string,
  options: postgres.Options<Record<string, postgres.PostgresType>>,
  types?: ArrayTypes,
): postgres.Sql {
  const { url, socket } = postgresConnection(dsn)
  const sql = postgres(url, { ...options, ...(socket === undefined ? {} : { host: socket }), fetch_types: false })
  if (types) addArrayTypes(sql, types)
  return markOwnStatements(sql)
}

/** The array types postgres.js reads when fetch_types is on, read through the marked `sql`. */
export async function fetchArrayTypes(sql: postgres.Sql): Promise<ArrayTypes> {
  const rows = await sql`
    SELECT b.oid::int8::float8 AS oid, b.typarray::int8::float8 AS typarray
    FROM pg_catalog.pg_type a LEFT JOIN pg_catalog.pg_type b ON b.oid = a.typelem
    WHERE a.typcategory = 'A' AND b.oid IS NOT NULL
    GROUP BY b.oid, b.typarray
    ORDER BY b.oid`
  return rows.map((r) => ({ oid: Number(r.oid), typarray: Number(r.typarray) }))
}

/**
 * Installs array types in a pool, as postgres.js's fetch_types would: each array type reads and writes
 * PostgreSQL's text form of arrays with its element type's own parser and serializer.
 */
export function addArrayTypes(sql: postgres.Sql, types: ArrayTypes): void {
  const options = (sql as unknown as { options: TypeOptions }).options
  for (const { oid, typarray } of types) {
    if (options.parsers[typarray] && options.serializers[typarray]) continue
    const readElement = options.parsers[oid]
    const delimiter = arrayDelimiter(typarray)
    options.shared.typeArrayMap[oid] = typarray
    // postgres.js hands a parser marked `array` the text without its first character (`{`, or the `[` of bounds).
    const whole = (rest: string) => (/^-?\d+:-?\d+\]/.test(rest) ? `[${rest}` : `{${rest}`)
    options.parsers[typarray] = Object.assign((rest: string) => readPgArray(whole(rest), readElement, delimiter), {
      array: true,
    })
    options.serializers[typarray] = (value: unknown) => writePgArray(value, options.serializers[oid], delimiter)
  }
}

/** The element delimiter of an array type's text form: `;` for box[] (oid 1020), `,` for every other type. */
const arrayDelimiter = (typarray: number) => (typarray === 1020 ? ';' : ',')

/**
 * PostgreSQL's text form of an array (`{1,2,"a \"b\"",NULL,{3,4}}`, perhaps after `[1:2]=` bounds) as nested
 * arrays: a quoted element is its text with backslash escapes undone, an unquoted NULL is null, every other
 * element is `read` (the element type's parser) of its text. Text that ends early ends the arrays open.
 */
export function readPgArray(text: string, read: ((s: string) => unknown) | undefined, delimiter = ','): unknown[] {
  const element = (s: string) => (read ? read(s) : s)
  let at = text.startsWith('[') ? text.indexOf('=') + 1 : 0
  const list = (): unknown[] => {
    const out: unknown[] = []
    at++ // past '{'
    while (at < text.length) {
      const c = text[at]
      if (c === '}') {
        at++
        return out
      }
      if (c === delimiter) at++
      else if (c === '{') out.push(list())
      else if (c === '"') {
        let value = ''
        for (at++; at < text.length && text[at] !== '"'; at++)
          value += text[at] === '\\' ? (text[++at] ?? '') : text[at]
        at++
        out.push(element(value))
      } else {
        const start = at
        while (at < text.length && text[at] !== delimiter && text[at] !== '}') at++
        const raw = text.slice(start, at)
        out.push(raw === 'NULL' ? null : element(raw))
      }
    }
    return out
  }
  return text[at] === '{' ? list() : []
}

/** A JavaScript array as PostgreSQL's text form of an array, each element written by `write` and quoted; null and undefined as NULL. */
export function writePgArray(value: unknown, write: ((x: unknown) => unknown) | undefined, delimiter = ','): unknown {
  if (!Array.isArray(value)) return value
  const item = (x: unknown): string => {
    if (Array.isArray(x)) return writePgArray(x, write, delimiter) as string
    if (x === null || x === undefined) return 'NULL'
    const written = String(write ? write(x) : x)
    return `"${written.replace(/[\\"]/g, '\\$&')}"`
  }
  return `{${value.map(item).join(delimiter)}}`
}
