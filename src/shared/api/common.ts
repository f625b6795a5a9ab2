// Building blocks of the API's response schemas. Each route declares what it answers with Elysia's
// `response` option, from schemas in src/shared/api/*.ts: Elysia checks every answer against it (a
// mismatch is a 500 naming the field in the log, never a wrong answer), GET /api/v1/openapi.json is
// generated from the same schemas, and the dashboard takes its types from them (`Static<typeof X>`,
// imported with `import type`, so no schema code reaches the page's bundle).
//
// Schemas are built with Elysia's `t`, never with '@sinclair/typebox' directly: a second TypeBox
// instance in the compiled binary does not validate (see app.ts). A response object is exact: Elysia
// refuses a field its schema does not name, so every field the API sends is documented. A top-level
// response object is given a `title`, which names it under components/schemas in the document.
// Formats are checked on answers too: only ones the server writes itself (date-time, uuid), never one
// of a value a user typed under older rules (an address such as `local@localhost` is no `email` format).
import { t } from 'elysia'
import type { TSchema } from '@sinclair/typebox'

/** The body of every error: `{"error": "..."}`. */
export const ErrorBody = t.Object(
  { error: t.String({ description: 'what went wrong, in one sentence' }) },
  { title: 'Error' },
)

/** An answer with no body (204). */
export const NoContent = t.Undefined()

/** A time as the API writes it: RFC 3339 in UTC with milliseconds (`2026-11-26T14:03:00.000Z`). */
export const Timestamp = (description?: string) =>
  t.String({ format: 'date-time', ...(description ? { description } : {}) })

/** A server id. */
export const Uuid = (description?: string) => t.String({ format: 'uuid', ...(description ? { description } : {}) })

/** `schema` or null. */
export const Nullable = <T extends TSchema>(schema: T) => t.Union([schema, t.Null()])

/** How bad a finding is, and so its recommendation, its alert and its event: the one definition. */
export const Severity = t.Union([t.Literal('critical'), t.Literal('warning'), t.Literal('info')])
