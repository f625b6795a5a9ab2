// Field schemas whose validation messages name the field, so a 400 tells the caller what to fix.
import { t } from 'elysia'
import type { TLiteral, TUnion } from '@sinclair/typebox'
import { badRequest } from '../http-error.ts'

/** Text with at least one visible character and no NUL (PostgreSQL cannot store NUL in text). */
const VISIBLE_TEXT = '^(?=[\\s\\S]*\\S)[^\\u0000]*$'

export const requiredString = (field: string, max: number) =>
  t.String({
    minLength: 1,
    maxLength: max,
    pattern: VISIBLE_TEXT,
    error: `${field} is required and must be a non-empty string of at most ${max} characters`,
  })

/** A token from a mail or a login: required, at most `max` characters. */
export const token = (field: string, max = 256) =>
  t.String({
    minLength: 1,
    maxLength: max,
    pattern: VISIBLE_TEXT,
    error: `${field} is required and must be at most ${max} characters`,
  })

/** Query parameters: unknown ones (cache busters, tracking tags) are ignored, known ones validated. */
export const query = <T extends Parameters<typeof t.Object>[0]>(fields: T) =>
  t.Object(fields, { additionalProperties: true })

export const email = (field = 'email') =>
  t.String({ format: 'email', maxLength: 254, error: `${field} must be a valid email address` })

export const password = (field: string, min: number, max: number) =>
  t.String({ minLength: min, maxLength: max, error: `${field} must be a string of at least ${min} characters` })

export const integer = (field: string, min: number, max: number) =>
  t.Integer({ minimum: min, maximum: max, error: `${field} must be an integer from ${min} to ${max}` })

export const boolean = (field: string) => t.Boolean({ error: `${field} must be true or false` })

/** One of fixed strings. (t.UnionEnum is not used: Elysia fills a missing one with its first value.) */
export const oneOf = <const T extends readonly [string, ...string[]]>(field: string, values: T) =>
  t.Union(
    values.map((v) => t.Literal(v)),
    { error: `${field} must be one of: ${values.join(', ')}` },
  ) as unknown as TUnion<TLiteral<T[number]>[]>

/** A JSON object whose keys are {fields}; any other key is a 400 that names it. */
export const body = <T extends Parameters<typeof t.Object>[0]>(fields: T, options: { examples?: unknown[] } = {}) =>
  t.Object(fields, { ...options, additionalProperties: false })

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * An `{id}` path parameter: the server's ids are UUIDs, so anything else is a 400 naming the parameter
 * (it cannot name a resource of anyone's, so the 400 reveals nothing a 404 would not).
 */
export function pathId(
  value: string,
  kind: 'database' | 'API key' | 'invite' | 'member' | 'alert destination' | 'alert route' | 'silence',
): string {
  if (!UUID.test(value)) throw badRequest(`id must be ${/^[aeiou]/i.test(kind) ? 'an' : 'a'} ${kind} id (a UUID)`)
  return value
}
