// Responses of /api/v1/databases/{id}/log-events and /log-events/summary: the server log's entries as
// the agent classified them (kinds and their fields: src/shared/log-kinds.ts), newest first, and their
// exact counts per kind over time.
import { t } from 'elysia'
import { LOG_CATEGORIES, LOG_KIND_NAMES, LOG_SEVERITIES } from '../log-kinds.ts'
import { Nullable, Timestamp } from './common.ts'

const FieldScalar = t.Union([t.Number(), t.Boolean(), t.Null(), t.String()])

/** One log entry. */
export const LogEventEntry = t.Object(
  {
    id: t.String({ description: 'stable id of the entry, for links' }),
    ts: Timestamp('when the server logged it'),
    kind: t.String({
      description: `one of ${LOG_KIND_NAMES.join(', ')} (an older server may not know a newer agent's kind)`,
    }),
    category: t.UnionEnum(LOG_CATEGORIES),
    severity: t.String({ description: `one of ${LOG_SEVERITIES.join(', ')}: as the server logged it` }),
    importance: t.String({
      description:
        "the severity the filters use: the logged one raised to its kind's (archive_failed, server_crash, could_not_fork, out_of_memory, disk_full: error; recovery, checkpoints_too_frequent: warning)",
    }),
    sqlstate: Nullable(
      t.String({ description: "PostgreSQL's SQLSTATE (when the log gives it) or ClickHouse's error name" }),
    ),
    message: t.String({ description: 'the primary message as logged, secrets masked' }),
    fingerprint: t.String({
      description: 'the message with numbers, literals and quoted names replaced: what identical entries share',
    }),
    pid: Nullable(t.Integer()),
    user: Nullable(t.String()),
    database: Nullable(t.String()),
    application: Nullable(t.String()),
    client: Nullable(t.String()),
    detail: Nullable(t.String({ description: 'DETAIL, HINT and CONTEXT lines' })),
    statement: Nullable(
      t.String({ description: "the entry's statement, literals replaced unless the agent's log_text is full" }),
    ),
    query_id: Nullable(t.String({ description: "pg_stat_statements' queryid of the statement, when logged" })),
    query_hash: Nullable(
      t.String({
        description: "the statement's hash on the Statements page, when the entry names a statement dbm knows",
      }),
    ),
    fields: t.Record(t.String(), t.Union([FieldScalar, t.Array(t.Union([t.Number(), t.String()]))]), {
      description: "the kind's own fields (lock mode, wait time, table, checkpoint figures, ...)",
    }),
    count: t.Integer({ description: 'occurrences this entry stands for (ClickHouse system.errors), 1 otherwise' }),
  },
  { title: 'LogEvent' },
)

export const LogEventList = t.Object(
  {
    entries: t.Array(LogEventEntry),
    next_cursor: Nullable(
      t.String({ description: 'pass as `cursor` for the next (older) page; null on the last page' }),
    ),
    dropped: t.Integer({
      description: 'entries in the window that the agent counted but did not send whole (counted in the summary)',
    }),
  },
  { title: 'LogEventList' },
)

/** Counts per kind per time bucket, of the kinds and severities the request's filters select. */
export const LogEventSummary = t.Object(
  {
    from: Timestamp(),
    to: Timestamp(),
    bucket_seconds: t.Integer(),
    /** Every kind with a count in the window, the most frequent first, with its total. */
    kinds: t.Array(
      t.Object({
        kind: t.String(),
        category: t.UnionEnum(LOG_CATEGORIES),
        label: t.String(),
        total: t.Integer(),
        /** Counts per severity as logged. */
        by_severity: t.Record(t.String(), t.Integer()),
      }),
    ),
    /** One row per bucket with a count, oldest first: the bucket's start and each kind's count in it. */
    buckets: t.Array(t.Object({ ts: Timestamp('start of the bucket'), counts: t.Record(t.String(), t.Integer()) })),
    total: t.Integer(),
  },
  { title: 'LogEventSummary' },
)
