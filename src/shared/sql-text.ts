// The one way the doctor puts text that comes from a monitored database (names, statement texts,
// query ids, index definitions) into the commands of its findings: a function per destination and
// engine. Whatever the text holds (quotes, backslashes, semicolons, newlines, comment markers,
// control or bidirectional characters), the result is a single token of the meant kind (an
// identifier, a string constant) or comment text that cannot end its comment early, so a command
// pasted into psql or clickhouse-client is exactly the statements the rule wrote. None of the results
// holds a line break or a control character, so every command stays on one line.
// test/doctor/command-safety.test.ts checks every rule's commands with PostgreSQL's own parser and
// ClickHouse's.

import { HIDDEN_CHARACTERS } from './invisible.ts'

/** Characters a command never carries as they are: C0 and C1 controls, DEL, and the hidden characters of src/shared/invisible.ts (line separators, bidirectional marks, invisible format and tag characters...). */
const UNSAFE = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'u')

const UNSAFE_ALL = new RegExp(UNSAFE.source, 'gu')

const hex = (code: number, width: number) => code.toString(16).toUpperCase().padStart(width, '0')

// ---- PostgreSQL ----

/**
 * PostgreSQL's keywords that are not unreserved (reserved, type/function-name and column-name ones,
 * `SELECT word FROM pg_get_keywords() WHERE catcode <> 'U'` on PostgreSQL 18): as a bare identifier
 * they either fail to parse or mean something else (`current_user`), so they are always quoted.
 */
const PG_KEYWORDS = new Set(
  (
    'all analyse analyze and any array as asc asymmetric authorization between bigint binary bit boolean both case cast char character check ' +
    'coalesce collate collation column concurrently constraint create cross current_catalog current_date current_role current_schema current_time ' +
    'current_timestamp current_user dec decimal default deferrable desc distinct do else end except exists extract false fetch float for foreign ' +
    'freeze from full grant greatest group grouping having ilike in initially inner inout int integer intersect interval into is isnull join json ' +
    'json_array json_arrayagg json_exists json_object json_objectagg json_query json_scalar json_serialize json_table json_value lateral leading ' +
    'least left like limit localtime localtimestamp merge_action national natural nchar none normalize not notnull null nullif numeric offset on ' +
    'only or order out outer overlaps overlay placing position precision primary real references returning right row select session_user setof ' +
    'similar smallint some substring symmetric system_user table tablesample then time timestamp to trailing treat trim true union unique user ' +
    'using values varchar variadic verbose when where window with xmlattributes xmlconcat xmlelement xmlexists xmlforest xmlnamespaces xmlparse ' +
    'xmlpi xmlroot xmlserialize xmltable'
  ).split(' '),
)

/**
 * A qualified name (`schema.table`, `schema.table.constraint`) as a finding names its object: each part
 * as pgIdent writes it, so that `x."a.b"` and `"x.a".b` (two tables) never read, or key, alike, and a
 * plain name stays as it is (`public.orders`).
 */
export function pgObject(...parts: string[]): string {
  return parts.map((p) => pgIdent(p)).join('.')
}

/** PostgreSQL cannot hold NUL in a name or a text: a monitored text that has one shows U+FFFD there. */
const noNul = (s: string) => s.replaceAll('\u0000', '\ufffd')

/**
 * A PostgreSQL identifier: bare when PostgreSQL would read it back unchanged (lower case, digits,
 * underscores, not a keyword that needs quoting), else in double quotes with `"` doubled; a name with
 * control or bidirectional characters is written `U&"..."` with those characters (and `\`) escaped.
 */
export function pgIdent(name: string, options: { quoted?: boolean } = {}): string {
  const s = noNul(name)
  if (!UNSAFE.test(s)) return plainIdent(s, options.quoted)
  let body = ''
  for (const ch of s) {
    const code = ch.codePointAt(0)!
    if (ch === '\\') body += '\\\\'
    else if (ch === '"') body += '""'
    else if (UNSAFE.test(ch)) body += code > 0xffff ? `\\+${hex(code, 6)}` : `\\${hex(code, 4)}`
    else body += ch
  }
  return `U&"${body}"`
}

