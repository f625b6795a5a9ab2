// Plain one-line logs: `<time> <LEVEL> <message> key=value ...`. Callers pass only safe fields:
// request paths are logged without their query string, and no header, body, token or key is logged.

export type LogLevel = 'debug' | 'info' | 'warn' | 'error'
const order: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }
export const logLevels = Object.keys(order) as LogLevel[]

export type LogFields = Record<string, string | number | boolean | null | undefined>

export interface Logger {
  /** Whether lines of this level are written (to skip building fields nobody reads). */
  enabled(level: LogLevel): boolean
  debug(message: string, fields?: LogFields): void
  info(message: string, fields?: LogFields): void
  warn(message: string, fields?: LogFields): void
  error(message: string, fields?: LogFields): void
}

function format(value: string | number | boolean | null | undefined): string {
  const s = String(value)
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
