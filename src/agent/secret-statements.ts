// Secrets out of statement texts before they leave the host. pg_stat_statements keeps the literals of
// utility statements, and pg_stat_activity and the log show every statement as sent, so `ALTER ROLE app
// PASSWORD '...'` would otherwise reach the server verbatim. maskSecretStatements tokenises the text
// (strings of every quoting, comments, several statements) and replaces with '***' only the literals that
// can carry a secret: role passwords, values of SET / ALTER SYSTEM / ALTER DATABASE|ROLE|FUNCTION ... SET
// of a setting named like a secret (the rule of src/shared/secret-settings.ts) and set_config()'s value for
// one, OPTIONS (...) values of
// secret-looking names (user mappings, servers, foreign tables), COPY ... PROGRAM commands, and
// password=... values and URL passwords inside any string literal (dblink_connect, CREATE SUBSCRIPTION).
// Ordinary statements come back unchanged; a text that cannot be tokenised (cut mid-string) and looks
// secret-bearing is replaced whole.
import { isSecretSetting } from '../shared/secret-settings.ts'

type Kind = 'space' | 'comment' | 'string' | 'word' | 'qident' | 'number' | 'param' | 'op' | 'semi'
interface Token {
  kind: Kind
  text: string
  /** For a string: the raw body between its quotes, and what comes before and after it. */
  open?: string
  close?: string
}

const MASK = '***'
/** Replaces a text that holds a possibly secret literal but cannot be read safely. */
export const MASKED_WHOLE = '/* dbm: statement masked whole: it may hold a secret and could not be read safely */'

const WORD_START = /[A-Za-z_\u0080-\uffff]/
const WORD_PART = /[A-Za-z0-9_$\u0080-\uffff]/

/** The tokens of `text`, or undefined when a string, identifier or comment does not end. */
function tokenise(text: string): Token[] | undefined {
  const out: Token[] = []
  let i = 0
  const n = text.length
  while (i < n) {
    const c = text[i]!
    const start = i
    if (/\s/.test(c)) {
      while (i < n && /\s/.test(text[i]!)) i++
      out.push({ kind: 'space', text: text.slice(start, i) })
    } else if (c === '-' && text[i + 1] === '-') {
      while (i < n && text[i] !== '\n' && text[i] !== '\r') i++
      out.push({ kind: 'comment', text: text.slice(start, i) })
    } else if (c === '/' && text[i + 1] === '*') {
      let depth = 0
      while (i < n) {
        if (text[i] === '/' && text[i + 1] === '*') depth++, (i += 2)
        else if (text[i] === '*' && text[i + 1] === '/') {
          i += 2
          if (--depth === 0) break
        } else i++
      }
      if (depth !== 0) return undefined
      out.push({ kind: 'comment', text: text.slice(start, i) })
    } else if (
      c === "'" ||
      (/[EeBbXxNn]/.test(c) && text[i + 1] === "'") ||
      (/[Uu]/.test(c) && text[i + 1] === '&' && text[i + 2] === "'")
    ) {
      const open = text.slice(start, text.indexOf("'", i) + 1)
      const escapes = /^[Ee]'$/.test(open)
      i = start + open.length
      const bodyStart = i
      for (;;) {
        if (i >= n) return undefined
        const ch = text[i]
        if (escapes && ch === '\\') i += 2
        else if (ch === "'" && text[i + 1] === "'") i += 2
        else if (ch === "'") break
        else i++
      }
      if (i >= n) return undefined
      out.push({
        kind: 'string',
        text: text.slice(start, i + 1),
        open,
        close: "'",
        body: text.slice(bodyStart, i),
      } as Str)
      i++
    } else if (c === '$' && /[A-Za-z_\u0080-\uffff$]/.test(text[i + 1] ?? '')) {
      const tag = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(text.slice(i, i + 200))
      if (!tag) return undefined
      const end = text.indexOf(tag[0], i + tag[0].length)
      if (end < 0) return undefined
      const tok = {
        kind: 'string' as const,
        text: text.slice(start, end + tag[0].length),
        open: tag[0],
        close: tag[0],
        body: text.slice(i + tag[0].length, end),
      }
      out.push(tok)
      i = end + tag[0].length
    } else if (c === '$' && /\d/.test(text[i + 1] ?? '')) {
      i++
      while (i < n && /\d/.test(text[i]!)) i++
      out.push({ kind: 'param', text: text.slice(start, i) })
    } else if (c === '"' || (/[Uu]/.test(c) && text[i + 1] === '&' && text[i + 2] === '"')) {
      i = text.indexOf('"', i) + 1
      for (;;) {
        if (i >= n) return undefined
        if (text[i] === '"' && text[i + 1] === '"') i += 2
        else if (text[i] === '"') break
        else i++
      }
      i++
      out.push({ kind: 'qident', text: text.slice(start, i) })
    } else if (WORD_START.test(c)) {
      while (i < n && WORD_PART.test(text[i]!)) i++
      out.push({ kind: 'word', text: text.slice(start, i) })
    } else if (/[0-9.]/.test(c) && /[0-9]/.test(c === '.' ? (text[i + 1] ?? '') : c)) {
      while (i < n && /[0-9A-Za-z_.]/.test(text[i]!)) {
        if (text[i] === '.' && text[i + 1] === '.') break
        i++
      }
      out.push({ kind: 'number', text: text.slice(start, i) })
    } else if (c === ';') {
      i++
      out.push({ kind: 'semi', text: ';' })
    } else {
      i++
      out.push({ kind: 'op', text: c })
    }
  }
  return out
}