/** An identifier as quote_ident() writes it: bare when PostgreSQL reads it back unchanged, else in double quotes with `"` doubled. */
function plainIdent(name: string, quoted = false): string {
  return !quoted && /^[a-z_][a-z0-9_]*$/.test(name) && !PG_KEYWORDS.has(name) ? name : `"${name.replaceAll('"', '""')}"`
}

/** `schema.name`, each part through pgIdent. */
export const pgQualified = (schema: string, name: string) => `${pgIdent(schema)}.${pgIdent(name)}`

/**
 * A relation as a regclass constant, `'schema.name'::regclass`: the name is quoted the way regclass
 * input reads it (double quotes, never `U&`), and the whole goes through pgString.
 */
export const pgRegclass = (schema: string | null, name: string) =>
  `${pgString(schema === null ? plainIdent(noNul(name)) : `${plainIdent(noNul(schema))}.${plainIdent(noNul(name))}`)}::regclass`

/**
 * A PostgreSQL string constant that means the same whatever standard_conforming_strings is: `'...'`
 * with `'` doubled when the text has no backslash and no unsafe character, else the escape form
 * `E'...'` (backslash doubled, controls as `\n`, `\r`, `\t` or `\xHH`, other unsafe characters as `\uXXXX`).
 */
export function pgString(text: string): string {
  const s = noNul(text)
  if (!s.includes('\\') && !UNSAFE.test(s)) return `'${s.replaceAll("'", "''")}'`
  let body = ''
  for (const ch of s) {
    const code = ch.codePointAt(0)!
    if (ch === '\\') body += '\\\\'
    else if (ch === "'") body += "''"
    else if (ch === '\n') body += '\\n'
    else if (ch === '\r') body += '\\r'
    else if (ch === '\t') body += '\\t'
    else if (code < 0x20 || code === 0x7f) body += `\\x${hex(code, 2)}`
    else if (UNSAFE.test(ch)) body += code > 0xffff ? `\\U${hex(code, 8)}` : `\\u${hex(code, 4)}`
    else body += ch
  }
  return `E'${body}'`
}

/** A path segment of a dbm API call (a statement's id), percent-encoded down to unreserved characters. */
export const urlSegment = (value: string) =>
  encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${hex(c.charCodeAt(0), 2)}`)

/**
 * A number from the monitored database (a pid, a queryid) as a PostgreSQL or ClickHouse numeric
 * constant; anything that is not a plain integer becomes a string constant of the engine, which the
 * command then fails to compare rather than run as SQL.
 */
export const pgNumber = (value: string | number) =>
  /^-?\d{1,20}$/.test(String(value)) ? String(value) : pgString(String(value))

// ---- ClickHouse ----

/** ClickHouse escapes inside quotes: backslash and the quote escaped, controls and unsafe characters as `\xHH` bytes of their UTF-8. */
function chEscape(text: string, quote: string): string {
  let body = ''
  for (const ch of text) {
    if (ch === '\\') body += '\\\\'
    else if (ch === quote) body += `\\${quote}`
    else if (ch === '\n') body += '\\n'
    else if (ch === '\r') body += '\\r'
    else if (ch === '\t') body += '\\t'
    else if (UNSAFE.test(ch)) for (const byte of new TextEncoder().encode(ch)) body += `\\x${hex(byte, 2)}`
    else body += ch
  }
  return body
}

/** A ClickHouse identifier: bare when plain (letters, digits, underscores), else in backquotes with `\` and `` ` `` escaped. */
export function chIdent(name: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `\`${chEscape(name, '`')}\``
}

/** `db.table`, each part through chIdent. */
export const chTable = (database: string, table: string) => `${chIdent(database)}.${chIdent(table)}`

/** A ClickHouse string literal: `'...'` with backslash and quote escaped (ClickHouse reads `\'` as a quote) and controls as escapes. */
export const chString = (text: string) => `'${chEscape(text, "'")}'`

/** A number from the monitored server (a normalized_query_hash) as a numeric constant, else a string literal. */
export const chNumber = (value: string | number) =>
  /^\d{1,20}$/.test(String(value)) ? String(value) : chString(String(value))

// ---- Both ----

/**
 * Text for a comment after a command (`-- ...`), or any other free text inside one: line breaks and
 * other unsafe characters become spaces, the block comment markers (star-slash, slash-star) are broken up so that it also stays inside a
 * block comment, and it is cut to `max` characters.
 */
