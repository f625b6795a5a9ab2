// Canaries for the postgres.js internals that src/agent/own-statements.ts relies on. postgres.js is pinned
// exactly (package.json); before raising the pin, run this file: a failure names the internal that the new
// version removed or changed, and what own-statements.ts needs from it. Each test drives a plain pool (not
// the agent's marked one) against real PostgreSQL, so it checks postgres.js alone.
import { afterAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { PREPARED } from '../../src/agent/own-statements.ts'
import { sharedPostgres } from '../support/postgres.ts'

const cleanups: (() => Promise<unknown>)[] = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {})
})

/** A plain pool of one connection that reads no array types (as agentPostgres sets fetch_types). */
async function plainPool(): Promise<postgres.Sql> {
  const server = await sharedPostgres(17)
  const sql = postgres(await server.freshDatabase(), { max: 1, onnotice: () => {}, fetch_types: false })
  cleanups.push(() => sql.end())
  return sql
}

/** The failure message of a canary: which internal, and what own-statements.ts needs of it. */
const internal = (name: string, need: string) =>
  `postgres.js internal ${name} changed: src/agent/own-statements.ts needs ${need}`

type RawQuery = { strings: readonly string[]; handler: (q: RawQuery) => unknown }
type Connection = { execute: (q: RawQuery) => unknown }

