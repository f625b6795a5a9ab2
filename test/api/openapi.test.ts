// GET /api/v1/openapi.json and GET /api/v1/docs against the real app: the document is valid OpenAPI 3.1
// (by an OpenAPI schema validator package); every route of the app is in it with a 2xx answer, but the
// dashboard's own files; and a client that knows only the document calls every operation on a seeded
// server (an account, an API key, a PostgreSQL and a ClickHouse database with one full batch each) and
// checks each answer's status is documented and its body matches the document's schema for that status
// (Ajv, JSON Schema 2020-12). The rendered page escapes what it shows and loads nothing from elsewhere.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import Ajv2020 from 'ajv/dist/2020.js'
import { createApp, rateLimitedPaths } from '../../src/server/app.ts'
import { buildOpenApi, openApiPath } from '../../src/server/openapi.ts'
import { escapeHtml, renderApiDocs } from '../../src/server/web/api-docs.ts'
import { contentSecurityPolicy } from '../../src/server/web/security-headers.ts'
import { resultLimits } from '../../src/server/limits.ts'
import { VERSION } from '../../src/version.ts'
import { fullBatch } from '../support/full-batch.ts'
import { type Account, type TestServer, agentAccount, createApiKey, startTestServer } from '../support/server.ts'

type Node = Record<string, any>

/** The app's routes that are not API operations: the dashboard's page and files, the reset link's redirect, the docs page's stylesheet. */
const notOperations = [
  'GET /',
  'HEAD /',
  'GET /:file',
  'HEAD /:file',
  'GET /reset-password',
  'GET /accept-invite',
  'GET /api/v1/docs.css',
]

/**
 * Operations whose answer to a client knowing only the document is not a 2xx, and why. Their answer
 * must still be documented and match its schema.
 */
const expectedRefusals: Record<string, [number, string]> = {
  'GET /api/v1/auth/verify-email': [400, 'the token comes from a mail, not from the document'],
  'POST /api/v1/auth/reset-password': [400, 'the token comes from a mail, not from the document'],
  'POST /api/v1/auth/accept-invite': [400, 'the token comes from a mail, not from the document'],
  'DELETE /api/v1/organization/members/{id}': [409, "the seeded account is its organization's only owner"],
  'POST /api/v1/auth/resend-verification': [409, "the seeded account's address is verified already"],
  'POST /api/v1/agent/actions/{aid}': [404, 'an action takes a result only once an agent took it (running)'],
}

let server: TestServer
let account: Account
let apiKey: string
let document: Node
const ids = {
  postgres: '',
  clickhouse: '',
  spareKey: '',
  invite: '',
  action: '',
  destination: '',
  route: '',
  silence: '',
}
const batch = fullBatch('orders-pg', Date.now() - 30_000)

beforeAll(async () => {
  server = await startTestServer('sqlite')
  ;({ account, key: apiKey } = await agentAccount(server))
  ids.spareKey = (await createApiKey(server, account, 'to revoke')).id
  const invite = await server.call('POST', '/api/v1/organization/invites', {
    token: account.token,
    body: { email: 'to-revoke@example.com', role: 'member' },
  })
  expect(invite.status).toBe(201)
  ids.invite = invite.body.id
  const destination = await server.call('POST', '/api/v1/organization/alert-destinations', {
    token: account.token,
    body: { kind: 'pagerduty', name: 'seeded pager', routing_key: 'seeded-routing-key-0000' },
  })
  expect(destination.status).toBe(201)
  ids.destination = destination.body.id
  const route = await server.call('POST', '/api/v1/organization/alert-routes', {
    token: account.token,
    body: { name: 'seeded route', destinations: [ids.destination] },
  })
  expect(route.status).toBe(201)
  ids.route = route.body.id
  const silence = await server.call('POST', '/api/v1/organization/silences', {
    token: account.token,
    body: { rule: 'pg_cache_hit_ratio', ends_at: new Date(Date.now() + 3_600_000).toISOString(), comment: 'seeded' },
  })
  expect(silence.status).toBe(201)
  ids.silence = silence.body.id
  for (const [engine, b] of [
    ['postgres', batch],
    ['clickhouse', fullBatch('events-ch', Date.now() - 30_000, 'clickhouse')],
  ] as const) {
    const res = await server.call('POST', '/api/v1/ingest', { apiKey, body: b })
    expect(res.status).toBe(200)
    ids[engine] = res.body.database_id
  }
  const asked = await server.call('POST', `/api/v1/databases/${ids.postgres}/actions`, {
    token: account.token,
    body: { kind: 'explain', query_hash: '1', parameters: [] },
  })
  expect(asked.status).toBe(202)
  ids.action = asked.body.id
  const res = await fetch(`${server.base}/api/v1/openapi.json`)
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8')
  document = await res.json()
})

