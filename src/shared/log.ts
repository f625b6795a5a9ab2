// Plain one-line logs, for the server and the agent alike: `<time> <LEVEL> <message> key=value ...`.
// Callers pass only safe fields: request paths without their query string, never a header, body,
// token, key, or a DSN with its password.

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

function format(value: unknown): string {
  const s = typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)
  return /[\s"=]/.test(s) || s === '' ? JSON.stringify(s) : s
}

export function createLogger(level: LogLevel = 'info', write: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Logger {
  const at = (lvl: LogLevel) => (message: string, fields: LogFields = {}) => {
    if (order[lvl] < order[level]) return
    const parts = [new Date().toISOString(), lvl.toUpperCase(), message]
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) parts.push(`${k}=${format(v)}`)
    write(parts.join(' '))
  }
  return { enabled: (lvl) => order[lvl] >= order[level], debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}