type Str = Token & { body: string }
const isWord = (t: Token | undefined, ...words: string[]) => t?.kind === 'word' && words.includes(t.text.toUpperCase())
/** A masked value: a string keeps its dollar quotes, anything else becomes a plain string literal. */
const maskedString = (t: Token) =>
  t.kind === 'string' && t.open?.startsWith('$')
    ? `${t.open}${MASK}${t.close}`
    : // U&'...' keeps its prefix, so a UESCAPE clause after it still parses.
      t.kind === 'string' && /^[Uu]&/.test(t.open ?? '')
      ? `U&'${MASK}'`
      : `'${MASK}'`
/** A setting or option name as written: an identifier, unquoted. */
const nameOf = (t: Token): string =>
  t.kind === 'qident' ? t.text.slice(t.text.indexOf('"') + 1, -1).replaceAll('""', '"') : t.text

/** password=... values (keyword/value connection strings) and URL passwords inside a literal's body. */
// Every alternative below is disjoint from the others at each character, so matching is linear: a
// pattern that can split the same text two ways (an escaped backslash as `\\` or as `\` + any) backtracks
// exponentially on a hostile literal, and when the engine gives up, replace() returns the text unmasked.
// An unquoted value runs to white space, as libpq reads it: a backslash takes the next character with it,
// and a doubled quote (a quote inside a standard string) is part of it.
const CONNINFO_PASSWORD =
  /(\b(?:password|passwd|sslpassword|pwd)\s*=\s*)(''(?:''''|[^'])*''|\\'(?:\\\\|\\[^'\\]|[^\\'])*\\'|'(?:\\.|[^'\\])*'|(?:\\.|''|[^\s'\\])+)/gi
/** The password of a URL's user information (`scheme://user:password@host`), found from each `://` only. */
const URL_PASSWORD = /:\/\/([^\s/@:'"]*):[^\s/@'"]+@/g
const maskBody = (body: string) => {
  const out = body.replace(CONNINFO_PASSWORD, `$1${MASK}`)
  return out.includes('://') ? out.replace(URL_PASSWORD, `://$1:${MASK}@`) : out
}

/** Masks, in place, the values of one statement's secret-bearing clauses. `s` holds its significant tokens. */
function maskStatement(s: Token[], masked: Set<Token>): void {
  const at = (i: number) => s[i]
  const first = at(0)?.text.toUpperCase()
  // CREATE USER MAPPING FOR ...: not a role (a role may be named "mapping", though).
  const userMapping = isWord(at(1), 'USER') && isWord(at(2), 'MAPPING') && isWord(at(3), 'FOR', 'IF')
  const roleDdl = (first === 'CREATE' || first === 'ALTER') && isWord(at(1), 'ROLE', 'USER', 'GROUP') && !userMapping
  const routine =
    isWord(at(1), 'FUNCTION', 'PROCEDURE') || (isWord(at(1), 'OR') && isWord(at(3), 'FUNCTION', 'PROCEDURE'))
  const setScope =
    first === 'SET' ||
    (first === 'ALTER' && isWord(at(1), 'SYSTEM', 'DATABASE', 'ROLE', 'USER', 'FUNCTION', 'PROCEDURE', 'ROUTINE')) ||
    (first === 'CREATE' && routine)
  /** Masks the string at `j` and the strings right after it, which PostgreSQL joins to it ('abc'<newline>'def'). */
  const maskValue = (j: number) => {
    masked.add(at(j)!)
    for (let k = j + 1; at(k)?.kind === 'string'; k++) masked.add(at(k)!)
  }
  for (let i = 0; i < s.length; i++) {
    const t = s[i]!
    // Role passwords: CREATE|ALTER ROLE|USER|GROUP ... [ENCRYPTED] PASSWORD '...'.
    if (roleDdl && isWord(t, 'PASSWORD') && at(i + 1)?.kind === 'string') maskValue(i + 1)
    // set_config('name', 'value', is_local): a SET as a function call, anywhere in any statement.
    if (
      isWord(t, 'SET_CONFIG') &&
      at(i + 1)?.text === '(' &&
      at(i + 2)?.kind === 'string' &&
      at(i + 3)?.text === ',' &&
      at(i + 4)?.kind === 'string'
    ) {
      if (isSecretSetting((at(i + 2) as Str).body)) maskValue(i + 4)
    }
    // COPY ... PROGRAM '...': a shell command, like archive_command, may hold a password.
    if (first === 'COPY' && isWord(t, 'PROGRAM') && at(i + 1)?.kind === 'string') maskValue(i + 1)
    // SET [LOCAL|SESSION] name {=|TO} value[, ...] in the statements that set a configuration value.
    if (setScope && isWord(t, 'SET')) {
      let j = i + 1
      if (isWord(at(j), 'LOCAL', 'SESSION')) j++
      const parts: string[] = []
      while (at(j) && (at(j)!.kind === 'word' || at(j)!.kind === 'qident')) {
        parts.push(nameOf(at(j)!))
        if (at(j + 1)?.text === '.') j += 2
        else break
      }
      j++
      if (parts.length === 0 || !(at(j)?.text === '=' || isWord(at(j), 'TO'))) continue
      if (!isSecretSetting(parts.join('.'))) continue
      for (j++; at(j) && !isWord(at(j), 'DEFAULT'); j++) {
        if (at(j)!.text === '-' || at(j)!.text === '+') continue
        const v = at(j)!
        if (v.kind !== 'string' && v.kind !== 'word' && v.kind !== 'number') break
        if (v.kind === 'string') {
          maskValue(j)
          while (at(j + 1)?.kind === 'string') j++
        } else masked.add(v)
        if (at(j + 1)?.text !== ',') break
        j++
      }
    }
    // OPTIONS ([ADD|SET|DROP] name 'value', ...) of servers, user mappings, foreign tables and wrappers.
    if (
      (first === 'CREATE' || first === 'ALTER' || first === 'IMPORT') &&
      isWord(t, 'OPTIONS') &&
      at(i + 1)?.text === '('
    ) {
      let j = i + 2
      while (at(j) && at(j)!.text !== ')') {
        if (isWord(at(j), 'ADD', 'SET', 'DROP') && (at(j + 1)?.kind === 'word' || at(j + 1)?.kind === 'qident')) j++
        const name = at(j)
        const value = at(j + 1)
        if (name && (name.kind === 'word' || name.kind === 'qident') && value?.kind === 'string') {
          if (isSecretSetting(nameOf(name)) || userMapping) {
            maskValue(j + 1)
            while (at(j + 2)?.kind === 'string') j++
          }
          j += 2
        } else j++
        if (at(j)?.text === ',') j++
      }
    }
  }
}

/** Whether a text that could not be tokenised may hold a secret: conservative, by its words. */
function looksSecret(text: string): boolean {
  // A URL with user information (its password perhaps cut off before the `@`), found without backtracking.
  if (/:\/\/[^\s/@:]*:/.test(text) || /\bprogram\b/i.test(text)) return true
  return (text.match(/[A-Za-z_][A-Za-z0-9_.]*/g) ?? []).some(
    (w) => isSecretSetting(w) || w.split('.').some(isSecretSetting),
  )
}

/**
 * `text` (one statement or several, as pg_stat_statements, pg_stat_activity or the log show them) with the
 * literals that may carry a secret replaced by '***'; the same text when it holds none.
 */
export function maskSecretStatements(text: string): string {
  return maskText(text, 0)
}

/** Words that start a statement inside a procedural body (DO, a function's $$...$$) after BEGIN, THEN, LOOP... */
const INNER_STARTS = ['CREATE', 'ALTER', 'SET', 'COPY']
/** How deep dollar-quoted bodies are read as statements (a DO block's body, a function in it). */
const MAX_DEPTH = 2

function maskText(text: string, depth: number): string {
  if (text.length === 0) return text
  const tokens = tokenise(text)
  if (!tokens) return looksSecret(text) ? MASKED_WHOLE : text
  const masked = new Set<Token>()
  /** Dollar-quoted bodies that are code: of DO and of CREATE (functions, procedures), not a SELECT's literal. */
  const code = new Set<Token>()
  let statement: Token[] = []
  for (const t of [...tokens, { kind: 'semi' as const, text: '' }]) {
    if (t.kind === 'semi') {
      if (statement.length > 0) maskStatement(statement, masked)
      if (isWord(statement[0], 'DO', 'CREATE'))
        for (const s of statement) if (s.kind === 'string' && s.open?.startsWith('$')) code.add(s)
      // In a procedural body a statement follows BEGIN, THEN, LOOP or a label: read it from each start word too.
      if (depth > 0)
        for (let k = 1; k < statement.length; k++)
          if (isWord(statement[k], ...INNER_STARTS)) maskStatement(statement.slice(k), masked)
      statement = []
    } else if (t.kind !== 'space' && t.kind !== 'comment') statement.push(t)
  }
  let changed = masked.size > 0
  const out = tokens.map((t) => {
    if (masked.has(t)) return maskedString(t)
    if (t.kind !== 'string') return t.text
    const body = (t as Str).body
    // A dollar-quoted body is code (DO, CREATE FUNCTION): its statements are masked as statements.
    const clean = maskBody(code.has(t) && depth < MAX_DEPTH ? maskText(body, depth + 1) : body)
    if (clean === body) return t.text
    changed = true
    return `${t.text.slice(0, t.text.length - body.length - (t.close ?? '').length)}${clean}${t.close}`
  })
  if (!changed) return text
  const result = out.join('')
  // The masked text must tokenise as the original did; otherwise nothing of it goes out.
  const again = tokenise(result)
  if (!again || again.filter((t) => t.kind !== 'space').length !== tokens.filter((t) => t.kind !== 'space').length)
    return MASKED_WHOLE
  return result
}
