// A parser for PostgreSQL's stderr log lines built from the server's own log_line_prefix: each escape
// (%m %t %n %p %u %d %a %h %r %e %c %l %s %v %x %q %Q %b %i %P %%, with optional padding like %-10u)
// becomes a part of one regular expression, followed by the line's label (`LOG:  `, `DETAIL:  `...).
// Non-session processes print nothing after %q, and empty session fields, so those parts are optional.
// The match runs on a line's first 4 KB only: a hostile 1 MB line costs no more than a short one.

export type PrefixField =
  | 'ts'
  | 'epoch'
  | 'pid'
  | 'user'
  | 'database'
  | 'application'
  | 'host'
  | 'hostport'
  | 'sqlstate'
  | 'backendType'
  | 'queryId'

export interface PrefixParser {
  /** Matches a line's prefix and label: group i + 1 is `fields[i]`, the last group (`labelGroup`) the label. */
  regex: RegExp
  /**
   * The same match, sticky (`lastIndex` = a line's start) on a whole slice's text, with free-text fields
   * that stop at a newline: on a line of at most PREFIX_PROBE_CHARS it matches exactly what `regex` does on
   * that line alone, without the line being cut out first. Null when the prefix itself holds a newline.
   */
  sticky: RegExp | null
  /** The prefix starts with its timestamp (%m or %t, unpadded): group 1 starts where the line does. */
  tsFirst: boolean
  fields: PrefixField[]
  labelGroup: number
  /**
   * The prefix's fixed start up to its first free-text field (%u %d %a %h %r %b %i, or %q), when that start
   * holds a timestamp or the pid: a line that matches it but not `regex` is a prefix broken by a newline
   * inside a field (a user or database name), to be joined with the lines after it. Null otherwise.
   */
  head: RegExp | null
  /** What the prefix lacks that the reader would use, for `dbm agent --check` (empty when nothing). */
  lacks: string[]
}

/** Labels of a line that starts an entry or continues one (the secondary parts of a message). */
export const LABELS =
  'DEBUG[1-5]|INFO|NOTICE|WARNING|ERROR|LOG|FATAL|PANIC|DETAIL|HINT|QUERY|CONTEXT|LOCATION|STATEMENT'
export const PREFIX_PROBE_CHARS = 4096

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
const TIME = '\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d'
const ZONE = '(?: [A-Za-z0-9+\\-:/_]+)?'

export function buildPrefixParser(prefix: string): PrefixParser {
  const fields: PrefixField[] = []
  let body = ''
  let optionalFrom = -1
  const parts: string[] = []
  let tsFirst = false
  const group = (field: PrefixField, pattern: string) => {
    if (field === 'ts' && parts.length === 0) tsFirst = true
    parts.push(`(${pattern})`)
    fields.push(field)
  }
  // A free-text field: any characters, as few as will do. ANY stands for "any character" until the two
  // regexes are built (an escaped literal of the prefix can never read as it: its `(` and `?` are escaped).
  const ANY = '(?:ANY)'
  const seen = new Set<string>()
  // Where the fixed start ends (parts before it), and whether it has a timestamp or pid.
  let headEnd = -1
  let headHasAnchor = false
  for (let i = 0; i < prefix.length; i++) {
    const c = prefix[i]!
    if (c !== '%') {
      parts.push(escapeRegex(c))
      continue
    }
    // Padding: %-10u or %10u pads with spaces to that width.
    let j = i + 1
    let padded = false
    while (j < prefix.length && /[-0-9]/.test(prefix[j]!)) {
      padded = true
      j++
    }
    const e = prefix[j]
    i = j
    if (e === undefined) break
    seen.add(e)
    if (headEnd < 0 && 'udahrbiq'.includes(e)) headEnd = parts.length
    if (headEnd < 0 && 'mtnp'.includes(e)) headHasAnchor = true
    if (padded) parts.push(' *')
    switch (e) {
      case 'm':
        group('ts', `${TIME}\\.\\d{3}${ZONE}`)
        break
      case 't':
        group('ts', `${TIME}${ZONE}`)
        break
      case 'n':
        group('epoch', '\\d+(?:\\.\\d+)?')
        break
      case 's':
        parts.push(`(?:${TIME}${ZONE})?`)
        break
      case 'p':
        group('pid', '\\d+')
        break
      case 'P':
        parts.push('\\d*')
        break
      case 'l':
      case 'x':
        parts.push('\\d*')
        break
      case 'c':
        parts.push('[0-9a-f]*\\.?[0-9a-f]*')
        break
      case 'v':
        parts.push('(?:\\d+/\\d+)?')
        break
      case 'e':
        group('sqlstate', '[0-9A-Z]{5}')
        break
      case 'Q':
        group('queryId', '-?\\d*')
        break
      case 'u':
        group('user', `${ANY}*?`)
        break
      case 'd':
        group('database', `${ANY}*?`)
        break
      case 'a':
        group('application', `${ANY}*?`)
        break
      case 'h':
        group('host', `${ANY}*?`)
        break
      case 'r':
        group('hostport', `${ANY}*?`)
        break
      case 'b':
        group('backendType', `${ANY}*?`)
        break
      case 'i':
        parts.push(`${ANY}*?`)
        break
      case 'q':
        if (optionalFrom < 0) optionalFrom = parts.length
        break
      case '%':
        parts.push('%')
        break
      default:
        // PostgreSQL prints nothing for an unknown escape.
        break
    }
    if (padded) parts.push(' *')
  }
  body =
    optionalFrom < 0
      ? parts.join('')
      : `${parts.slice(0, optionalFrom).join('')}(?:${parts.slice(optionalFrom).join('')})?`
  const lacks: string[] = []
  if (!seen.has('m') && !seen.has('t') && !seen.has('n'))
    lacks.push('a timestamp (%m): entries get the time they were read')
  if (!seen.has('p'))
    lacks.push("the process id (%p): DETAIL and STATEMENT lines cannot be told from another process's")
  if (!seen.has('u') && !seen.has('b'))
    lacks.push(
      "the user (%u) or backend type (%b): server processes' entries (checkpoints, autovacuum) cannot be told from a user's RAISE LOG",
    )
  if (!seen.has('d')) lacks.push('the database (%d)')
  if (!seen.has('h') && !seen.has('r')) lacks.push('the client (%h or %r): failed logins have no client address')
  const any = (pattern: string, by: string) => pattern.replaceAll(ANY, by)
  const head = headHasAnchor && headEnd > 0 ? new RegExp(`^${parts.slice(0, headEnd).join('')}`) : null
  // Numbered groups, not named ones: a match then builds no `groups` object per line. The `s` flag: a
  // prefix joined from several lines (head) has its fields' newlines inside.
  const regex = new RegExp(`^${any(body, '.')}(${LABELS}):  `, 's')
  // Its label is not a group: the parser reads it from where the match ends.
  const sticky = prefix.includes('\n') ? null : new RegExp(`${any(body, '[^\\n]')}(?:${LABELS}):  `, 'y')
  return { regex, sticky, tsFirst, fields, labelGroup: fields.length + 1, head, lacks }
}
