// The 400 message of a request that fails its schema: one sentence naming the field. app.ts's onError
// words Elysia's validation errors with it, and the ingest writer (src/server/ingest-writer/) the
// failures of the checks it runs itself, so that both say exactly the same.
import type { ValueError } from '@sinclair/typebox/errors'

/**
 * The error that names the field: a union's own error names the union (`tables.0.delta`), the error of
 * its member that failed deeper (`tables.0.delta.seq_scan`) names the field within it.
 */
function innermost(issue: ValueError): ValueError {
  for (const member of issue.errors ?? []) {
    const first = member.First()
    if (first && first.path.length > issue.path.length) return innermost(first)
  }
  return issue
}

/**
 * The message of a failure of `type` (body, query, params...) whose first error is `valueError`;
 * `customError`: a schema's own message (Elysia's ValidationError.customError), used as it is when a string.
 */
export function validationMessage(error: { type: string; valueError?: ValueError; customError?: unknown }): string {
  if (typeof error.customError === 'string') return error.customError
  const issue = error.valueError && innermost(error.valueError)
  const field = (issue?.path ?? '').replace(/^\//, '').replaceAll('/', '.')
  if (issue?.message === 'Unexpected property') return `unknown field: ${field}`
  if (!field) return error.type === 'body' ? 'request body must be a JSON object' : `invalid ${error.type}`
  return `invalid ${field}: ${issue?.message ?? 'unexpected value'}`
}

/** What Elysia takes as a schema's own message for a failure at `schema` (its `error` option, when a string). */
export function customErrorOf(schema: unknown): string | undefined {
  const own = (schema as { error?: unknown } | undefined)?.error
  return typeof own === 'string' ? own : undefined
}
