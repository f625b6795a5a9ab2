// ClickHouse's errors by name over a span, from the stored log events (system.errors entries stand for
// `count` occurrences each, text_log and crash_log entries for one): how often each occurred and its
// latest message, the most frequent first. Read once per diagnosis and span; shared by
// ch_log_error_rate and ch_failed_queries.
import type { DoctorContext } from '../../context.ts'
import { ERROR_SEVERITIES } from '../error-rate.ts'
import { MAX_LOG_ENTRIES, logExcerpt, numberField } from '../postgres/log-evidence.ts'

export interface ErrorName {
  /** The error's name (UNKNOWN_TABLE), or the message's pattern when it has none. */
  name: string
  code: number | null
  count: number
  /** The latest message, on one line and cut. */
  message: string
  last_at: number
}

export function topErrors(ctx: DoctorContext, since: number, until: number): Promise<ErrorName[]> {
  return ctx.once(`ch-errors:${since}:${until}`, async () => {
    const entries = await ctx.store.logEvents.entries(
      ctx.db.id,
      { since, until, severities: ERROR_SEVERITIES },
      MAX_LOG_ENTRIES,
    )
    const byName = new Map<string, ErrorName>()
    for (const e of entries) {
      const name = e.sqlstate ?? logExcerpt(e.fingerprint, 120)
      const found = byName.get(name)
      if (!found)
        byName.set(name, {
          name,
          code: numberField(e, 'code'),
          count: e.count,
          message: logExcerpt(e.message),
          last_at: e.ts,
        })
      else {
        found.count += e.count
        if (e.ts > found.last_at)
          Object.assign(found, {
            message: logExcerpt(e.message),
            last_at: e.ts,
            code: numberField(e, 'code') ?? found.code,
          })
      }
    }
    return [...byName.values()].sort((a, b) => b.count - a.count || b.last_at - a.last_at)
  })
}