afterAll(async () => {
  await server?.stop()
})

/** Every operation of the document as [method, path, operation]. */
function operations(): [string, string, Node][] {
  return Object.entries(document.paths as Node).flatMap(([path, item]) =>
    Object.entries(item as Node).map(
      ([method, op]) => [method.toUpperCase(), path, op as Node] as [string, string, Node],
    ),
  )
}

describe('the OpenAPI document', () => {
  test('is valid OpenAPI 3.1, versioned as the server, and served without credentials', async () => {
    const result = await new Validator().validate(structuredClone(document))
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(document.openapi).toBe('3.1.0')
    expect(document.info.version).toBe(VERSION)
    expect(Object.keys(document.components.securitySchemes).sort()).toEqual(['apiKey', 'bearer', 'cookie'])
    // Built once: the same text on every request, and equal to a fresh build from the app's routes.
    const again = await (await fetch(`${server.base}/api/v1/openapi.json`)).json()
    expect(again).toEqual(document)
    expect(
      buildOpenApi(createApp(server.deps).routes as never, { rateLimitedPaths: Object.keys(rateLimitedPaths) }),
    ).toEqual(document as never)
  })

  test("every route of the app is an operation with a 2xx answer, but the dashboard's files", () => {
    const app = createApp(server.deps)
    const documented = new Set(operations().map(([m, p]) => `${m} ${p}`))
    const left: string[] = []
    for (const route of app.routes) {
      const key = `${route.method === 'WS' ? 'GET' : route.method} ${openApiPath(route.path)}`
      if (notOperations.includes(`${route.method} ${route.path}`)) {
        expect(documented.has(key)).toBe(false)
        left.push(`${route.method} ${route.path}`)
        continue
      }
      expect({ route: key, documented: documented.has(key) }).toEqual({ route: key, documented: true })
      const op = document.paths[openApiPath(route.path)][route.method === 'WS' ? 'get' : route.method.toLowerCase()]
      const success = Object.keys(op.responses).filter(
        (s) => /^2\d\d$/.test(s) || (s === '101' && route.method === 'WS'),
      )
      expect({ route: key, success: success.length > 0 }).toEqual({ route: key, success: true })
    }
    expect(left.sort()).toEqual([...notOperations].sort())
    expect(documented.size).toBe(app.routes.length - notOperations.length)
  })

  test('the generator adds the error answers, security and deterministic operation ids', () => {
    const op = (m: string, p: string) => document.paths[p][m]
    const statuses = (m: string, p: string) => Object.keys(op(m, p).responses).sort()
    expect(statuses('get', '/healthz')).toEqual(['200', '503'])
    expect(op('get', '/healthz').security).toEqual([])
    // 429 from the app's rate-limited paths, 401 as the route declares it (errorAnswers).
    expect(statuses('post', '/api/v1/auth/login')).toEqual(['200', '400', '401', '413', '429', '503'])
    expect(op('post', '/api/v1/auth/login').security).toEqual([])
    // 403 for an API key without the route's scope (auth/scopes.ts).
    expect(statuses('get', '/api/v1/databases/{id}')).toEqual(['200', '400', '401', '403', '404', '503'])
    expect(op('get', '/api/v1/databases/{id}').responses['403'].description).toBe(
      "Forbidden: an API key without the 'read' scope this route needs",
    )
    expect(op('get', '/api/v1/databases/{id}').security).toEqual([{ apiKey: [] }, { bearer: [] }, { cookie: [] }])
    expect(op('get', '/api/v1/databases/{id}').operationId).toBe('getDatabasesById')
    expect(statuses('delete', '/api/v1/api-keys/{id}')).toEqual(['204', '400', '401', '403', '404', '503'])
    expect(op('delete', '/api/v1/api-keys/{id}').responses['204'].content).toBeUndefined()
    expect(op('get', '/metrics').responses['200'].content).toEqual({
      'text/plain': { schema: { type: 'string', description: 'the Prometheus text exposition format' } },
    })
    expect(op('get', '/metrics').security).toEqual([{ apiKey: [] }, { bearer: [] }])
    expect(op('get', '/api/v1/databases/{id}/alerts').parameters).toEqual([
      { name: 'id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } },
      {
        name: 'status',
        in: 'query',
        required: false,
        schema: {
          anyOf: [
            { const: 'open', type: 'string' },
            { const: 'resolved', type: 'string' },
            { const: 'all', type: 'string' },
          ],
        },
      },
      // Read from its digits by the route, documented as what it means to a client: an integer, its default and bound.
      {
        name: 'limit',
        in: 'query',
        required: false,
        description: `how many to return (default ${resultLimits.alerts.default}; a larger value returns at most ${resultLimits.alerts.max})`,
        schema: { type: 'integer', minimum: 1, default: resultLimits.alerts.default, description: expect.any(String) },
      },
    ])
    const series = op('get', '/api/v1/databases/{id}/wal-stats/timeseries').parameters
    expect(series.map((p: Node) => [p.name, p.schema.type, p.schema.format ?? null])).toEqual([
      ['id', 'string', 'uuid'],
      ['since', 'string', 'date-time'],
      ['until', 'string', 'date-time'],
      ['bucket', 'integer', null],
    ])
    expect(series[3].schema).toMatchObject({ minimum: 60, multipleOf: 60 })
    // Each operation's id is its own (clients name their methods by it).
    const operationIds = operations().map(([, , o]) => o.operationId)
    expect(new Set(operationIds).size).toBe(operationIds.length)
    const ws = op('get', '/api/v1/databases/{id}/active/ws')
    expect(ws.responses['101'].description).toContain('WebSocket')
    // Titled schemas are components, referenced; no custom `error` keyword or TypeBox internals remain.
    expect(op('get', '/api/v1/databases').responses['200'].content['application/json'].schema).toEqual({
      type: 'array',
      items: { $ref: '#/components/schemas/Database' },
    })
    expect(document.components.schemas.Database.additionalProperties).toBe(false)
    const text = JSON.stringify(document)
    expect(text).not.toContain('"error":"')
    expect(text).not.toContain('"errorMessage"')
    expect(
      document.paths['/api/v1/auth/signup'].post.requestBody.content['application/json'].schema.properties.email,
    ).toEqual({ format: 'email', maxLength: 254, type: 'string' })
  })
})

/** The schema a $ref points to in the document. */
function resolve(schema: Node): Node {
  return typeof schema.$ref === 'string'
    ? document.components.schemas[decodeURIComponent(schema.$ref.split('/').pop()!)]
    : schema
}

/** A value for `schema` made from the document alone: its example, else the least its constraints allow. */
function sample(schema: Node): unknown {
  schema = resolve(schema)
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0]
  if ('const' in schema) return schema.const
  if (Array.isArray(schema.enum)) return schema.enum[0]
  if (Array.isArray(schema.anyOf)) return sample(schema.anyOf.find((s: Node) => s.type !== 'null') ?? schema.anyOf[0])
  switch (schema.type) {
    case 'object':
      return Object.fromEntries((schema.required ?? []).map((name: string) => [name, sample(schema.properties[name])]))
    case 'array':
      return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items))
    case 'integer':
    case 'number':
      return schema.minimum ?? 1
    case 'boolean':
      return false
    case 'string':
      if (schema.format === 'email') return 'openapi-client@example.com'
      if (schema.format === 'date-time') return new Date().toISOString()
      if (schema.format === 'uuid') return crypto.randomUUID()
      if (typeof schema.pattern === 'string' && new RegExp(schema.pattern).test('60')) return '60'
      return 'openapi-client'.padEnd(schema.minLength ?? 0, 'x')
    default:
      return null
  }
}

