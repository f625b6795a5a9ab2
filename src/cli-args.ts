// A small, strict flag parser: `--name value`, `--name=value` and boolean `--name`. Unknown flags,
// missing values and stray arguments are usage errors (the CLI exits 2 with the one-line message).
import { UsageError } from './server/config.ts'

export interface FlagSpec {
  /** Flags that take a value. */
  values: readonly string[]
  /** Flags that are on when present. */
  switches: readonly string[]
}

export function parseFlags(command: string, argv: readonly string[], spec: FlagSpec): Record<string, string> {
  const out: Record<string, string> = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '-h') {
      out.help = 'true'
      continue
    }
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/s.exec(arg)
    if (!m) throw new UsageError(`dbm ${command}: unexpected argument "${arg}" (see dbm ${command} --help)`)
    const [, name, inline] = m as unknown as [string, string, string | undefined]
    if (spec.switches.includes(name)) {
      if (inline !== undefined) throw new UsageError(`dbm ${command}: --${name} takes no value`)
      out[name] = 'true'
    } else if (spec.values.includes(name)) {
      const value = inline ?? argv[++i]
      if (value === undefined || (inline === undefined && value.startsWith('--'))) {
        throw new UsageError(`dbm ${command}: --${name} needs a value`)
      }
      out[name] = value
    } else {
      throw new UsageError(`dbm ${command}: unknown flag --${name} (see dbm ${command} --help)`)
    }
  }
  return out
}
