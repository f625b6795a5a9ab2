// The dashboard's files, served by the app so that every one carries the security headers (Bun's own
// serving of an HTML import sets no headers of ours). In the compiled binary the page, its script and
// its stylesheet were bundled by `bun build --compile` and are read from the executable once, at the
// first request for one of them; run from source (`bun src/cli.ts serve`, the tests), the same page is
// bundled with Bun.build at the first request for it. The page is at `/` (revalidated by its ETag on every load); the files it loads
// have content hashes in their names and are cached for good. Text files (the page, its script and
// stylesheet) go out compressed as the client accepts: brotli, else gzip, else as they are; each
// encoding is made once, at the first request for it, and kept in memory (Vary: Accept-Encoding; the
// ETag names the encoding).
import type { HTMLBundle } from 'bun'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { brotliCompress, constants as zlib, gzip } from 'node:zlib'
import { basename } from 'node:path'
import { Elysia } from 'elysia'
import { HttpError } from '../http-error.ts'
import { securityHeaders } from './security-headers.ts'

interface Asset {
  body: Uint8Array<ArrayBuffer>
  contentType: string
  etag: string
  cacheControl: string
  /** The body in each encoding, made at the first request for it. */
  encoded: Map<Encoding, Promise<Uint8Array<ArrayBuffer>>>
}

type Encoding = 'br' | 'gzip'

const brotli = promisify(brotliCompress)
const gzipped = promisify(gzip)

/** Text compresses (to about a third); images and fonts already are compressed. */
const compressible = (contentType: string) =>
  /^(text\/|application\/(javascript|json|xml)|image\/svg)/.test(contentType)

/**
 * The encoding to send for an Accept-Encoding header: brotli when accepted, else gzip, else none. A
 * coding listed with q=0 is refused; `*` stands for the codings not listed.
 */
export function chooseEncoding(header: string | null): Encoding | undefined {
  if (!header) return undefined
  const q = new Map<string, number>()
  for (const part of header.toLowerCase().split(',')) {
    const [name, ...params] = part.trim().split(';')
    if (!name) continue
    const weight = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined)
    q.set(name.trim(), weight === undefined ? 1 : Number(weight))
  }
  const accepted = (coding: Encoding) =>
    (q.get(coding) ?? (coding === 'gzip' ? q.get('x-gzip') : undefined) ?? q.get('*') ?? 0) > 0
  if (accepted('br')) return 'br'
  if (accepted('gzip')) return 'gzip'
  return undefined
}

function encode(file: Asset, encoding: Encoding): Promise<Uint8Array<ArrayBuffer>> {
  let done = file.encoded.get(encoding)
  if (!done) {
    const compressed =
      encoding === 'br'
        ? brotli(file.body, {
            params: { [zlib.BROTLI_PARAM_QUALITY]: 11, [zlib.BROTLI_PARAM_SIZE_HINT]: file.body.byteLength },
          })
        : gzipped(file.body, { level: 9 })
    done = compressed.then((b) => new Uint8Array(b))
    // A failure is tried again at the next request.
    done.catch(() => file.encoded.delete(encoding))
    file.encoded.set(encoding, done)
  }
  return done
}

/** The dashboard's files by URL path. */
type Assets = ReadonlyMap<string, Asset>

const PAGE_CACHE = 'no-cache'
const HASHED_CACHE = 'public, max-age=31536000, immutable'

const quoted = (tag: string) => (tag.startsWith('"') || tag.startsWith('W/"') ? tag : `"${tag}"`)

function asset(body: Uint8Array<ArrayBuffer>, contentType: string, etag: string, page: boolean): Asset {
  return { body, contentType, etag: quoted(etag), cacheControl: page ? PAGE_CACHE : HASHED_CACHE, encoded: new Map() }
}

