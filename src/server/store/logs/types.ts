// The server log's entries and their counts (migration 15), as the agent's `log_events` section sends
// them. Ingest (LogEventWrites.apply, called by planBatch in the batch's transaction) inserts each entry
// sent whole with an id of its own, and adds the section's counts per minute, kind and severity into
// minute and hour buckets (summed across batches: a batch is applied once, by its batch_id), with the
// entries the agent counted but did not send whole under the empty kind. Reads: entries newest first by
// (ts, id) with their filters, counts per bucket, and what was dropped. Everything from the monitored
// database stays text reaching SQL only as parameters; `q` is matched with LIKE, its wildcards escaped.
// Records and interfaces here; reads.ts implements LogEventReads, writes.ts LogEventWrites (ingest).
import type { IngestBatch } from '../../../shared/wire.ts'
import type { Writes } from '../ingest/batch.ts'
import type { Window } from '../window.ts'

/** A value of an entry's `fields`, as the wire allows it. */
export type LogFieldValue = number | boolean | null | string | (number | string)[]

export interface StoredLogEntry {
  id: string
  ts: number
  kind: string
  severity: string
  sqlstate: string | null
  message: string
  fingerprint: string
  pid: number | null
  user: string | null
  database: string | null
  application: string | null
  client: string | null
  detail: string | null
  statement: string | null
  query_id: string | null
  /** The statement's hash when query_id names a statement dbm keeps (PostgreSQL: query_hash is the queryid). */
  query_hash: string | null
  fields: Record<string, LogFieldValue>
  count: number
}

/** Which entries a read wants; every condition optional but the window. */
export interface LogEntryFilter {
  since: number
  until: number
  /** These kinds only. */
  kinds?: readonly string[]
  /** These severities only, as logged. */
  severities?: readonly string[]
  /** These importances only: the logged severity raised to the kind's (LOG_KIND_IMPORTANCE). */
  importances?: readonly string[]
  /** A substring of the message, the statement or the detail, case-insensitive (ASCII letters on SQLite). */
  q?: string
  /** Entries older than this one (the previous page's last): (ts, id) below it. */
  before?: { ts: number; id: string }
}

/** Which counts a read wants: every condition optional. */
export interface LogCountFilter {
  /** These kinds only. */
  kinds?: readonly string[]
  /** These importances only (see LogEntryFilter). */
  importances?: readonly string[]
}

/** One bucket's count of one kind and severity. */
export interface LogCountRow {
  bucket: number
  kind: string
  severity: string
  count: number
}

export interface LogEventReads {
  /** Entries matching the filter, newest first (ts, then id, descending), at most `limit`. */
  entries(databaseId: string, filter: LogEntryFilter, limit: number): Promise<StoredLogEntry[]>
  /**
   * Counts per `bucketMs` bucket (aligned on multiples of it), kind and severity, oldest first, from the
   * minute rows (and the hour rows where minute rows are no longer kept: window.minuteFloor), of the
   * kinds and importances the filter names when it does.
   */
  counts(databaseId: string, window: Window, bucketMs: number, filter?: LogCountFilter): Promise<LogCountRow[]>
  /** Entries the agent counted but did not send whole, in the window. */
  dropped(databaseId: string, window: Window): Promise<number>
}

export interface LogEventWrites {
  /** Adds the batch's log_events section to the batch's writes (nothing when it has none). */
  apply(writes: Writes, databaseId: string, batch: IngestBatch): void
}

/** The kind and severity the dropped entries are counted under (no real kind or severity is empty). */
export const DROPPED_KEY = ''
