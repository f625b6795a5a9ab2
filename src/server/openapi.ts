// The API's OpenAPI 3.1 document, built from the Elysia app's own routes (app.routes): each route's
// method and path, its params, query and body schemas, its response map (src/shared/api) and its
// `detail` (summary, tags, operationId, security). Nothing here lists routes by hand: a route added to
// the app is in the document. The generator adds the error answers every route can give ({"error"}:
// 400 for input, 401 when authenticated, 404 for a path with an id, 413 for a body, 429 for the
// rate-limited auth paths, 503 while the store is unreachable). Schemas with a `title` are hoisted to
// components/schemas and referenced; keywords that are not JSON Schema 2020-12 (TypeBox's internals, our
// custom `error` messages) are left out. Served at GET /api/v1/openapi.json and rendered as HTML at
// GET /api/v1/docs (src/server/web/api-docs.ts), both public: the document tells nothing a route's
// answer does not.
//
// Why not @elysiajs/openapi (1.4.16, evaluated for issue 27 on this app's routes): its toOpenAPISchema
// gives a document that does not validate as OpenAPI 3.1 (content on 204 answers, the WebSocket route as
// a method `ws`), documents trailing-slash twins of paths, inlines every schema (no components: 0 named
// schemas against our 103), and has none of the error answers (400/401/403/404/413/429/503) nor the
// per-route security and API-key scope that the conformance tests check every answer against; making it
// match would need a post-pass about as long as this file. Its docs pages (Scalar, Swagger UI) load their
// script from a CDN, which air-gapped installs and our Content-Security-Policy refuse. It would also add
// ~94 KB minified to the binary against ~14 KB here; generation time is the same (~20 ms, once).
import type { TSchema } from '@sinclair/typebox'
import { ErrorBody } from '../shared/api/common.ts'
import { ROUTE_ACCESS, routeKey } from './auth/scopes.ts'
import { VERSION } from '../version.ts'

/** What the generator reads of a route (Elysia's InternalRoute). */
export interface RouteInfo {
  method: string
  path: string
  hooks?: {
    body?: TSchema
    query?: TSchema
    params?: TSchema
    response?: Record<string | number, TSchema> | TSchema
    detail?: RouteDetail
  }
}

/** The `detail` option of a route, as far as the document reads it. */
export interface RouteDetail {
  summary?: string
  description?: string
  tags?: string[]
  operationId?: string
  /** OpenAPI security requirements; `[]` marks a public route. Absent: any of the three schemes. */
  security?: Record<string, string[]>[]
  /** Answers given as OpenAPI response objects, for a route that answers with something other than a response schema. */
  responses?: Record<string, unknown>
  /** Leaves the route out of the document (the dashboard's own files and pages). */
  hide?: boolean
}

export interface OpenApiOptions {
  /** Paths (as the router writes them) refused above their rate limit with a 429. */
  rateLimitedPaths?: Iterable<string>
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type JsonObject = { [key: string]: Json }
export type OpenApiDocument = JsonObject

const KIND = Symbol.for('TypeBox.Kind')
const OPTIONAL = Symbol.for('TypeBox.Optional')

/** JSON Schema 2020-12 keywords (and OpenAPI's own) the document keeps; any other is TypeBox's or ours. */
const SCHEMA_KEYWORDS = new Set([
  'type',
  'enum',
  'const',
  'title',
  'description',
  'default',
  'examples',
  'example',
  'deprecated',
  'readOnly',
  'writeOnly',
  'format',
  'pattern',
  'minLength',
  'maxLength',
  'contentMediaType',
  'contentEncoding',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'uniqueItems',
  'contains',
  'minContains',
  'maxContains',
  'properties',
  'required',
  'additionalProperties',
  'patternProperties',
  'propertyNames',
  'minProperties',
  'maxProperties',
  'dependentRequired',
  'dependentSchemas',
  'unevaluatedProperties',
  'unevaluatedItems',
  'anyOf',
  'oneOf',
  'allOf',
  'not',
  'if',
  'then',
  'else',
  '$ref',
  '$defs',
])
/** Keywords whose value is a map of names to schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'dependentSchemas'])
/** Keywords whose value is a schema or an array of schemas. */
const SCHEMA_VALUES = new Set([
  'items',
  'prefixItems',
  'contains',
  'additionalProperties',
  'propertyNames',
  'unevaluatedProperties',
  'unevaluatedItems',
  'anyOf',
  'oneOf',
  'allOf',
  'not',
  'if',
  'then',
  'else',
])

const kindOf = (schema: unknown): unknown => (schema as Record<symbol, unknown>)[KIND]

const isObject = (v: unknown): v is Record<string | symbol, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** The JSON value of a keyword that is not a schema (enum values, examples, defaults). */
function plain(value: unknown): Json {
  return value === undefined ? null : (JSON.parse(JSON.stringify(value)) as Json)
}

/**
 * Elysia's t.Integer (and t.Numeric) is a union of the number with a numeric string (format integer or
 * numeric, which it accepts for query parameters): documented as the number alone, with the union's
 * own keywords (description, bounds).
 */
function elysiaNumeric(schema: JsonObject): JsonObject | undefined {
  const members = schema.anyOf
  if (!Array.isArray(members)) return undefined
  const numbers = members.filter(
    (m) => !(isObject(m) && m.type === 'string' && (m.format === 'integer' || m.format === 'numeric')),
  )
  if (numbers.length !== 1 || numbers.length === members.length) return undefined
  const { anyOf: _, ...rest } = schema
  return { ...rest, ...(numbers[0] as JsonObject) }
}

class SchemaConverter {
  readonly components: Record<string, JsonObject> = {}
  private readonly hoisted = new Map<string, string>()

