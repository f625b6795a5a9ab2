// Every statement the agent sends to a monitored PostgreSQL starts with OWN_MARKER, whatever role it
// connects with, so that query_stats can leave the agent's own statements out of the application's
// (pg_stat_statements keeps a statement's leading comment in its text; comments do not change a
// queryid). The marker is added in one place: markOwnStatements wraps the postgres.js `sql` the
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
import postgres from 'postgres'

export const OWN_MARKER = '/* dbm-agent */'

/** How explain_plans prepares a statement it explains (`PREPARE dbm_explain AS <statement>`). */
export const EXPLAIN_PREPARE = 'PREPARE dbm_explain AS '

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
        if (typeof options?.onexecute === 'function') args[2] = { ...options, onexecute: markingConnection(options.onexecute) }
        return mark(unsafe.apply(sql, args))
      },
      { marked: true as const },
    )
    own.unsafe = markedUnsafe
  }
  return new Proxy(sql, {
    apply: (target, thisArg, args) => mark(Reflect.apply(target as unknown as (...a: unknown[]) => unknown, thisArg, args)),
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
export function agentPostgres(dsn: string, options: postgres.Options<Record<string, postgres.PostgresType>>, types?: ArrayTypes): postgres.Sql {
  const sql = postgres(dsn, { ...options, fetch_types: false })
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

/** Installs array types in a pool as postgres.js's fetch_types does (its addArrayType, with its array parser and serializer). */
export function addArrayTypes(sql: postgres.Sql, types: ArrayTypes): void {
  const options = (sql as unknown as { options: TypeOptions }).options
  for (const { oid, typarray } of types) {
    if (options.parsers[typarray] && options.serializers[typarray]) continue
    const parser = options.parsers[oid]
    options.shared.typeArrayMap[oid] = typarray
    options.parsers[typarray] = Object.assign((xs: string) => arrayParser(xs, parser, typarray), { array: true })
    options.serializers[typarray] = (xs: unknown) => arraySerializer(xs, options.serializers[oid], options, typarray)
  }
}

// postgres.js 3.4's arraySerializer and arrayParser (src/types.js, not exported; public domain), as its
// fetch_types installs them.
function arrayEscape(x: string): string {
  return x.replace(/\\/g, '\\\\').replace(/"/g, '\\"')
}

function arraySerializer(xs: unknown, serializer: ((x: unknown) => unknown) | undefined, options: TypeOptions, typarray: number): unknown {
  if (!Array.isArray(xs)) return xs
  if (!xs.length) return '{}'
  const first = xs[0] as { type?: unknown }
  // Only _box (1020) has the ';' delimiter for arrays, all other types use ','.
  const delimiter = typarray === 1020 ? ';' : ','
  if (Array.isArray(first) && !first.type) return `{${xs.map((x) => arraySerializer(x, serializer, options, typarray)).join(delimiter)}}`
  return `{${xs
    .map((x) => {
      if (x === undefined) {
        x = options.transform.undefined
        if (x === undefined) throw Object.assign(new Error('Undefined values are not allowed'), { code: 'UNDEFINED_VALUE' })
      }
      const v = x as { type?: unknown; value?: unknown } | null
      return v === null ? 'null' : `"${arrayEscape(serializer ? String(serializer(v.type ? v.value : v)) : `${v}`)}"`
    })
    .join(delimiter)}}`
}

interface ParserState {
  i: number
  char: string
  str: string
  quoted: boolean
  last: number
  p?: string
}

function arrayParser(x: string, parser: ((x: string) => unknown) | undefined, typarray: number): unknown[] {
  return arrayParserLoop({ i: 0, char: '', str: '', quoted: false, last: 0 }, x, parser, typarray)
}

function arrayParserLoop(s: ParserState, x: string, parser: ((x: string) => unknown) | undefined, typarray: number): unknown[] {
  const xs: unknown[] = []
  const delimiter = typarray === 1020 ? ';' : ','
  for (; s.i < x.length; s.i++) {
    s.char = x[s.i]!
    if (s.quoted) {
      if (s.char === '\\') {
        s.str += x[++s.i]
      } else if (s.char === '"') {
        xs.push(parser ? parser(s.str) : s.str)
        s.str = ''
        s.quoted = x[s.i + 1] === '"'
        s.last = s.i + 2
      } else {
        s.str += s.char
      }
    } else if (s.char === '"') {
      s.quoted = true
    } else if (s.char === '{') {
      s.last = ++s.i
      xs.push(arrayParserLoop(s, x, parser, typarray))
    } else if (s.char === '}') {
      s.quoted = false
      if (s.last < s.i) xs.push(parser ? parser(x.slice(s.last, s.i)) : x.slice(s.last, s.i))
      s.last = s.i + 1
      break
    } else if (s.char === delimiter && s.p !== '}' && s.p !== '"') {
      xs.push(parser ? parser(x.slice(s.last, s.i)) : x.slice(s.last, s.i))
      s.last = s.i + 1
    }
    s.p = s.char
  }
  if (s.last < s.i) xs.push(parser ? parser(x.slice(s.last, s.i + 1)) : x.slice(s.last, s.i + 1))
  return xs
}