/** Values the client learns from the seeded data, not from the document: ids and names it has. */
function pathValue(path: string, name: string, engine: 'postgres' | 'clickhouse'): string {
  const before = path.split('/').at(path.split('/').indexOf(`{${name}}`) - 1)
  if (name === 'id' && path.startsWith('/api/v1/organization/members')) return account.userId
  if (name === 'id' && path.startsWith('/api/v1/organization/invites')) return ids.invite
  if (name === 'id' && path.startsWith('/api/v1/organization/alert-destinations')) return ids.destination
  if (name === 'id' && path.startsWith('/api/v1/organization/alert-routes')) return ids.route
  if (name === 'id' && path.startsWith('/api/v1/organization/silences')) return ids.silence
  if (name === 'id') return path.startsWith('/api/v1/api-keys') ? ids.spareKey : ids[engine]
  if (name === 'aid') return ids.action
  if (name === 'hash') return batch.query_stats![0]!.query_hash
  if (name === 'name' && path.includes('/custom-metrics/')) return batch.custom_metrics!.definitions[0]!.name
  if (before === '{schema}' || name === 'name')
    return before === 'indexes' || path.includes('/indexes/')
      ? batch.indexes![0]!.index_name
      : batch.tables![0]!.table_name
  if (name === 'schema')
    return path.includes('/indexes/') ? batch.indexes![0]!.schema_name : batch.tables![0]!.schema_name
  return 'x'
}

