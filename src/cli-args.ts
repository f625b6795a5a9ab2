// A small, strict flag parser: `--name value`, `--name=value` and boolean `--name`; a flag that may be
// given several times collects its values in order. Unknown flags, missing values and stray arguments
// are usage errors (the CLI exits 2 with the one-line message).
import { UsageError } from './server/config.ts'

export interface FlagSpec {
  /** Flags that take a value. */
  values: readonly string[]
  /** Flags that are on when present. */
  switches: readonly string[]
  /** Flags that take a value and may be given several times (parseFlagLists). */
  repeated?: readonly string[]
}

export function parseFlags(command: string, argv: readonly string[], spec: FlagSpec): Record<string, string> {
  return parseFlagLists(command, argv, spec).flags
}

/** The flags, and apart from them the values of each repeated flag given (in order). */
export function parseFlagLists(
  command: string,
  argv: readonly string[],
  spec: FlagSpec,
): { flags: Record<string, string>; lists: Record<string, string[]> } {
  const out: Record<string, string> = {}
  const lists: Record<string, string[]> = {}
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
    } else if (spec.values.includes(name) || spec.repeated?.includes(name)) {
      const value = inline ?? argv[++i]
      if (value === undefined || (inline === undefined && value.startsWith('--'))) {
        throw new UsageError(`dbm ${command}: --${name} needs a value`)
      }
      if (spec.repeated?.includes(name)) (lists[name] ??= []).push(value)
      else out[name] = value
    } else {
      throw new UsageError(`dbm ${command}: unknown flag --${name} (see dbm ${command} --help)`)
    }
  }
  return { flags: out, lists }
}