  /** `schema` as JSON Schema 2020-12, its titled parts hoisted. `response`: objects are exact (Elysia refuses unnamed fields). */
  convert(schema: TSchema, response: boolean, hoist = true): JsonObject {
    const converted = this.walk(schema, response)
    return hoist ? this.hoist(converted) : converted
  }

  private hoist(schema: JsonObject): JsonObject {
    const title = schema.title
    if (typeof title !== 'string') return schema
    const text = JSON.stringify(schema)
    const seen = this.hoisted.get(title)
    if (seen !== undefined && seen !== text) throw new Error(`openapi: two different schemas are titled ${title}`)
    this.hoisted.set(title, text)
    this.components[title] = schema
    return { $ref: `#/components/schemas/${encodeURIComponent(title)}` }
  }

  private walk(schema: TSchema, response: boolean): JsonObject {
    const kind = kindOf(schema)
    // TypeBox kinds JSON Schema does not have.
    if (kind === 'Undefined' || kind === 'Void') return { not: {} }
    if (kind === 'Date') return { type: 'string', format: 'date-time' }
    if (kind === 'BigInt') return { type: 'integer' }
    if (kind === 'Uint8Array') return { type: 'string', contentEncoding: 'base64' }
    const out: JsonObject = {}
    for (const [key, value] of Object.entries(schema)) {
      if (!SCHEMA_KEYWORDS.has(key) || value === undefined) continue
      if (SCHEMA_MAPS.has(key) && isObject(value)) {
        const map: JsonObject = {}
        for (const [name, sub] of Object.entries(value)) map[name] = this.convert(sub as TSchema, response)
        out[key] = map
      } else if (SCHEMA_VALUES.has(key) && Array.isArray(value)) {
        out[key] = value.map((sub) => this.convert(sub as TSchema, response))
      } else if (SCHEMA_VALUES.has(key) && isObject(value)) {
        out[key] = this.convert(value as unknown as TSchema, response)
      } else {
        out[key] = plain(value)
      }
    }
    const numeric = elysiaNumeric(out)
    if (numeric) return numeric
    if (response && out.type === 'object' && isObject(out.properties) && out.additionalProperties === undefined) {
      out.additionalProperties = false
    }
    return out
  }
}

/** `:id` segments as `{id}`, and no trailing slash (the router matches the path either way). */
export function openApiPath(path: string): string {
  const trimmed = path.length > 1 ? path.replace(/\/+$/, '') : path
  return trimmed.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}

/** getDatabasesByIdQueriesByHash for GET /api/v1/databases/{id}/queries/{hash}. */
export function operationIdFor(method: string, path: string): string {
  const words = openApiPath(path)
    .replace(/^\/api\/v1/, '')
    .split('/')
    .filter(Boolean)
    .map((segment) => {
      const param = /^\{(.+)\}$/.exec(segment)
      const text = param ? `by-${param[1]}` : segment
      return text
        .split(/[^A-Za-z0-9]+/)
        .filter(Boolean)
        .map((w) => w[0]!.toUpperCase() + w.slice(1))
        .join('')
    })
  return method.toLowerCase() + words.join('')
}

/** The area a route belongs to: /api/v1/<area>/…, or for a database's data /api/v1/databases/{id}/<area>/…. */
function tagFor(path: string): string {
  const segments = openApiPath(path).split('/').filter(Boolean)
  if (segments[0] !== 'api') return segments[0] === 'metrics' ? 'metrics' : 'health'
  const area = segments[2] ?? 'api'
  if (area === 'databases' && segments[3] === '{id}' && segments[4] && segments[4] !== 'health') return segments[4]
  return area
}

const errorRef = { $ref: '#/components/schemas/Error' }
const errorResponse = (description: string): JsonObject => ({
  description,
  content: { 'application/json': { schema: errorRef } },
})

const STATUS_TEXT: Record<number, string> = {
  101: 'Switching Protocols',
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  503: 'Service Unavailable',
}

const ALL_SCHEMES = [{ apiKey: [] }, { bearer: [] }, { cookie: [] }]

function isSchema(value: unknown): value is TSchema {
  return isObject(value) && kindOf(value) !== undefined
}

/** The response map of a route: `{ 200: X }`, or one schema for every status (Elysia's short form, read as 200). */
function responseMap(
  response: RouteInfo['hooks'] extends infer H ? (H extends { response?: infer R } ? R : never) : never,
): [number, TSchema][] {
  if (!response) return []
  if (isSchema(response)) return [[200, response]]
  return Object.entries(response as Record<string, TSchema>).map(([status, schema]) => [Number(status), schema])
}

/** The OpenAPI 3.1 document of `routes`. */
export function buildOpenApi(routes: readonly RouteInfo[], options: OpenApiOptions = {}): OpenApiDocument {
  const converter = new SchemaConverter()
  const rateLimited = new Set([...(options.rateLimitedPaths ?? [])].map(openApiPath))
  const paths: Record<string, JsonObject> = {}
  const tags = new Set<string>()
  converter.convert(ErrorBody, true)

  for (const route of routes) {
    const detail = route.hooks?.detail ?? {}
    if (detail.hide) continue
    const websocket = route.method === 'WS'
    const method = websocket ? 'get' : route.method.toLowerCase()
    if (!['get', 'put', 'post', 'delete', 'patch', 'head', 'options'].includes(method)) continue
    const path = openApiPath(route.path)
    const operation: JsonObject = {}
    const tag = detail.tags?.[0] ?? tagFor(route.path)
    tags.add(tag)
    operation.tags = [tag]
    operation.operationId =
      detail.operationId ?? operationIdFor(route.method === 'WS' ? 'GET' : route.method, route.path)
    if (detail.summary) operation.summary = detail.summary
    if (detail.description) operation.description = detail.description
    else if (websocket)
      operation.description =
        'A WebSocket: the request upgrades the connection (101), which then carries JSON messages.'

    const parameters: JsonObject[] = []
    const pathNames = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)
    const paramsSchema = route.hooks?.params as TSchema | undefined
    for (const name of pathNames) {
      const sub = paramsSchema?.properties?.[name] as TSchema | undefined
      // Every {id} of the API is a server id (a UUID; anything else is a 400 naming the parameter).
      const schema = sub
        ? converter.convert(sub, false)
        : name === 'id'
          ? { type: 'string', format: 'uuid' }
          : { type: 'string' }
      parameters.push({ name, in: 'path', required: true, schema })
    }
    const querySchema = route.hooks?.query as TSchema | undefined
    if (querySchema && isObject(querySchema.properties)) {
      const required = new Set<string>(Array.isArray(querySchema.required) ? querySchema.required : [])
      for (const [name, sub] of Object.entries(querySchema.properties as Record<string, TSchema>)) {
        // A parameter read from its text by the route (a number in digits, a time) says what it means to a client.
        const documented = (sub as { documentAs?: JsonObject }).documentAs
        const param: JsonObject = {
          name,
          in: 'query',
          required: required.has(name),
          schema: documented ? (plain(documented) as JsonObject) : converter.convert(sub, false),
        }
        if (typeof sub.description === 'string') param.description = sub.description
        parameters.push(param)
      }
    }
    if (parameters.length > 0) operation.parameters = parameters

    const bodySchema = route.hooks?.body as TSchema | undefined
    if (bodySchema && !websocket) {
      const optional = (bodySchema as unknown as Record<symbol, unknown>)[OPTIONAL] === 'Optional'
      operation.requestBody = {
        required: !optional,
        content: { 'application/json': { schema: converter.convert(bodySchema, false) } },
      }
    }

    const responses: Record<string, JsonObject> = {}
    if (websocket) responses['101'] = { description: 'Switching Protocols: the WebSocket is open' }
    for (const [status, schema] of responseMap(route.hooks?.response as never)) {
      const kind = kindOf(schema)
      const description = schema.description ?? STATUS_TEXT[status] ?? `status ${status}`
      if (kind === 'Undefined' || kind === 'Void') {
        responses[String(status)] = { description }
        continue
      }
      const mediaType =
        typeof schema.contentMediaType === 'string' && schema.type === 'string'
          ? schema.contentMediaType
          : 'application/json'
      const converted = converter.convert(schema, true)
      if (mediaType !== 'application/json') delete converted.contentMediaType
      responses[String(status)] = { description, content: { [mediaType.split(';')[0]!.trim()]: { schema: converted } } }
    }

    for (const [status, response] of Object.entries(detail.responses ?? {}))
      responses[status] = plain(response) as JsonObject
    const security = detail.security ?? ALL_SCHEMES
    // The scope an API key needs here (auth/scopes.ts), when it needs one.
    const access = ROUTE_ACCESS[routeKey(route.method, route.path)]
    const scope = access === 'ingest' || access === 'read' || access === 'admin' ? access : undefined
    operation.security = security as Json
    const hasInput =
      bodySchema !== undefined ||
      pathNames.length > 0 ||
      (querySchema !== undefined && Object.keys(querySchema.properties ?? {}).length > 0)
    const errors: [number, string, boolean][] = [
      [400, 'Bad Request: a parameter or the body is invalid (the message names the field)', hasInput],
      [401, 'Unauthorized: no valid credentials', security.length > 0],
      [
        403,
        `Forbidden: an API key without the '${scope}' scope this route needs`,
        scope !== undefined && security.some((s) => 'apiKey' in s),
      ],
      [404, 'Not Found: no such resource in your organization', pathNames.length > 0],
      [413, 'Payload Too Large: the body is over its cap', bodySchema !== undefined],
      [429, 'Too Many Requests: over the rate limit (see Retry-After)', rateLimited.has(path)],
      [503, 'Service Unavailable: the store cannot be reached', true],
    ]
    for (const [status, text, applies] of errors)
      if (applies && !responses[String(status)]) responses[String(status)] = errorResponse(text)
    operation.responses = responses

    paths[path] ??= {}
    paths[path]![method] = operation
  }