/** The files `bun build --compile` embedded, as the import describes them. */
function compiledAssets(bundle: HTMLBundle & { files: NonNullable<HTMLBundle['files']> }): Assets {
  const assets = new Map<string, Asset>()
  for (const file of bundle.files) {
    const page = file.path === bundle.index
    const body = new Uint8Array(readFileSync(file.path))
    const etag = file.headers.etag || Bun.hash(body).toString(36)
    assets.set(page ? '/' : `/${basename(file.path)}`, asset(body, file.headers['content-type'], etag, page))
  }
  return assets
}

/** The page at `index` bundled for the browser, as the release build bundles it. */
async function builtAssets(index: string): Promise<Assets> {
  const result = await Bun.build({
    entrypoints: [index],
    target: 'browser',
    minify: true,
    define: { 'process.env.NODE_ENV': '"production"' },
  })
  if (!result.success) throw new Error(`the dashboard does not build: ${result.logs.map((l) => l.message).join('; ')}`)
  const assets = new Map<string, Asset>()
  for (const output of result.outputs) {
    const page = output.path.endsWith('.html')
    const body = new Uint8Array(await output.arrayBuffer())
    assets.set(
      page ? '/' : `/${basename(output.path)}`,
      asset(body, output.type, output.hash ?? Bun.hash(body).toString(36), page),
    )
  }
  return assets
}

/** True when the request's If-None-Match names `etag` (or `*`). */
function notModified(request: Request, etag: string): boolean {
  const header = request.headers.get('if-none-match')
  if (!header) return false
  return header.split(',').some((tag) => {
    const t = tag.trim()
    return t === '*' || t === etag || t === `W/${etag}`
  })
}

/** Pages bundled from source in this process, by path: the apps of one test process share one build. */
const built = new Map<string, Promise<Assets>>()

function sourceAssets(index: string): Promise<Assets> {
  let loading = built.get(index)
  if (!loading) {
    loading = builtAssets(index)
    // A failed build is tried again at the next request.
    loading.catch(() => built.delete(index))
    built.set(index, loading)
  }
  return loading
}

/** GET and HEAD of `/` and of the files the page loads; any other single-segment path is the API's 404. */
export function dashboardRoutes(bundle: HTMLBundle) {
  // Read from the executable at the first request for one of them, not at start (a few milliseconds).
  let compiled: Promise<Assets> | undefined
  const assets = () =>
    bundle.files
      ? (compiled ??= Promise.resolve().then(() => compiledAssets(bundle as never)))
      : sourceAssets(bundle.index)
  const serve = async (request: Request, path: string) => {
    const file = (await assets()).get(path)
    if (!file) throw new HttpError(404, 'not found')
    const encoding = compressible(file.contentType) ? chooseEncoding(request.headers.get('accept-encoding')) : undefined
    // Each encoding is its own representation: its own ETag (the tag of the file, marked).
    const etag = encoding ? `${file.etag.slice(0, -1)}-${encoding}"` : file.etag
    const headers: Record<string, string> = {
      ...securityHeaders,
      'content-type': file.contentType,
      etag,
      'cache-control': file.cacheControl,
    }
    if (compressible(file.contentType)) headers.vary = 'Accept-Encoding'
    if (notModified(request, etag)) return new Response(null, { status: 304, headers })
    const body = encoding ? await encode(file, encoding) : file.body
    if (encoding) headers['content-encoding'] = encoding
    return new Response(request.method === 'HEAD' ? null : body, {
      headers: { ...headers, 'content-length': String(body.byteLength) },
    })
  }
  // The dashboard's files are not API operations: left out of the OpenAPI document (src/server/openapi.ts).
  const hidden = { detail: { hide: true } }
  return new Elysia()
    .get('/', ({ request }) => serve(request, '/'), hidden)
    .head('/', ({ request }) => serve(request, '/'), hidden)
    .get('/:file', ({ request, params }) => serve(request, `/${params.file}`), hidden)
    .head('/:file', ({ request, params }) => serve(request, `/${params.file}`), hidden)
}
