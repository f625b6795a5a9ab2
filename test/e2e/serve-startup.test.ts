// `dbm serve`'s start through the compiled binary (src/server/serve.ts): the listener opens as soon as
// the store is open and answers GET /healthz itself while the API is built; requests for anything else
// that arrive meanwhile wait for the API. Here requests are sent from the spawn on, every millisecond,
// and the first answers must be the ones a started server gives: /healthz 200 with the store ok, an API
// request the API's own JSON 401, both with the security headers; never a refusal turned into an error
// page, a 404 or a 500. A SIGTERM as soon as /healthz answered (the API possibly still being built)
// stops the binary with exit 0.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pkg from '../../package.json' with { type: 'json' }
import { binaryPath as binary, builtBinary } from '../support/binary.ts'
import { freePort } from '../support/postgres.ts'
import { cleanEnv, repoRoot } from '../support/process.ts'

const tmpRoot = mkdtempSync(join(tmpdir(), 'dbm-startup-'))

beforeAll(async () => {
  await builtBinary()
}, 120_000)

afterAll(() => {
  rmSync(tmpRoot, { recursive: true, force: true })
})

interface Answer {
  status: number
  body: any
  contentType: string | null
  csp: string | null
}

/** The first answer to `path`, asked every millisecond until the server accepts the connection. */
async function firstAnswer(base: string, path: string, exited: () => boolean): Promise<Answer> {
  const deadline = Date.now() + 20_000
  for (;;) {
    const answer = await fetch(base + path).then(
      async (r) => ({
        status: r.status,
        body: await r.json(),
        contentType: r.headers.get('content-type'),
        csp: r.headers.get('content-security-policy'),
      }),
      () => undefined,
    )
    if (answer) return answer
    if (exited()) throw new Error('dbm serve exited before it answered')
    if (Date.now() > deadline) throw new Error(`no answer to ${path} within 20 s`)
    await Bun.sleep(1)
  }
}

function spawnServe(dataDir: string, port: number) {
  let exited = false
  const proc = Bun.spawn([binary, 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir], {
    cwd: repoRoot,
    env: cleanEnv(),
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: 'pipe',
    timeout: 60_000,
    killSignal: 'SIGKILL',
  })
  void proc.exited.then(() => {
    exited = true
  })
  return { proc, exited: () => exited, stderr: () => new Response(proc.stderr).text() }
}

describe('dist/dbm serve start-up', () => {
  test('requests sent from the spawn on get the answers of a started server: /healthz 200 with the store, the API its own 401', async () => {
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    const serve = spawnServe(join(tmpRoot, 'answers'), port)
    try {
      const [health, api] = await Promise.all([
        firstAnswer(base, '/healthz', serve.exited),
        firstAnswer(base, '/api/v1/auth/me', serve.exited),
      ])
      expect({
        status: health.status,
        status_field: health.body.status,
        store: health.body.store,
        version: health.body.version,
        signup: health.body.signup,
      }).toEqual({
        status: 200,
        status_field: 'ok',
        store: 'ok',
        version: pkg.version,
        signup: 'open',
      })
      expect(health.contentType).toStartWith('application/json')
      expect(health.csp).toContain("default-src 'self'")
      expect({ status: api.status, error: String(api.body.error).split(':')[0] }).toEqual({
        status: 401,
        error: 'authentication required',
      })
      expect(api.contentType).toStartWith('application/json')
      expect(api.csp).toContain("default-src 'self'")
      // Once the API has answered, /healthz is the app's, with the same fields.
      const later = await firstAnswer(base, '/healthz', serve.exited)
      expect(Object.keys(later.body).sort()).toEqual(Object.keys(health.body).sort())
      expect(later.status).toBe(200)
    } finally {
      serve.proc.kill('SIGTERM')
      expect(await serve.proc.exited).toBe(0)
    }
  }, 60_000)

  test('SIGTERM as soon as /healthz answered stops the binary with exit 0', async () => {
    const port = await freePort()
    const serve = spawnServe(join(tmpRoot, 'stop'), port)
    const health = await firstAnswer(`http://127.0.0.1:${port}`, '/healthz', serve.exited)
    expect(health.status).toBe(200)
    serve.proc.kill('SIGTERM')
    expect(await serve.proc.exited).toBe(0)
    const log = await serve.stderr()
    expect(log).toContain(' INFO dbm serve listening ')
    expect(log).toMatch(/ INFO stopping signal=SIGTERM\n$/)
  }, 60_000)
})