export function commentText(text: string, max = 200): string {
  const flat = text.replace(UNSAFE_ALL, ' ').replace(/\s+/g, ' ').trim().replaceAll('*/', '* /').replaceAll('/*', '/ *')
  return flat.length > max ? `${flat.slice(0, max)}…` : flat
}

// ---- PostgreSQL index definitions ----

interface Token {
  kind: 'word' | 'ident' | 'string' | 'other'
  /** The token's value: the name of a quoted identifier, the text of a string constant, else the text as written. */
  value: string
  /** Whitespace before it. */
  spaced: boolean
}

/**
 * The tokens of a pg_get_indexdef() text (written under standard_conforming_strings on), or undefined
 * when it holds anything but words, numbers, operators, parentheses, quoted identifiers and string
 * constants: no `;`, no comment, no `$`, no backslash outside quotes, no unsafe character outside quotes.
 */
function indexDefTokens(def: string): Token[] | undefined {
  const tokens: Token[] = []
  let i = 0
  let spaced = false
  while (i < def.length) {
    const c = def[i]!
    if (c === ' ') {
      spaced = true
      i++
      continue
    }
    if (c === '"' || c === "'") {
      let value = ''
      let j = i + 1
      for (;;) {
        if (j >= def.length) return undefined
        if (def[j] === c) {
          if (def[j + 1] === c) {
            value += c
            j += 2
            continue
          }
          break
        }
        value += def[j]
        j++
      }
      // Quotes right after a word, a quoted token or `&` would be an E'' or U&"" form, or two tokens run together: not taken.
      const previous = tokens[tokens.length - 1]
      if (previous && !spaced && (previous.kind !== 'other' || previous.value.endsWith('&'))) return undefined
      tokens.push({ kind: c === '"' ? 'ident' : 'string', value, spaced })
      i = j + 1
    } else {
      const word = /^[A-Za-z_][A-Za-z0-9_]*|^[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/.exec(def.slice(i))
      const other = word ? undefined : /^(?:::|[()[\],.]|[+\-*/<>=~!@#%^&|`?:]+)/.exec(def.slice(i))
      const text = word?.[0] ?? other?.[0]
      if (!text || text.includes('--') || text.includes('/*') || text.includes('*/')) return undefined
      tokens.push({ kind: word ? 'word' : 'other', value: text, spaced })
      i += text.length
    }
    spaced = false
  }
  return tokens
}

/**
 * An index's definition as pg_get_indexdef() wrote it, as a command that builds it again
 * (`concurrently`: without blocking writes), every quoted name and string written again through
 * pgIdent and pgString; undefined when the text is not the plain `CREATE [UNIQUE] INDEX ... ON ...`
 * that PostgreSQL writes, so that the caller leaves it out of the commands.
 */
export function pgIndexDefinition(def: string, options: { concurrently?: boolean } = {}): string | undefined {
  const tokens = indexDefTokens(def)
  if (!tokens) return undefined
  const words = tokens.map((t) => (t.kind === 'word' ? t.value.toUpperCase() : ''))
  let at = words[1] === 'UNIQUE' ? 2 : 1
  if (
    words[0] !== 'CREATE' ||
    words[at] !== 'INDEX' ||
    !tokens.some((t, k) => k > at && t.kind === 'word' && t.value === 'ON')
  )
    return undefined
  let depth = 0
  for (const t of tokens) {
    if (t.kind !== 'other') continue
    if (t.value === '(') depth++
    if (t.value === ')' && --depth < 0) return undefined
  }
  if (depth !== 0) return undefined
  const out = tokens.map((t) =>
    t.kind === 'ident' ? pgIdent(t.value, { quoted: true }) : t.kind === 'string' ? pgString(t.value) : t.value,
  )
  if (options.concurrently && words[at + 1] !== 'CONCURRENTLY') {
    out.splice(at + 1, 0, 'CONCURRENTLY')
    tokens.splice(at + 1, 0, { kind: 'word', value: 'CONCURRENTLY', spaced: true })
    at++
  }
  return out.map((text, k) => (k > 0 && tokens[k]!.spaced ? ` ${text}` : text)).join('')
}
