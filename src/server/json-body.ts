// Request bodies as every route receives them: the bytes read under the route's size cap (413 past it),
// parsed as JSON, and refused with a 400 when they are not a JSON object, nest deeper than
// MAX_JSON_DEPTH or hold a NUL character. app.ts's parse hook calls parseJsonBody for every request.
import { HttpError } from './http-error.ts'

/** Deepest JSON nesting accepted; deeper documents are refused before validation (they would stall it). */
export const MAX_JSON_DEPTH = 200

/**
 * True when a parsed JSON value nests deeper than `max` levels (an object or array is one level). The
 * walk stops at that depth, so a hostile document costs no more than a legitimate one of its size; the
 * parse before it is linear in the text however deep (a scan of the text for brackets cost the ingest
 * more than parsing it).
 */
function deeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return false
  if (max === 0) return true
  if (Array.isArray(value)) {
    for (const v of value) if (v !== null && typeof v === 'object' && deeperThan(v, max - 1)) return true
    return false
  }
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key]
    if (v !== null && typeof v === 'object' && deeperThan(v, max - 1)) return true
  }
  return false
}

/** True when any string (key or value) in the parsed document holds a NUL character. */
function holdsNul(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return value.includes('\0')
  if (depth > MAX_JSON_DEPTH || value === null || typeof value !== 'object') return false
  for (const [k, v] of Object.entries(value)) if (k.includes('\0') || holdsNul(v, depth + 1)) return true
  return false
}

/** The 413 of a body over `limit` bytes (declared or read). */
export function tooLarge(limit: number) {
  return new HttpError(413, `request body is larger than the ${Math.round(limit / 1024)} KiB limit`)
}

/**
 * The body as text, undefined when it has no bytes (UTF-8, a leading BOM dropped, invalid sequences replaced: TextDecoder's defaults),
 * refused with a 413 past `limit`. A declared length over it is refused before a byte is read (Bun holds
 * a body to its declared length), and a body within it is decoded by Bun from its bytes in one step
 * (arrayBuffer then TextDecoder cost a 146 KB ingest batch twice as much); a chunked body is read chunk
 * by chunk and refused at the first chunk that takes it over, so no more than the limit is ever held.
 */
async function readText(request: Request, limit: number): Promise<string | undefined> {
  const body = await readBody(request, limit, (r) => r.text())
  return typeof body === 'string' || body === undefined ? body : new TextDecoder().decode(body)
}

/**
 * A body of at most `limit` bytes (else a 413): read whole by `whole` when its length is declared (and
 * within it), else chunk by chunk, refused at the first chunk that takes it over (the chunks' bytes then).
 */
async function readBody<T>(
  request: Request,
  limit: number,
  whole: (r: Request) => Promise<T>,
): Promise<T | Uint8Array | undefined> {
  const declared = request.headers.get('content-length')
  if (declared !== null) {
    const length = Number(declared)
    if (length > limit) throw tooLarge(limit)
    return length === 0 ? undefined : whole(request)
  }
  if (!request.body) return undefined
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of request.body) {
    size += chunk.byteLength
    if (size > limit) throw tooLarge(limit)
    chunks.push(chunk)
  }
  return size === 0 ? undefined : Buffer.concat(chunks)
}

/** The request's JSON object body (`{}` when it has none), read under `limit` bytes; an HttpError when refused. */
export async function parseJsonBody(request: Request, limit: number): Promise<object> {
  return parseJsonText(await readText(request, limit))
}

/**
 * The body's bytes, undefined when it has none, refused with a 413 past `limit` as readText refuses it:
 * the ingest's, handed to the ingest writer's thread unparsed (src/server/ingest-writer/).
 */
export async function readBodyBytes(request: Request, limit: number): Promise<ArrayBuffer | undefined> {
  const body = await readBody(request, limit, (r) => r.arrayBuffer())
  if (!(body instanceof Uint8Array)) return body
  return body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer
}

/** `text` (undefined: no body) as the JSON object a body must be (`{}` when absent); an HttpError when refused. */
export function parseJsonText(text: string | undefined): object {
  if (text === undefined) return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new HttpError(400, 'request body must be valid JSON')
  }
  // Refused before validation, which deep documents would stall.
  if (deeperThan(parsed, MAX_JSON_DEPTH))
    throw new HttpError(400, `request body is nested deeper than ${MAX_JSON_DEPTH} levels`)
  // Every endpoint takes a JSON object; anything else is refused here with one clear message.
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new HttpError(400, 'request body must be a JSON object')
  // JSON carries a NUL only as the escape \u0000, so only such bodies need the walk.
  if (text.includes('\\u0000') && holdsNul(parsed))
    throw new HttpError(400, 'request body strings must not contain NUL characters')
  return parsed
}
