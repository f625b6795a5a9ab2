// The events resource's records: one entry of a database's timeline (GET /databases/{id}/events). The
// kinds and the severity are the API's (src/shared/api/events.ts, alerts.ts), not copies of them.
import type { Static } from '@sinclair/typebox'
import type { Severity } from '../../../shared/api/common.ts'
import type { EVENT_KINDS } from '../../../shared/api/events.ts'

export type EventKind = (typeof EVENT_KINDS)[number]

export interface DbEvent {
  ts: number
  kind: EventKind
  severity: Static<typeof Severity> | null
  title: string
  detail: string | null
  /** What the event is about: `schema.name` of a table or index, a setting's name, a view, a statement's hash. */
  object: string | null
  /** The dashboard page about it (a hash route). */
  link: string | null
}
