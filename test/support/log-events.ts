// Log events as the agent's log reader sends them (src/shared/wire.ts LogEventsSection): entries with
// their kind's fields, and the counts per minute, kind and severity that cover every entry read,
// whether sent whole or dropped past the agent's cap.
import type { LogCount, LogEvent, LogEventsSection } from '../../src/shared/wire.ts'

/** An entry of `kind` at `ts`; everything else empty unless given. */
export function logEntry(kind: string, ts: number, rest: Partial<LogEvent> = {}): LogEvent {
  return {
    ts,
    kind,
    severity: 'log',
    sqlstate: null,
    message: `${kind} message`,
    fingerprint: `${kind} message`,
    pid: 4242,
    user: null,
    database: null,
    application: null,
    client: null,
    detail: null,
    statement: null,
    query_id: null,
    fields: {},
    ...rest,
  }
}

/**
 * The section for these entries: their counts per minute, kind and severity (each entry's `count`),
 * plus `droppedEntries`, entries counted but not sent whole (added to the counts and to `dropped`).
 */
export function logSection(entries: LogEvent[], droppedEntries: LogEvent[] = []): LogEventsSection {
  const counts = new Map<string, LogCount>()
  for (const e of [...entries, ...droppedEntries]) {
    const minute = Math.floor(e.ts / 60_000) * 60_000
    const key = JSON.stringify([minute, e.kind, e.severity])
    const c = counts.get(key)
    if (c) c.count += e.count ?? 1
    else counts.set(key, { minute, kind: e.kind, severity: e.severity, count: e.count ?? 1 })
  }
  return {
    source: 'files',
    entries,
    counts: [...counts.values()],
    dropped: droppedEntries.length,
    bytes_read: 1000,
    backlog_bytes: 0,
  }
}
