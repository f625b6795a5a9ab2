// HTTP at its edges, against the source app and the compiled dist/dbm alike: every error the server can
// shape is {"error": ...} in JSON (a body over the cap however large it says it is or however it is sent,
// a request line and headers over 16 KiB, malformed JSON, unknown routes and methods), and every answer
// (the dashboard's page, script and stylesheet, the API's JSON, its errors, the reset link's redirect)
// carries the security headers. Raw requests go over a socket, as fetch would not send them.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { contentSecurityPolicy } from '../../src/server/web/security-headers.ts'
import { builtBinary } from '../support/binary.ts'
import { request, startServe, stopAllServers } from '../support/process.ts'
import { startTestServer } from '../support/server.ts'

interface Target {
  base: string
  stop(): Promise<void>
}

const targets: [string, () => Promise<Target>][] = [
  ['source', async () => startTestServer('sqlite')],
  [
    'dist/dbm',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'dbm-http-edges-'))
      const server = await startServe([await builtBinary()], { dataDir })
      return {
        base: server.base,
        async stop() {
          await server.stop()
          rmSync(dataDir, { recursive: true, force: true })
        },
      }
    },
  ],
]

const expectedSecurityHeaders = {
  'content-security-policy': contentSecurityPolicy,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
}

interface RawAnswer {
  status: number
  headers: Record<string, string>
  body: string
}

/** Sends `head` (and `body`) over a new connection and reads the first answer. */
function raw(base: string, head: string, body = ''): Promise<RawAnswer> {
  const { hostname, port } = new URL(base)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    let received = Buffer.alloc(0)
    const finish = () => {
      socket.destroy()
      const text = received.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      if (end < 0) return reject(new Error(`no complete answer: ${JSON.stringify(text)}`))
      const [statusLine, ...lines] = text.slice(0, end).split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      const length = headers['content-length']
      const rest = text.slice(end + 4)
      resolve({
        status: Number(statusLine!.split(' ')[1]),
        headers,
        body: length === undefined ? rest : rest.slice(0, Number(length)),
      })
    }
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      const text = received.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, end))?.[1]
      if (end >= 0 && length !== undefined && received.length >= end + 4 + Number(length)) finish()
    })
    socket.on('end', finish)
    socket.on('error', reject)
    socket.write(head + body)
  })
}

const securityOf = (headers: Record<string, string> | Headers) => {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : headers[name]) ?? null
  return Object.fromEntries(Object.keys(expectedSecurityHeaders).map((name) => [name, get(name)]))
}

/** An answer's status, JSON body and content type, and its security headers. */
function jsonError(answer: RawAnswer) {
  return {
    status: answer.status,
    type: answer.headers['content-type'],
    body: JSON.parse(answer.body || 'null'),
    security: securityOf(answer.headers),
  }
}
const errorOf = (status: number, error: string) => ({
  status,
  type: 'application/json; charset=utf-8',
  body: { error },
  security: expectedSecurityHeaders,
})

