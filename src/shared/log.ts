// Plain one-line logs, for the server and the agent alike: `<time> <LEVEL> <message> key=value ...`.
// Callers pass only safe fields: request paths without their query string, never a header, body,
// token, key, or a DSN with its password. As a last guard, a URL's password or a password= parameter
// in any value (a driver's error quoting its connection string, say) is written as ***.
import { writeSync } from 'node:fs'
import { redactSecrets } from './redact.ts'
import { HIDDEN_CHARACTERS } from './invisible.ts'

export type LogLevel = 'debug' | 'info' | 'warn' | 'error'
const order: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }
export const logLevels = Object.keys(order) as LogLevel[]

export type LogFields = Record<string, unknown>

export interface Logger {
  /** Whether lines of this level are written (to skip building fields nobody reads). */
  enabled(level: LogLevel): boolean
  debug(message: string, fields?: LogFields): void
  info(message: string, fields?: LogFields): void
  warn(message: string, fields?: LogFields): void
  error(message: string, fields?: LogFields): void
}

/** What makes a value quoted: white space, quotes, `=`, backslashes, control characters and the hidden ones (bidi, invisible, tags). */
const NEEDS_QUOTES = new RegExp(`[\\s"=\\\\\\u0000-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'u')
/** Characters JSON.stringify leaves as they are that a terminal or an editor would act on, or that hide text. */
const ESCAPE_TOO = new RegExp(`[\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'gu')

/** `\uXXXX` for each UTF-16 unit of `c` (a character past U+FFFF is its two surrogates, as JSON writes it). */
const jsonEscape = (c: string) =>
  Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')

/**
 * A field's value as one token: as it is when plain, else a JSON string in which every control and
 * bidi character is escaped, so text from a monitored database (a statement, an error) can neither
 * break the line, fake a field, nor send escape sequences to a terminal.
 */
export function formatLogValue(value: unknown): string {
  const s = redactSecrets(typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value))
  if (s !== '' && !NEEDS_QUOTES.test(s)) return s
  return jsonQuote(s)
}

/**
 * `s` as a JSON string in which every control, DEL, C1 and hidden character (bidi, invisible, tags) is
 * escaped, so it reads as one visible token wherever it is shown: a log field, or a name quoted in a text
 * (the audit of a cancel quotes the session's role and application so).
 */
export function jsonQuote(s: string): string {
  return JSON.stringify(s).replace(ESCAPE_TOO, jsonEscape)
}

/**
 * Writes one line to stderr with write(2) itself. `process.stderr` is a Node stream built at its first
 * use, which costs 16-29 ms in the compiled binary: `dbm serve` logs that it listens before it answers
 * anything. If the descriptor refuses (a full non-blocking pipe), the stream takes the rest.
 */
export function writeStderr(line: string): void {
  const bytes = Buffer.from(`${line}\n`)
  let written = 0
  try {
    while (written < bytes.length) written += writeSync(2, bytes, written)
  } catch {
    process.stderr.write(bytes.subarray(written))
  }
}

export function createLogger(level: LogLevel = 'info', write: (line: string) => void = writeStderr): Logger {
  const at =
    (lvl: LogLevel) =>
    (message: string, fields: LogFields = {}) => {
      if (order[lvl] < order[level]) return
      const parts = [new Date().toISOString(), lvl.toUpperCase(), message]
      for (const [k, v] of Object.entries(fields)) if (v !== undefined) parts.push(`${k}=${formatLogValue(v)}`)
      write(parts.join(' '))
    }
  return {
    enabled: (lvl) => order[lvl] >= order[level],
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
  }
}
