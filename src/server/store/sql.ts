// SQL text with numbered placeholders, from a tagged template: sql`... WHERE a = ${x} AND b IN ${list}`
// is a Fragment whose `sql` is '... WHERE a = $1 AND b IN ($2, $3)' and whose `params` are [x, ...list].
// Every interpolated value becomes a parameter; the only text that enters a statement is the literal
// text of the templates, nested Fragments (numbered on) and `ident`, an identifier or token checked
// against a fixed set. So no value ever reaches the text, and the texts stay few and fixed, as the
// PostgreSQL driver's runAll needs (driver.ts): a text varies only with its fixed parts and with the
// length of the lists spelled out in it (keep those out of runAll statements).
//
// Why a tagged template and not a query builder such as Kysely (which has dialects for both stores):
// - the store already has its dialect abstraction (dialect.ts) and writes SQL by hand for both stores,
//   with shapes a builder would fight (unnest array inserts, ON CONFLICT ... WHERE, UNION ALL of range
//   scans chosen for SQLite's planner); a builder would add a second abstraction over the same SQL;
// - the ingest path sends prepared, fixed texts in one pipelined exchange (runAll); a builder compiles
//   a query object on every call and hides which text reaches the server, where this keeps the text in
//   the source, readable and greppable;
// - `dbm` is one compiled binary that should start in milliseconds, and placeholder numbering is all
//   the store needed from a builder. Measured once (2026-11, a file building one grouped, sorted query,
//   `bun build --minify --target=bun`): with Kysely 0.29.9 and its PostgreSQL and SQLite dialects the
//   bundle is 165 KB (32 KB gzipped) and loading it plus compiling the query took 41 ms; with this
//   module 1.4 KB and 8 ms (medians of 11 runs on a busy 2-core machine).

/** Which store's SQL: the embedded SQLite file or a PostgreSQL server. */
export type Dialect = 'sqlite' | 'postgres'

/** A statement and its parameters; a JS array parameter is bound as a PostgreSQL array (`$1::bigint[]`). */
export interface SqlStatement {
  sql: string
  params?: unknown[]
}

/** Only this module makes Fragments, so their text comes from templates, ident and join alone. */
const MADE_HERE = Symbol('sql fragment')

/** A piece of SQL: literal text around its parameters, numbered when it becomes a statement. */
export class Fragment {
  /** `strings` has one entry more than `values`: text, value, text, ..., text. */
  readonly strings: readonly string[]
  readonly values: readonly unknown[]

  constructor(strings: string[], values: unknown[], madeHere: typeof MADE_HERE) {
    if (madeHere !== MADE_HERE) throw new Error('SQL fragments are made by sql``, ident() and join()')
    this.strings = Object.freeze(strings)
    this.values = Object.freeze(values)
  }

  /** The text with `$1`, `$2`, ... in place of the parameters. */
  get sql(): string {
    let text = this.strings[0]!
    for (let i = 0; i < this.values.length; i++) text += `$${i + 1}${this.strings[i + 1]}`
    return text
  }

  /** The parameters, in the order of their placeholders. */
  get params(): unknown[] {
    return [...this.values]
  }
}

function build(add: (builder: Builder) => void): Fragment {
  const builder = new Builder()
  add(builder)
  return new Fragment(builder.strings, builder.values, MADE_HERE)
}

class Builder {
  readonly strings: string[] = ['']
  readonly values: unknown[] = []

  text(text: string): void {
    this.strings[this.strings.length - 1] += text
  }

  value(value: unknown): void {
    this.values.push(value)
    this.strings.push('')
  }

  fragment(fragment: Fragment): void {
    this.text(fragment.strings[0]!)
    for (let i = 0; i < fragment.values.length; i++) {
      this.value(fragment.values[i])
      this.text(fragment.strings[i + 1]!)
    }
  }

  /** A value interpolated in a template: a Fragment inlined, a list spelled out, anything else a parameter. */
  interpolate(value: unknown): void {
    if (value instanceof Fragment) this.fragment(value)
    else if (value instanceof Param) this.value(value.value)
    else if (Array.isArray(value)) {
      // An empty list would be `IN ()`, which PostgreSQL refuses: `IN (NULL)` matches nothing.
      if (value.length === 0) {
        this.text('(NULL)')
        return
      }
      this.text('(')
      value.forEach((item, i) => {
        if (i > 0) this.text(', ')
        this.interpolate(item)
      })
      this.text(')')
    } else this.value(value)
  }
}

/** A value bound as one parameter even when it is an array (a PostgreSQL array, e.g. for `= ANY($1)` or unnest). */
class Param {
  constructor(readonly value: unknown) {}
}

/**
 * A Fragment from a template: each `${value}` is a parameter, an array a parenthesised list of them
 * (`(NULL)` when empty), a Fragment is inlined, `param(array)` one array parameter.
 */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Fragment {
  return build((b) => {
    b.text(strings[0]!)
    for (let i = 0; i < values.length; i++) {
      b.interpolate(values[i])
      b.text(strings[i + 1]!)
    }
  })
}

/** Binds `value` as a single parameter, arrays included (which `sql` would spell out as a list). */
export function param(value: unknown): Param {
  return new Param(value)
}

/**
 * The escape hatch for text: an identifier or token (a column, a table, a sort order, a bucket size)
 * that must be one of `allowed`, a fixed set in the code; anything else throws.
 */
export function ident(
  name: string | number,
  allowed: readonly (string | number)[] | ReadonlySet<string | number>,
): Fragment {
  const ok = Array.isArray(allowed) ? allowed.includes(name) : (allowed as ReadonlySet<string | number>).has(name)
  if (!ok) throw new Error(`SQL identifier not in its fixed set: ${JSON.stringify(name)}`)
  return build((b) => b.text(String(name)))
}

/** The fragments one after another with `separator` between them (a comma by default). */
export function join(fragments: readonly Fragment[], separator: Fragment = sql`, `): Fragment {
  return build((b) => {
    fragments.forEach((f, i) => {
      if (i > 0) b.fragment(separator)
      b.fragment(f)
    })
  })
}