for (const [name, start] of targets) {
  describe(`HTTP edges (${name})`, () => {
    let target: Target
    beforeAll(async () => {
      target = await start()
    })
    afterAll(async () => {
      await target?.stop()
      await stopAllServers()
    })

    test('a body over the cap is a JSON 413 however large it is declared, and the connection serves the next request', async () => {
      // An ingest is admitted only with a valid ingest key (a keyless one is a 401 before its size is looked at).
      const signup = await request(target.base, 'POST', '/api/v1/auth/signup', {
        body: {
          email: `edges-${crypto.randomUUID()}@example.com`,
          password: 'edges password 1',
          name: 'Edges',
          org_name: 'Edges',
        },
      })
      expect(signup.status).toBe(201)
      const created = await request(target.base, 'POST', '/api/v1/api-keys', {
        token: signup.body.access_token,
        body: { name: 'edges', scopes: ['ingest'] },
      })
      expect(created.status).toBe(201)
      const declared = (path: string, length: number) =>
        raw(
          target.base,
          `POST ${path} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${created.body.key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`,
          '{',
        )
      // Past what Bun refused by itself before (4 x the ingest cap), and far past it.
      expect(jsonError(await declared('/api/v1/ingest', 200 * 1024 * 1024))).toEqual(
        errorOf(413, 'request body is larger than the 16384 KiB limit'),
      )
      expect(jsonError(await declared('/api/v1/ingest', 1e15))).toEqual(
        errorOf(413, 'request body is larger than the 16384 KiB limit'),
      )
      expect(jsonError(await declared('/api/v1/databases', 1024 * 1024 + 1))).toEqual(
        errorOf(413, 'request body is larger than the 1024 KiB limit'),
      )

      // A body sent in full over the cap, then a second request on the same connection.
      const big = `{"name":"${'x'.repeat(1024 * 1024)}"}`
      const { hostname, port } = new URL(target.base)
      const answers = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), hostname)
        let text = ''
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('latin1')
          if (text.includes('{"status":"ok"')) {
            socket.destroy()
            resolve(text)
          }
        })
        socket.on('error', reject)
        socket.write(
          `POST /api/v1/databases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
        )
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
      })
      expect(answers).toStartWith('HTTP/1.1 413 ')
      expect(answers).toContain('{"error":"request body is larger than the 1024 KiB limit"}HTTP/1.1 200 OK')
    })

    test('a chunked body over the cap is a JSON 413 as soon as it passes the cap', async () => {
      let sent = 0
      const chunk = new Uint8Array(256 * 1024).fill(0x20)
      const res = await fetch(`${target.base}/api/v1/databases`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // 64 MiB offered; the answer comes long before.
        body: new ReadableStream({
          pull(c) {
            if (sent >= 64 * 1024 * 1024) return c.close()
            sent += chunk.length
            c.enqueue(chunk)
          },
        }),
      })
      expect({ status: res.status, body: await res.json(), security: securityOf(res.headers) }).toEqual({
        status: 413,
        body: { error: 'request body is larger than the 1024 KiB limit' },
        security: expectedSecurityHeaders,
      })
      expect(sent).toBeLessThan(32 * 1024 * 1024)
    })

    test('a request line and headers over 16 KiB are a JSON 431; Bun answers past 64 KiB itself, with no body', async () => {
      const head = (size: number) =>
        `GET /api/v1/databases HTTP/1.1\r\nHost: x\r\nX-Padding: ${'a'.repeat(size)}\r\n\r\n`
      expect((await raw(target.base, head(15 * 1024))).status).toBe(401)
      const message = 'the request line and headers are larger than the 16 KiB limit'
      expect(jsonError(await raw(target.base, head(17 * 1024)))).toEqual(errorOf(431, message))
      expect(jsonError(await raw(target.base, head(60 * 1024)))).toEqual(errorOf(431, message))
      // A long URL counts.
      expect(
        jsonError(await raw(target.base, `GET /api/v1/${'a'.repeat(20 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`)),
      ).toEqual(errorOf(431, message))
      // Past Bun's parser limit the refusal is Bun's own: a 431 with an empty body (no hook reaches it).
      const beyond = await raw(target.base, head(70 * 1024))
      expect({ status: beyond.status, body: beyond.body }).toEqual({ status: 431, body: '' })
    })

    test('malformed JSON, unknown routes and unknown methods are JSON errors', async () => {
      const malformed = await raw(
        target.base,
        'POST /api/v1/databases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n',
        '{"name": "x",',
      )
      expect(jsonError(malformed)).toEqual(errorOf(400, 'request body must be valid JSON'))
      for (const [method, path] of [
        ['PROPFIND', '/api/v1/databases'],
        ['MKCOL', '/api/v1/databases'],
        ['PUT', '/api/v1/databases'],
        ['DELETE', '/api/v1/databases'],
        ['GET', '/api/v1/nothing-here'],
        ['POST', '/api/v1/nothing-here'],
        ['GET', '/nothing-here'],
        ['GET', '/chunk-nothing.js'],
      ]) {
        const answer = await raw(target.base, `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`)
        expect({ method, path, ...jsonError(answer) }).toEqual({ method, path, ...errorOf(404, 'not found') })
      }
    })

    test('the dashboard, its script and stylesheet, and the API carry the security headers', async () => {
      const page = await fetch(`${target.base}/`)
      const html = await page.text()
      expect({
        status: page.status,
        type: page.headers.get('content-type'),
        cache: page.headers.get('cache-control'),
        security: securityOf(page.headers),
      }).toEqual({
        status: 200,
        type: 'text/html;charset=utf-8',
        cache: 'no-cache',
        security: expectedSecurityHeaders,
      })
      // No inline script or style for the policy to block: the page loads one script and one stylesheet.
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=/)
      const script = /<script[^>]*\bsrc="([^"]+)"/.exec(html)?.[1]
      const stylesheet =
        /<link[^>]*rel="stylesheet"[^>]*href="([^"]+)"|<link[^>]*href="([^"]+)"[^>]*rel="stylesheet"/.exec(html)
      const files = [
        [new URL(script!, `${target.base}/`).href, 'text/javascript;charset=utf-8'],
        [new URL(stylesheet![1] ?? stylesheet![2]!, `${target.base}/`).href, 'text/css;charset=utf-8'],
      ] as const
      for (const [url, type] of files) {
        const res = await fetch(url)
        expect(res.status).toBe(200)
        expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(1000)
        expect({
          url,
          type: res.headers.get('content-type'),
          cache: res.headers.get('cache-control'),
          security: securityOf(res.headers),
        }).toEqual({
          url,
          type,
          cache: 'public, max-age=31536000, immutable',
          security: expectedSecurityHeaders,
        })
        // Revalidation by ETag answers 304, with the same headers.
        const again = await fetch(url, { headers: { 'if-none-match': res.headers.get('etag')! } })
        expect({ status: again.status, security: securityOf(again.headers) }).toEqual({
          status: 304,
          security: expectedSecurityHeaders,
        })
      }
      const head = await fetch(`${target.base}/`, { method: 'HEAD' })
      expect({ status: head.status, security: securityOf(head.headers) }).toEqual({
        status: 200,
        security: expectedSecurityHeaders,
      })

      for (const [path, status] of [
        ['/healthz', 200],
        ['/api/v1/databases', 401],
        ['/api/v1/auth/me', 401],
      ] as const) {
        const res = await fetch(target.base + path)
        expect({ path, status: res.status, security: securityOf(res.headers) }).toEqual({
          path,
          status,
          security: expectedSecurityHeaders,
        })
      }
      const reset = await fetch(`${target.base}/reset-password?token=t`, { redirect: 'manual' })
      expect({
        status: reset.status,
        cache: reset.headers.get('cache-control'),
        security: securityOf(reset.headers),
      }).toEqual({
        status: 302,
        cache: 'no-store',
        security: expectedSecurityHeaders,
      })
    })
  })
}