/** Operations in an order that works: sign up first, creations next, reads, deletions, and signing out last. */
function rank(method: string, path: string): number {
  if (path === '/api/v1/auth/signup') return 0
  if (path === '/api/v1/auth/logout') return 4
  if (method === 'DELETE') return 3
  return method === 'POST' || method === 'PUT' ? 1 : 2
}

const ajv = new Ajv2020({ strict: false, allErrors: true })
ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/)
ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i)
ajv.addFormat('email', /^[^\s@]+@[^\s@]+$/)
let ajvReady = false

/** Checks `body` against the document's schema (refs into components resolved by Ajv). */
function matches(schema: Node, body: unknown): string[] {
  if (!ajvReady) {
    ajv.addSchema({ $id: 'https://dbm.test/openapi.json', components: { schemas: document.components.schemas } })
    ajvReady = true
  }
  const rooted = JSON.parse(JSON.stringify(schema).replaceAll('"$ref":"#/', '"$ref":"https://dbm.test/openapi.json#/'))
  const validate = ajv.compile(rooted)
  return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`)
}

describe('a client built from the document alone', () => {
  test('calls every operation and each answer is documented and matches its schema', async () => {
    const calls = operations().sort(
      ([m1, p1], [m2, p2]) => rank(m1, p1) - rank(m2, p2) || p1.localeCompare(p2) || m1.localeCompare(m2),
    )
    const results: string[] = []
    for (const [method, path, op] of calls) {
      const key = `${method} ${path}`
      let answer: { status: number; contentType: string; body: unknown } | undefined
      for (const engine of ['postgres', 'clickhouse'] as const) {
        let url = path.replace(/\{([^}]+)\}/g, (_, name) => encodeURIComponent(pathValue(path, name, engine)))
        const search = new URLSearchParams()
        for (const p of (op.parameters ?? []) as Node[])
          if (p.in === 'query' && p.required) search.set(p.name, String(sample(p.schema)))
        if (search.size > 0) url += `?${search}`
        const headers: Record<string, string> = {}
        let body: string | undefined
        const scheme = Object.keys(op.security[0] ?? {})[0]
        if (scheme === 'apiKey') headers['x-api-key'] = apiKey
        if (scheme === 'bearer') headers.authorization = `Bearer ${account.token}`
        // An optional body is sent when the client holds what it names (a refresh token).
        const optionalBody =
          op.requestBody &&
          !op.requestBody.required &&
          resolve(op.requestBody.content['application/json'].schema).properties?.refresh_token
        if (optionalBody) {
          body = JSON.stringify({ refresh_token: account.refreshToken })
          headers['content-type'] = 'application/json'
        }
        if (op.requestBody?.required) {
          const schema = op.requestBody.content['application/json'].schema
          // The agent's batch: a full one, as the agent sends (the document's schema allows it; a sampled one would be empty).
          let value = path === '/api/v1/ingest' ? { ...batch, batch_id: crypto.randomUUID() } : sample(schema)
          // A silence's window: the example's, moved to now (a fixed date passes, and a silence ends within 90 days).
          if (path === '/api/v1/organization/silences')
            value = {
              ...(value as Node),
              starts_at: undefined,
              ends_at: new Date(Date.now() + 3_600_000).toISOString(),
            }
          body = JSON.stringify(value)
          headers['content-type'] = 'application/json'
          expect({ key, errors: matches(schema, value) }).toEqual({ key, errors: [] })
        }
        if (op.responses['101']) {
          const opened = await new Promise<number>((done) => {
            const ws = new WebSocket(`${server.base.replace('http', 'ws')}${url}`, { headers } as never)
            // Open, and its first message arrived: the stream is the caller's.
            ws.onmessage = () => {
              ws.close()
              done(101)
            }
            ws.onerror = () => done(0)
            ws.onclose = () => done(0)
          })
          answer = { status: opened, contentType: '', body: undefined }
        } else {
          const res = await fetch(server.base + url, { method, headers, body })
          const contentType = (res.headers.get('content-type') ?? '').split(';')[0]!
          const text = await res.text()
          answer = {
            status: res.status,
            contentType,
            body: contentType === 'application/json' ? JSON.parse(text) : text,
          }
        }
        // A route of the other engine's database answers 404 or 400 for this one: try the other.
        if (!path.startsWith('/api/v1/databases/{id}') || ![400, 404].includes(answer.status)) break
      }
      const { status, contentType, body } = answer!
      const documented = op.responses[String(status)]
      expect({ key, status, documented: documented !== undefined }).toEqual({ key, status, documented: true })
      const [expectedStatus] = expectedRefusals[key] ?? []
      if (expectedStatus !== undefined) expect({ key, status }).toEqual({ key, status: expectedStatus })
      else expect({ key, status, success: status >= 100 && status < 300 }).toEqual({ key, status, success: true })
      const media = documented.content ? Object.keys(documented.content)[0] : undefined
      expect({ key, contentType: media ? contentType : '' }).toEqual({ key, contentType: media ?? '' })
      if (media) expect({ key, errors: matches(documented.content[media].schema, body) }).toEqual({ key, errors: [] })
      // The client keeps the tokens it is given, as any client of a rotating refresh token must.
      if (typeof (body as Node | undefined)?.refresh_token === 'string')
        account.refreshToken = (body as Node).refresh_token
      results.push(`${key} ${status}`)
    }
    // Each operation once; the deletions last, on the spare key and the seeded databases.
    expect(results.length).toBe(calls.length)
    if (process.env.OPENAPI_TEST_LOG) console.log(results.join('\n'))
    expect(results.filter((r) => r.startsWith('DELETE'))).toEqual([
      'DELETE /api/v1/api-keys/{id} 204',
      'DELETE /api/v1/databases/{id} 204',
      'DELETE /api/v1/databases/{id}/thresholds 204',
      'DELETE /api/v1/organization/alert-destinations/{id} 204',
      'DELETE /api/v1/organization/alert-routes/{id} 204',
      'DELETE /api/v1/organization/invites/{id} 204',
      'DELETE /api/v1/organization/members/{id} 409',
      'DELETE /api/v1/organization/silences/{id} 204',
      'DELETE /api/v1/organization/webhook 204',
    ])
  }, 60_000)
})

describe('GET /api/v1/docs', () => {
  test('renders every operation from the document as a static page that runs under the security headers', async () => {
    const res = await fetch(`${server.base}/api/v1/docs`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(res.headers.get('content-security-policy')).toBe(contentSecurityPolicy)
    const html = await res.text()
    // No script at all, no inline style, nothing from another origin: the stylesheet is ours.
    expect(html).not.toMatch(/<script|<style|style=|https?:\/\//i)
    expect(html).toContain('<link rel="stylesheet" href="/api/v1/docs.css">')
    const css = await fetch(`${server.base}/api/v1/docs.css`)
    expect(css.status).toBe(200)
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8')
    for (const [method, path, op] of operations()) {
      expect(html).toContain(
        `<span class="method ${method.toLowerCase()}">${method.toLowerCase()}</span> <span class="path">${escapeHtml(path)}</span>`,
      )
      if (op.summary) expect(html).toContain(escapeHtml(op.summary))
    }
    // Field lists of a response, with types and descriptions.
    expect(html).toContain(
      '<code>last_seen_at</code> <span class="type">string (date-time) | null</span> — when the last batch arrived',
    )
    expect(html).toContain(
      `<code>status</code> <span class="type">&#34;connected&#34; | &#34;disconnected&#34;</span> — ${escapeHtml('connected while a batch arrived within max(3 × poll interval, 60 s)')}`,
    )
  })

  test('every text from the document is escaped', () => {
    const hostile = '<img src=x onerror=alert(1)>"&\''
    const html = renderApiDocs({
      openapi: '3.1.0',
      info: { title: hostile, version: hostile, description: hostile },
      paths: {
        [`/x/${hostile}`]: {
          get: {
            tags: [hostile],
            operationId: hostile,
            summary: hostile,
            parameters: [
              { name: hostile, in: 'query', required: false, schema: { type: 'string', description: hostile } },
            ],
            responses: {
              '200': {
                description: hostile,
                content: {
                  'application/json': {
                    schema: {
                      type: 'object',
                      properties: { [hostile]: { type: 'string', description: hostile, format: hostile } },
                    },
                  },
                },
              },
            },
            security: [{ [hostile]: [] }],
          },
        },
      },
    })
    expect(html).not.toContain('<img')
    expect(html).not.toContain('"&\'')
    expect(html).toContain(escapeHtml(hostile))
    expect(escapeHtml(hostile)).toBe('&#60;img src=x onerror=alert(1)&#62;&#34;&#38;&#39;')
  })
})