describe('postgres.js internals used by own-statements.ts', () => {
  test('query.handler and query.strings: the handler is called with the query as it is sent, and strings read then', async () => {
    const need = 'a query object with `handler(query)`, called when it is sent, and `strings` read after that call'
    const sql = await plainPool()
    for (const make of [() => sql`SELECT current_query() AS q`, () => sql.unsafe('SELECT current_query() AS q')]) {
      const query = make() as unknown as RawQuery
      expect(typeof query.handler, internal('query.handler', need)).toBe('function')
      expect(Array.isArray(query.strings), internal('query.strings', need)).toBe(true)
      const send = query.handler
      let called = 0
      query.handler = (q) => {
        called++
        q.strings = ['/* canary */ SELECT current_query() AS q']
        return send(q)
      }
      const [row] = await (query as unknown as Promise<{ q: string }[]>)
      expect(called, internal('query.handler', need)).toBe(1)
      expect(row!.q, internal('query.strings', need)).toBe('/* canary */ SELECT current_query() AS q')
    }
  })

  test("begin: BEGIN goes through the pool's own `unsafe` with an `onexecute` option given the connection", async () => {
    const need =
      "sql.begin to send BEGIN as sql.unsafe('begin …', [], { onexecute }), onexecute called with the transaction's connection"
    const sql = await plainPool()
    const own = sql as unknown as Record<string, unknown>
    const unsafe = own.unsafe as (...args: unknown[]) => unknown
    const begins: unknown[][] = []
    let connection: unknown
    own.unsafe = (...args: unknown[]) => {
      begins.push(args)
      const options = args[2] as { onexecute?: (c: unknown) => unknown } | undefined
      if (typeof options?.onexecute === 'function') {
        const onexecute = options.onexecute
        args[2] = { ...options, onexecute: (c: unknown) => ((connection = c), onexecute(c)) }
      }
      return unsafe.apply(sql, args)
    }
    expect(
      await sql.begin('read only', async (tx) => (await tx`SELECT 1 AS one`)[0]!.one),
      internal('begin', need),
    ).toBe(1)
    expect(begins.length, internal('sql.unsafe (BEGIN)', need)).toBe(1)
    expect(String(begins[0]![0]), internal('sql.unsafe (BEGIN)', need)).toMatch(/^begin read only/)
    expect(typeof (begins[0]![2] as { onexecute?: unknown })?.onexecute, internal('onexecute', need)).toBe('function')
    expect(typeof (connection as Partial<Connection> | undefined)?.execute, internal('onexecute', need)).toBe(
      'function',
    )
  })

  test("connection.execute: a transaction's SAVEPOINT, ROLLBACK TO, COMMIT and ROLLBACK pass through it with their strings", async () => {
    const need =
      "the transaction's connection (from onexecute) to send its own statements as queries with `strings` through `execute`"
    const sql = await plainPool()
    const own = sql as unknown as Record<string, unknown>
    const unsafe = own.unsafe as (...args: unknown[]) => unknown
    const sent: string[] = []
    own.unsafe = (...args: unknown[]) => {
      const options = args[2] as { onexecute?: (c: Connection) => unknown } | undefined
      if (typeof options?.onexecute === 'function') {
        const onexecute = options.onexecute
        args[2] = {
          ...options,
          onexecute: (c: Connection) => {
            const execute = c.execute as Connection['execute'] & { canary?: true }
            // The pool has one connection: the second transaction gets the same one, wrapped already.
            if (!execute.canary) {
              const record = (q: RawQuery) => (
                sent.push(Array.isArray(q.strings) ? q.strings.join('?').trim() : '<no strings>'), execute(q)
              )
              c.execute = Object.assign(record, { canary: true as const })
            }
            return onexecute(c)
          },
        }
      }
      return unsafe.apply(sql, args)
    }
    await sql.begin(async (tx) => {
      await tx.savepoint(async (sp) => sp`SELECT 1`)
      await tx.savepoint(async (sp) => sp`SELECT 1/0`).catch(() => {})
    })
    await sql.begin(async () => Promise.reject(new Error('roll back'))).catch(() => {})
    const own_statements = sent.filter((s) => /^(savepoint|rollback|commit)/i.test(s))
    expect(own_statements, internal('connection.execute', need)).toEqual([
      'savepoint ?',
      'savepoint ?',
      'rollback to ?',
      'commit',
      'rollback',
    ])
  })

  test('options.parsers, serializers and shared.typeArrayMap: read per value, a parser marked `array` given the text after `{`', async () => {
    const need =
      'sql.options.parsers/serializers/shared.typeArrayMap read when values are parsed and sql.array is sent, and `parser.array === true` to mean the text without its first character'
    const sql = await plainPool()
    const options = (sql as unknown as { options: Record<string, unknown> }).options
    const parsers = options?.parsers as Record<number, ((x: string) => unknown) & { array?: boolean }> | undefined
    const serializers = options?.serializers as Record<number, (x: unknown) => unknown> | undefined
    const typeArrayMap = (options?.shared as { typeArrayMap?: Record<number, number> } | undefined)?.typeArrayMap
    for (const [name, value] of [
      ['options.parsers', parsers],
      ['options.serializers', serializers],
      ['options.shared.typeArrayMap', typeArrayMap],
    ] as const) {
      expect(typeof value, internal(name, need)).toBe('object')
    }
    // With fetch_types off, no array type is known until it is installed.
    expect(
      parsers![1007],
      internal('fetch_types: false', 'no array parser installed when fetch_types is off'),
    ).toBeUndefined()
    const parsed: string[] = []
    parsers![1007] = Object.assign((text: string) => (parsed.push(text), 'parsed'), { array: true })
    const written: unknown[] = []
    typeArrayMap![25] = 1009
    serializers![1009] = (x: unknown) => (written.push(x), '{"a","b"}')
    const [row] = await sql`SELECT '{1,2}'::int4[] AS i, ${sql.array(['a', 'b'])}::text[] AS t`
    expect(parsed, internal('parser.array', need)).toEqual(['1,2}'])
    expect(row!.i, internal('options.parsers', need)).toBe('parsed')
    expect(written, internal('options.serializers / shared.typeArrayMap', need)).toEqual([['a', 'b']])
  })
  test('unsafe with PREPARED: a statement with or without parameters is prepared once on the connection and its plan reused', async () => {
    const need =
      "sql.unsafe(text, params, { prepare: true, simple: false }) to send a named prepared statement, params or not (the agent's PREPARED)"
    const sql = await plainPool()
    for (const [text, params] of [
      ['SELECT count(*) AS n FROM pg_class', []],
      ['SELECT count(*) AS n FROM pg_class WHERE relpages >= $1', [0]],
    ] as const) {
      for (let i = 0; i < 7; i++) await sql.unsafe(text, [...params], PREPARED)
      const [row] = await sql`SELECT count(*)::int AS statements, sum(generic_plans + custom_plans)::int AS runs
        FROM pg_prepared_statements WHERE statement = ${text}`
      // One prepared statement run seven times: planned anew at most for the first five (custom plans), then its generic plan.
      expect(row, internal('the prepare and simple query options', need)).toEqual({ statements: 1, runs: 7 })
    }
  })
})
