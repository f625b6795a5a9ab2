// GET /api/v1/docs: the OpenAPI document (src/server/openapi.ts) as one static HTML page, rendered on
// the server: operations by tag, each with its parameters, request body and answers as field lists
// (name, type, required, description). No script and no external asset: its stylesheet is
// GET /api/v1/docs.css on the same origin, as the security headers' Content-Security-Policy asks
// (style-src 'self', no inline style). Every text taken from the document goes through escapeHtml.
import { Elysia } from 'elysia'
import { type OpenApiDocument, type OpenApiOptions, openApiOf } from '../openapi.ts'

type Node = Record<string, unknown>

/** Text for HTML element content and double-quoted attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v)

export const docsStylesheet = `body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem 2rem;color:#1d2330}
h1{margin-bottom:.2rem}h2{border-bottom:2px solid #d7dce5;margin-top:2.5rem}
section.op{border:1px solid #d7dce5;border-radius:6px;margin:1rem 0;padding:.6rem 1rem}
.method{display:inline-block;min-width:4.5rem;font-weight:700;text-transform:uppercase}
.get{color:#1565c0}.post{color:#2e7d32}.put,.patch{color:#b26a00}.delete{color:#c62828}
code,.path{font-family:ui-monospace,monospace}.path{font-weight:600}
table{border-collapse:collapse;width:100%;margin:.3rem 0}td,th{border-top:1px solid #eef0f4;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{font-weight:600;color:#4a5263}.type{color:#6a4c93;font-family:ui-monospace,monospace}.req{color:#c62828}
ul.fields{margin:.2rem 0 .2rem 1.2rem;padding:0}nav a{margin-right:.8rem}
`

class Renderer {
  constructor(private readonly document: OpenApiDocument) {}

  /** The schema a $ref names, and its name. */
  private resolve(schema: Node): [Node, string | undefined] {
    const ref = schema.$ref
    if (typeof ref !== 'string') return [schema, undefined]
    const name = decodeURIComponent(ref.slice(ref.lastIndexOf('/') + 1))
    const components = (this.document.components as Node | undefined)?.schemas as Node | undefined
    return [(components?.[name] as Node | undefined) ?? {}, name]
  }

  /** A short type: string (date-time), integer, array of Database, "a" | "b", X or null. */
  typeOf(schema: unknown): string {
    if (!isNode(schema)) return 'any'
    const [target, name] = this.resolve(schema)
    if (name) return name
    if ('const' in target) return JSON.stringify(target.const)
    if (Array.isArray(target.enum)) return target.enum.map((v) => JSON.stringify(v)).join(' | ')
    const union = (target.anyOf ?? target.oneOf) as unknown[] | undefined
    if (Array.isArray(union)) return union.map((s) => this.typeOf(s)).join(' | ')
    if (target.type === 'array') return `array of ${this.typeOf(target.items)}`
    if (target.type === 'object' && !target.properties && isNode(target.patternProperties)) {
      return `map of ${this.typeOf(Object.values(target.patternProperties)[0])}`
    }
    if (target.type === 'null') return 'null'
    if (isNode(target.not) && Object.keys(target.not).length === 0) return 'nothing'
    const type = typeof target.type === 'string' ? target.type : 'any'
    return typeof target.format === 'string' ? `${type} (${target.format})` : type
  }

  /** A field's description: its own, or (a nullable field) that of the value it may hold. */
  private descriptionOf(schema: unknown): string | undefined {
    if (!isNode(schema)) return undefined
    if (typeof schema.description === 'string') return schema.description
    const union = schema.anyOf ?? schema.oneOf
    if (!Array.isArray(union) || union.some((s) => isNode(s) && typeof s.$ref === 'string')) return undefined
    return union.map((s) => this.descriptionOf(s)).find((d) => d !== undefined)
  }

  /** A schema's fields as a nested list; a named schema once, by name. */
  fields(schema: unknown, depth = 0, seen = new Set<string>()): string {
    if (!isNode(schema) || depth > 6) return ''
    const [target, name] = this.resolve(schema)
    if (name) {
      if (seen.has(name)) return ''
      seen = new Set(seen).add(name)
    }
    if (target.type === 'array') return this.fields(target.items, depth, seen)
    const union = (target.anyOf ?? target.oneOf) as unknown[] | undefined
    if (Array.isArray(union)) {
      return union
        .filter((s) => isNode(s) && (s as Node).type !== 'null')
        .map((s) => {
          const inner = this.fields(s, depth, seen)
          return inner ? `<p>${escapeHtml(this.typeOf(s))}:</p>${inner}` : ''
        })
        .join('')
    }
    if (!isNode(target.properties)) return ''
    const required = new Set(Array.isArray(target.required) ? target.required : [])
    const items = Object.entries(target.properties).map(([field, sub]) => {
      const text = this.descriptionOf(sub)
      const description = text ? ` — ${escapeHtml(text)}` : ''
      const mark = required.has(field) ? '' : ' <span class="opt">(optional)</span>'
      return `<li><code>${escapeHtml(field)}</code> <span class="type">${escapeHtml(this.typeOf(sub))}</span>${mark}${description}${this.fields(sub, depth + 1, seen)}</li>`
    })
    return `<ul class="fields">${items.join('')}</ul>`
  }

  operation(path: string, method: string, op: Node): string {
    const parts: string[] = []
    parts.push(`<section class="op" id="${escapeHtml(op.operationId ?? `${method}-${path}`)}">`)
    parts.push(
      `<div><span class="method ${escapeHtml(method)}">${escapeHtml(method)}</span> <span class="path">${escapeHtml(path)}</span></div>`,
    )
    if (typeof op.summary === 'string') parts.push(`<p>${escapeHtml(op.summary)}</p>`)
    if (typeof op.description === 'string') parts.push(`<p>${escapeHtml(op.description)}</p>`)
    const security = Array.isArray(op.security) ? op.security : []
    const schemes = security.flatMap((s) => (isNode(s) ? Object.keys(s) : []))
    parts.push(`<p>Authentication: ${schemes.length === 0 ? 'none' : escapeHtml(schemes.join(', '))}</p>`)
    const parameters = Array.isArray(op.parameters) ? (op.parameters as Node[]) : []
    if (parameters.length > 0) {
      const rows = parameters.map(
        (p) =>
          `<tr><td><code>${escapeHtml(p.name)}</code></td><td>${escapeHtml(p.in)}</td><td class="type">${escapeHtml(this.typeOf(p.schema))}</td>` +
          `<td>${p.required ? '<span class="req">required</span>' : 'optional'}</td><td>${escapeHtml(p.description ?? this.descriptionOf(p.schema) ?? '')}</td></tr>`,
      )
      parts.push(
        `<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>type</th><th></th><th>description</th></tr>${rows.join('')}</table>`,
      )
    }
    const body = isNode(op.requestBody) ? op.requestBody : undefined
    if (body) {
      const schema = ((body.content as Node | undefined)?.['application/json'] as Node | undefined)?.schema
      parts.push(
        `<h4>Request body${body.required ? '' : ' (optional)'}: <span class="type">${escapeHtml(this.typeOf(schema))}</span></h4>${this.fields(schema)}`,
      )
    }
    parts.push('<h4>Responses</h4>')
    for (const [status, response] of Object.entries(isNode(op.responses) ? op.responses : {})) {
      if (!isNode(response)) continue
      const content = isNode(response.content) ? response.content : {}
      const [mediaType, media] = Object.entries(content)[0] ?? []
      const schema = isNode(media) ? media.schema : undefined
      const type = mediaType
        ? ` <span class="type">${escapeHtml(mediaType === 'application/json' ? this.typeOf(schema) : mediaType)}</span>`
        : ''
      const fields = status.startsWith('2') && mediaType === 'application/json' ? this.fields(schema) : ''
      parts.push(
        `<div><strong>${escapeHtml(status)}</strong> ${escapeHtml(response.description ?? '')}${type}${fields}</div>`,
      )
    }
    parts.push('</section>')
    return parts.join('\n')
  }

  page(): string {
    const info = isNode(this.document.info) ? this.document.info : {}
    const byTag = new Map<string, string[]>()
    for (const [path, item] of Object.entries(isNode(this.document.paths) ? this.document.paths : {})) {
      for (const [method, op] of Object.entries(isNode(item) ? item : {})) {
        if (!isNode(op)) continue
        const tag = Array.isArray(op.tags) && typeof op.tags[0] === 'string' ? op.tags[0] : 'other'
        if (!byTag.has(tag)) byTag.set(tag, [])
        byTag.get(tag)!.push(this.operation(path, method, op))
      }
    }
    const tags = [...byTag.keys()].sort()
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(info.title ?? 'API')} ${escapeHtml(info.version ?? '')}</title>
<link rel="stylesheet" href="/api/v1/docs.css"></head>
<body>
<h1>${escapeHtml(info.title ?? 'API')} <small>${escapeHtml(info.version ?? '')}</small></h1>
<p>${escapeHtml(info.description ?? '')}</p>
<p>The machine-readable document: <a href="/api/v1/openapi.json">/api/v1/openapi.json</a> (OpenAPI ${escapeHtml(this.document.openapi)}).</p>
<nav>${tags.map((t) => `<a href="#tag-${escapeHtml(t)}">${escapeHtml(t)}</a>`).join(' ')}</nav>
${tags.map((t) => `<h2 id="tag-${escapeHtml(t)}">${escapeHtml(t)}</h2>\n${byTag.get(t)!.join('\n')}`).join('\n')}
</body></html>
`
  }
}

/** The HTML page of `document`. */
export function renderApiDocs(document: OpenApiDocument): string {
  return new Renderer(document).page()
}

/**
 * GET /api/v1/openapi.json, GET /api/v1/docs and its stylesheet, for the app `app()` returns (read on the
 * first request, when every route is in it). Public: the document reveals nothing a route's 404 does not.
 */
export function apiDocsRoutes(app: () => { routes: readonly unknown[] }, options: OpenApiOptions = {}) {
  let page: string | undefined
  return new Elysia()
    .get(
      '/api/v1/openapi.json',
      ({ set }) => {
        set.headers['content-type'] = 'application/json; charset=utf-8'
        return openApiOf(app(), options).json
      },
      {
        detail: {
          summary: 'This API described in OpenAPI 3.1',
          tags: ['docs'],
          security: [],
          responses: {
            200: {
              description: 'the OpenAPI document',
              content: { 'application/json': { schema: { type: 'object' } } },
            },
          },
        },
      },
    )
    .get(
      '/api/v1/docs',
      ({ set }) => {
        set.headers['content-type'] = 'text/html; charset=utf-8'
        page ??= renderApiDocs(openApiOf(app(), options).document)
        return page
      },
      {
        detail: {
          summary: 'This API described as a web page (rendered from the OpenAPI document)',
          tags: ['docs'],
          security: [],
          responses: { 200: { description: 'an HTML page', content: { 'text/html': { schema: { type: 'string' } } } } },
        },
      },
    )
    .get(
      '/api/v1/docs.css',
      ({ set }) => {
        set.headers['content-type'] = 'text/css; charset=utf-8'
        return docsStylesheet
      },
      { detail: { hide: true } },
    )
}