  const sortedPaths: Record<string, JsonObject> = {}
  for (const key of Object.keys(paths).sort()) sortedPaths[key] = paths[key]!
  const components: JsonObject = {}
  for (const key of Object.keys(converter.components).sort()) components[key] = converter.components[key]!
  return {
    openapi: '3.1.0',
    info: {
      title: 'dbm API',
      version: VERSION,
      description:
        "Monitoring of PostgreSQL and ClickHouse: accounts, API keys, registered databases, their telemetry and diagnosis, alerts, and the agent's ingest. " +
        'Errors are always {"error": "..."}; times are RFC 3339 in UTC; sizes are bytes and durations milliseconds unless a field says otherwise.',
    },
    servers: [{ url: '/' }],
    tags: [...tags].sort().map((name) => ({ name })),
    paths: sortedPaths,
    components: {
      schemas: components,
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'an API key (dbm_ak_…)' },
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'a user access token (from signup, login or refresh) or an API key',
        },
        cookie: {
          type: 'apiKey',
          in: 'cookie',
          name: 'dbm_access',
          description: "the dashboard's session cookie, set by signup, login and refresh",
        },
      },
    },
  }
}

const cache = new WeakMap<object, { document: OpenApiDocument; json: string }>()

/** The document of `app`'s routes, built on first use and kept (the routes do not change once the app is built). */
export function openApiOf(
  app: { routes: readonly unknown[] },
  options: OpenApiOptions = {},
): { document: OpenApiDocument; json: string } {
  let built = cache.get(app)
  if (!built) {
    const document = buildOpenApi(app.routes as RouteInfo[], options)
    built = { document, json: JSON.stringify(document) }
    cache.set(app, built)
  }
  return built
}

/**
 * The error answers a route gives beyond those the generator adds, for its `detail.responses`:
 * `errorAnswers({ 409: 'the name is taken' })`.
 */
export function errorAnswers(
  answers: Record<number, string>,
): Record<string, { description: string; content: Record<string, { schema: { $ref: string } }> }> {
  return Object.fromEntries(
    Object.entries(answers).map(([status, description]) => [
      status,
      { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
    ]),
  )
}

/** A route for a signed-in user only (an access token as Bearer, or the dashboard's cookie): never an API key. */
export const userSession: Record<string, string[]>[] = [{ bearer: [] }, { cookie: [] }]

/** The 403 of a route that members may not use (requireOwner in auth/principal.ts), nor keys without `admin` (auth/scopes.ts). */
export const ownersOnly = (what: string) =>
  errorAnswers({ 403: `the caller is a member (only an owner can ${what}), or an API key without the 'admin' scope` })
