// Literals out of statement texts and parameter values in log entries (agent config `log_text: redacted`,
// the default): string constants of every quoting ('...', E'...', $tag$...$tag$, U&'...', B'...') and
// numbers become `?`; identifiers, keywords and $n parameters stay. One pass, linear in the text, and a
// text cut mid-literal loses everything from that literal on. Comments go too, but the agent's own marker.
import { OWN_MARKER } from './own-marker.ts'

const WORD = /[A-Za-z0-9_$\u0080-\uffff]/

/** `text` with its literals replaced by `?`. */
export function redactLiterals(text: string): string {
  let out = ''
  let i = 0
  const n = text.length
  let last = 0
  const emit = (upTo: number, replacement: string, resume: number) => {
    out += text.slice(last, upTo) + replacement
    last = resume
    i = resume
  }
  while (i < n) {
    const c = text[i]!
    if (c === '-' && text[i + 1] === '-') {
      const nl = text.indexOf('\n', i)
      i = nl < 0 ? n : nl
    } else if (c === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2)
      // A comment may hold anything the author wrote: it is dropped, as a literal is; the agent's own
      // marker stays, so that its statements are known as its own.
      if (close === i + OWN_MARKER.length - 2 && text.startsWith(OWN_MARKER, i)) i = close + 2
      else emit(i, '/*?*/', close < 0 ? n : close + 2)
    } else if (c === '"') {
      const close = text.indexOf('"', i + 1)
      i = close < 0 ? n : close + 1
    } else if (
      c === "'" ||
      (/[EeBbXxNn]/.test(c) && text[i + 1] === "'" && !WORD.test(text[i - 1] ?? ' ')) ||
      (/[Uu]/.test(c) && text[i + 1] === '&' && text[i + 2] === "'")
    ) {
      const open = text.indexOf("'", i)
      const escapes = /[Ee]/.test(c) && open === i + 1
      let j = open + 1
      for (;;) {
        if (j >= n) break
        const ch = text[j]
        if (escapes && ch === '\\') j += 2
        else if (ch === "'" && text[j + 1] === "'") j += 2
        else if (ch === "'") break
        else j++
      }
      emit(i, '?', Math.min(n, j + 1))
    } else if (c === '$' && /[A-Za-z_\u0080-\uffff$]/.test(text[i + 1] ?? '') && !WORD.test(text[i - 1] ?? ' ')) {
      const tag = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(text.slice(i, i + 100))
      if (!tag) {
        i++
        continue
      }
      const end = text.indexOf(tag[0], i + tag[0].length)
      emit(i, '?', end < 0 ? n : end + tag[0].length)
    } else if (c === '$' && /\d/.test(text[i + 1] ?? '')) {
      i++
      while (i < n && /\d/.test(text[i]!)) i++
    } else if (/[0-9]/.test(c) && !WORD.test(text[i - 1] ?? ' ')) {
      let j = i
      while (j < n && /[0-9A-Za-z_.]/.test(text[j]!)) j++
      emit(i, '?', j)
    } else if (WORD.test(c)) {
      while (i < n && WORD.test(text[i]!)) i++
    } else i++
  }
  return out + text.slice(last)
}

/**
 * Bind parameter values replaced by `?`, in every form PostgreSQL 13 to 18 logs them: the DETAIL
 * `Parameters: $1 = '...', $2 = NULL` (`parameters:` before 13) of a logged or slow statement, and the
 * CONTEXT lines `unnamed portal parameter $1 = '...'`, `portal "S_1" parameter $1 = '...'`,
 * `unnamed portal with parameters: ...`, `portal "..." with parameters: ...` and
 * `extended query "..." with parameters: ...`. Every `$n = ` followed by a quoted value or NULL is taken,
 * whatever wording leads to it: a value is quoted with '' for a quote and may span lines, so it is
 * skipped by its quotes, never by a line or a comma. A value cut by the log (no closing quote) takes the rest.
 */
export function redactParameters(text: string): string {
  let out = ''
  let last = 0
  const at = /\$\d+ = /g
  let m: RegExpExecArray | null
  while ((m = at.exec(text))) {
    const from = m.index + m[0].length
    let end: number
    if (text[from] === "'") {
      end = from + 1
      for (;;) {
        const q = text.indexOf("'", end)
        if (q < 0) {
          end = text.length
          break
        }
        if (text[q + 1] === "'") end = q + 2
        else {
          end = q + 1
          break
        }
      }
    } else if (text.startsWith('NULL', from)) end = from + 4
    else continue
    out += `${text.slice(last, from)}?`
    last = end
    at.lastIndex = end
  }
  return last === 0 ? text : out + text.slice(last)
}

/** Values a DETAIL quotes from rows (`Key (email)=(x) already exists.`, `Failing row contains (...)`) replaced. */
export function redactRowValues(detail: string): string {
  return detail
    .replace(
      /^(Key \(.*?\)=\()(.*)(\) (?:already exists|is not present in table|is still referenced from table|conflicts with existing key).*)$/gm,
      '$1?$3',
    )
    .replace(/^(Failing row contains \().*(\)\.)$/gm, '$1?$2')
}
