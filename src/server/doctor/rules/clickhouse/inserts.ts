// The INSERT statements of the last hour, by the table they write to: what the parts rules name as the
// cause of a partition's parts (every INSERT makes at least one part per partition it touches), and what
// the small-inserts rule counts. The target comes from the statement's text (system.query_log's query,
// as the agent sends it): `INSERT INTO [TABLE] [db.]table ...`, each name bare, `backquoted` or
// "double-quoted" with backslash escapes. A name without its database matches a table of that name in
// any database (the session's current database is not in query_log's text). INSERT INTO FUNCTION
// writes to no table here and is left out.
import type { QueryStatsRow } from '../../../store/statements/reads.ts'
import type { DoctorContext } from '../../context.ts'

export const HOUR_MS = 3_600_000

/** Statements read per diagnosis, the most called first: a writer beyond them is not named. */
const MAX_STATEMENTS = 1_000

export interface InsertTarget {
  /** Undefined when the statement does not name it. */
  database?: string
  table: string
}

const ESCAPES: Record<string, string> = {
  b: '\b',
  f: '\f',
  r: '\r',
  n: '\n',
  t: '\t',
  '0': '\0',
  a: '\x07',
  v: '\v',
  e: '\x1b',
}

/**
 * One identifier at `text[i]`: its name and the index after it, or undefined. A quoted one takes
 * ClickHouse's escapes (as in string literals: `\n`, `\t`, `\xHH` bytes of UTF-8, `\` before any other
 * character for that character) and a doubled quote.
 */
function identifierAt(text: string, i: number): { name: string; end: number } | undefined {
  const quote = text[i]
  if (quote === '`' || quote === '"') {
    const bytes: number[] = []
    const encoder = new TextEncoder()
    const add = (s: string) => bytes.push(...encoder.encode(s))
    for (let j = i + 1; j < text.length; j++) {
      const c = text[j]!
      if (c === '\\' && j + 1 < text.length) {
        const next = text[++j]!
        const hex = next === 'x' ? /^[0-9A-Fa-f]{2}/.exec(text.slice(j + 1, j + 3)) : null
        if (hex) {
          bytes.push(parseInt(hex[0], 16))
          j += 2
        } else {
          add(ESCAPES[next] ?? next)
        }
      } else if (c === quote) {
        if (text[j + 1] === quote) {
          add(quote)
          j++
        } else {
          const name = new TextDecoder().decode(new Uint8Array(bytes))
          return name ? { name, end: j + 1 } : undefined
        }
      } else {
        // A surrogate pair stays whole.
        const cp = text.codePointAt(j)!
        add(String.fromCodePoint(cp))
        if (cp > 0xffff) j++
      }
    }
    return undefined
  }
  const bare = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i, i + 300))
  return bare ? { name: bare[0], end: i + bare[0].length } : undefined
}

/** Skips white space and comments (`-- …`, `# …`, `/* … *\/`) from `i`. */
function skipBlank(text: string, i: number): number {
  for (;;) {
    while (i < text.length && /\s/.test(text[i]!)) i++
    if (text.startsWith('--', i) || text.startsWith('#', i)) {
      const end = text.indexOf('\n', i)
      i = end < 0 ? text.length : end + 1
    } else if (text.startsWith('/*', i)) {
      const end = text.indexOf('*/', i + 2)
      i = end < 0 ? text.length : end + 2
    } else {
      return i
    }
  }
}

/** The table an INSERT statement writes to; undefined for any other statement (and INSERT INTO FUNCTION). */
export function insertTarget(text: string): InsertTarget | undefined {
  let i = skipBlank(text, 0)
  const keyword = (word: string) => {
    const at = skipBlank(text, i)
    if (text.slice(at, at + word.length).toUpperCase() === word && !/[A-Za-z0-9_]/.test(text[at + word.length] ?? '')) {
      i = at + word.length
      return true
    }
    return false
  }
  if (!keyword('INSERT') || !keyword('INTO')) return undefined
  if (keyword('FUNCTION')) return undefined
  // INSERT INTO TABLE FUNCTION s3(...) writes to a function too.
  if (keyword('TABLE') && keyword('FUNCTION')) return undefined
  i = skipBlank(text, i)
  const first = identifierAt(text, i)
  if (!first) return undefined
  i = skipBlank(text, first.end)
  if (text[i] === '.') {
    const second = identifierAt(text, skipBlank(text, i + 1))
    return second ? { database: first.name, table: second.name } : undefined
  }
  return { table: first.name }
}

export interface InsertStatement {
  query_hash: string
  query_text: string
  target: InsertTarget
  /** INSERTs in the window (query_log's finished and failed ones). */
  inserts: number
  /** Rows written (written_rows). */
  rows: number
  /** Milliseconds of the window the statistics cover (the hour, or less for a database watched for less). */
  covered_ms: number
}

/** INSERTs per second over what the data covers. */
export const perSecond = (s: Pick<InsertStatement, 'inserts' | 'covered_ms'>) =>
  s.inserts / Math.max(60, s.covered_ms / 1000)

/** Rows per INSERT, or 0 when none. */
export const rowsPerInsert = (s: Pick<InsertStatement, 'inserts' | 'rows'>) => (s.inserts > 0 ? s.rows / s.inserts : 0)

function insertStatement(row: QueryStatsRow, now: number): InsertStatement | undefined {
  const target = insertTarget(row.query_text)
  if (!target || row.total_calls <= 0) return undefined
  const from = Math.max(now - HOUR_MS, row.first_bucket ?? now - HOUR_MS)
  return {
    query_hash: row.query_hash,
    query_text: row.query_text,
    target,
    inserts: row.total_calls,
    rows: row.total_rows,
    covered_ms: Math.max(60_000, now - from),
  }
}

/** The last hour's INSERT statements, the most called first (read once per diagnosis). */
export function insertStatements(ctx: DoctorContext): Promise<InsertStatement[]> {
  return ctx.once('clickhouse:inserts', async () =>
    (await ctx.queries(HOUR_MS, 'calls', MAX_STATEMENTS)).flatMap((row) => insertStatement(row, ctx.now) ?? []),
  )
}

/** Whether `s` writes to `database`.`table` (a statement that does not name its database matches any). */
export const writesTo = (s: InsertStatement, database: string, table: string) =>
  s.target.table === table && (s.target.database === undefined || s.target.database === database)

/** `1.5`, `12`, `0.02`: a rate or a mean as a finding writes it. */
export function figure(n: number): string {
  if (n >= 100) return Math.round(n).toLocaleString('en-US')
  if (n >= 10) return n.toFixed(1).replace(/\.0$/, '')
  return n.toPrecision(2).replace(/\.?0+$/, '')
}

/** `statement 123 (INSERT INTO t FORMAT …): 3,600 INSERTs in the last hour, 1 a second, 2 rows each`. */
export function describeInsert(s: InsertStatement, short: (text: string, max?: number) => string): string {
  const minutes = Math.round(s.covered_ms / 60_000)
  const window = minutes >= 60 ? 'the last hour' : `the last ${minutes} minute${minutes === 1 ? '' : 's'}`
  return (
    `statement ${s.query_hash} (${short(s.query_text.replace(/\s+/g, ' ').trim(), 120)}): ${s.inserts.toLocaleString('en-US')} INSERT${s.inserts === 1 ? '' : 's'} in ${window}, ` +
    `${figure(perSecond(s))} a second, ${figure(rowsPerInsert(s))} row${rowsPerInsert(s) === 1 ? '' : 's'} each`
  )
}
