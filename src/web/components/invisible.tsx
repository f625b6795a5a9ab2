// Text from a monitored database shown as it is, except the characters that change how the rest of it
// reads without being seen: bidirectional embeddings, overrides, isolates and marks, zero-width and
// other invisible format characters, and controls other than tab and newline. Each is shown as a
// marked ⟨U+202E⟩, so a statement or name cannot display as something other than what it is (the
// "Trojan Source" trick). The text itself is untouched: copying copies it as it is.
// <DbText> is how every page shows a text that came from a monitored database (names, statements, values):
// marked as above and isolated (<bdi>), so that even visible right-to-left text cannot reorder the words
// around it. escapeInvisible() is the same for places that hold a string only: title and aria-label
// attributes, document.title, a chart's labels, a select's options.
import type { ComponentChildren } from 'preact'
import { HIDDEN_CHARACTERS } from '../../shared/invisible.ts'

/** Characters shown as markers (tab and newline are layout, and stay). */
export const INVISIBLE = new RegExp(`[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'u')

const INVISIBLE_RUNS = new RegExp(`${INVISIBLE.source}+`, 'gu')

const NAMES: Record<number, string> = {
  8203: 'zero width space',
  8204: 'zero width non-joiner',
  8205: 'zero width joiner',
  8206: 'left-to-right mark',
  8207: 'right-to-left mark',
  8232: 'line separator',
  8233: 'paragraph separator',
  8234: 'left-to-right embedding',
  8235: 'right-to-left embedding',
  8236: 'pop directional formatting',
  8237: 'left-to-right override',
  8238: 'right-to-left override',
  8294: 'left-to-right isolate',
  8295: 'right-to-left isolate',
  8296: 'first strong isolate',
  8297: 'pop directional isolate',
  1564: 'arabic letter mark',
  65279: 'byte order mark',
}

/** What a marked character is, for its tooltip; a tag character names the ASCII character it hides. */
function nameOf(code: number): string {
  if (code >= 0xe0020 && code <= 0xe007e) return `tag character hiding "${String.fromCharCode(code - 0xe0000)}"`
  if ((code >= 0xfe00 && code <= 0xfe0f) || (code >= 0xe0100 && code <= 0xe01ef)) return 'variation selector'
  return NAMES[code] ?? 'invisible character'
}

/** `U+202E` for one character. */
export const codePoint = (c: string) => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`

/** Whether `text` holds a character that revealInvisible marks. */
export const hasInvisible = (text: string) => INVISIBLE.test(text)

/** `text` for a place that holds a string only (an attribute, the document's title, a chart label): each invisible character as ⟨U+XXXX⟩. */
export function escapeInvisible(text: string): string {
  return INVISIBLE.test(text)
    ? text.replace(INVISIBLE_RUNS, (run) => [...run].map((c) => `⟨${codePoint(c)}⟩`).join(''))
    : text
}

/** `text` as nodes: plain runs as text, each invisible character as a marked ⟨U+XXXX⟩. */
export function revealInvisible(text: string): ComponentChildren {
  if (!INVISIBLE.test(text)) return text
  const out: ComponentChildren[] = []
  let at = 0
  for (const match of text.matchAll(INVISIBLE_RUNS)) {
    if (match.index > at) out.push(text.slice(at, match.index))
    for (const c of match[0]) {
      const name = nameOf(c.codePointAt(0)!)
      out.push(
        <span class="invisible-char" title={`${codePoint(c)} ${name}`}>
          {`⟨${codePoint(c)}⟩`}
        </span>,
      )
    }
    at = match.index + match[0].length
  }
  if (at < text.length) out.push(text.slice(at))
  return out
}

/**
 * A text from a monitored database, isolated from the text around it (<bdi>) with its invisible
 * characters shown as marked ⟨U+XXXX⟩. Null and undefined show nothing; a number shows as it is.
 */
export function DbText({ text }: { text: string | number | null | undefined }) {
  if (text === null || text === undefined) return null
  return <bdi>{revealInvisible(String(text))}</bdi>
}
