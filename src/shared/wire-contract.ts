// Versions of the ingest wire contract, so that an agent sends a server only what it knows. A server
// announces the version it speaks (header X-Dbm-Wire-Version on GET /healthz and on every ingest answer); a server
// that announces none is of the first release (0.1.0), which speaks version 1. Each later version lists
// the fields it added, by path (`settings_detail`, `tables[].heap_bytes`, `x.*.y` for a record's values),
// topmost only: an agent talking to an older server leaves those out of its batches and counts them.
// Rule for changing wire.ts: a new optional field or section goes into the list of the next version
// (test/upgrade/wire-contract.test.ts checks the list against the previous release's schema); a field
// must never become required, change its type, or lose values it accepted, as older agents still send.
import { Kind, type TSchema } from '@sinclair/typebox'

/** The version this build speaks. */
export const WIRE_VERSION = 4

/** The response header in which a server announces its version (GET /healthz, POST /api/v1/ingest). */
export const WIRE_VERSION_HEADER = 'x-dbm-wire-version'

/** The version a server speaks that announces none: the first release's. */
export const FIRST_WIRE_VERSION = 1

/** The release that introduced each version (for log lines and the README). */
export const WIRE_RELEASES: Readonly<Record<number, string>> = { 1: '0.1.0', 2: '0.2.0', 3: '0.3.0', 4: '0.4.0' }

/** The fields each version added to the batch, topmost paths only. */
export const WIRE_ADDITIONS: Readonly<Record<number, readonly string[]>> = {
  // 0.2.0 (issue 26): lock waits of long operations, settings' detail, heap and TOAST sizes.
  2: [
    'progress[].blocker',
    'progress[].current_locker_pid',
    'progress[].lockers_done',
    'progress[].lockers_total',
    'progress[].wait_event',
    'progress[].wait_event_type',
    'server_state.settings_detail',
    'tables[].heap_bytes',
    'tables[].toast_bytes',
  ],
  // 0.3.0 (issue 28): the operator's own SQL checks; (issue 32) disabled triggers, the rows modified since
  // a table's last analyze, pg_wal's size and the last checkpoint, a prepared transaction's locks,
  // ClickHouse's users.
  3: [
    'clickhouse_users',
    'custom_metrics',
    'disabled_triggers',
    'security',
    'tables[].n_mod_since_analyze',
    'wal_dir',
    'xmin_holders[].locks',
  ],
  // 0.4.0 (issue 29): the span a cycle's deltas cover after a gap, apart from the poll interval.
  4: ['covered_seconds'],
}

/** The paths a server of `version` does not know: everything added after it (none for this version or later). */
export function addedAfter(version: number): string[] {
  const paths: string[] = []
  for (let v = version + 1; v <= WIRE_VERSION; v++) paths.push(...(WIRE_ADDITIONS[v] ?? []))
  return paths
}

/** Every field path a schema declares, sorted: `a`, `a.b`, `a[].b`, `a.*.b` (record values). */
export function schemaPaths(schema: TSchema): string[] {
  const paths = new Set<string>()
  const walk = (s: TSchema, at: string, depth: number) => {
    if (depth > 12) return
    switch (s[Kind]) {
      case 'Object':
        for (const [key, property] of Object.entries(s.properties as Record<string, TSchema>)) {
          const path = at ? `${at}.${key}` : key
          paths.add(path)
          walk(property, path, depth + 1)
        }
        return
      case 'Array':
        walk(s.items as TSchema, `${at}[]`, depth + 1)
        return
      case 'Union':
        for (const member of s.anyOf as TSchema[]) walk(member, at, depth + 1)
        return
      case 'Record':
        for (const value of Object.values(s.patternProperties as Record<string, TSchema>))
          walk(value, `${at}.*`, depth + 1)
        return
      default:
        return
    }
  }
  walk(schema, '', 0)
  return [...paths].sort()
}

/** A path split into its steps: keys, `[]` (every item), `*` (every value of a record). */
function steps(path: string): string[] {
  return path
    .replaceAll('[]', '.[]')
    .split('.')
    .filter((s) => s !== '')
}

interface Trie {
  /** Remove the value at this step. */
  end: boolean
  next: Map<string, Trie>
}

function trieOf(paths: readonly string[]): Trie {
  const root: Trie = { end: false, next: new Map() }
  for (const path of paths) {
    let node = root
    for (const step of steps(path)) {
      let child = node.next.get(step)
      if (!child) node.next.set(step, (child = { end: false, next: new Map() }))
      node = child
    }
    node.end = true
  }
  return root
}

export interface LeftOut {
  /** Values removed (a field in 100 rows counts 100). */
  values: number
  /** The paths that had a value removed, in the order of `paths`. */
  paths: string[]
}

/**
 * Removes the fields at `paths` from `batch` (in place) and tells what was removed. Paths that name
 * nothing in the batch are no error.
 */
export function leaveOut(batch: object, paths: readonly string[]): LeftOut {
  const hit = new Map<string, number>()
  const walk = (value: unknown, node: Trie, at: string) => {
    if (typeof value !== 'object' || value === null) return
    for (const [step, child] of node.next) {
      if (step === '[]') {
        if (!Array.isArray(value)) continue
        for (const item of value) walk(item, child, `${at}[]`)
        continue
      }
      if (Array.isArray(value)) continue
      const record = value as Record<string, unknown>
      const keys = step === '*' ? Object.keys(record) : Object.hasOwn(record, step) ? [step] : []
      for (const key of keys) {
        const path = step === '*' ? `${at}.*` : at ? `${at}.${key}` : key
        if (child.end) {
          delete record[key]
          hit.set(path, (hit.get(path) ?? 0) + 1)
        } else walk(record[key], child, path)
      }
    }
  }
  walk(batch, trieOf(paths), '')
  let values = 0
  for (const n of hit.values()) values += n
  return { values, paths: paths.filter((p) => hit.has(p)) }
}
