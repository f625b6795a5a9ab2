// parseJsonBody (src/server/json-body.ts): a body with a declared length (decoded by Bun in one step) and a
// chunked one (read chunk by chunk under the cap) give the same value or the same refusal, with
// TextDecoder's decoding (BOM dropped, invalid UTF-8 replaced).
import { describe, expect, test } from 'bun:test'
import { HttpError } from '../../src/server/http-error.ts'
import { parseJsonBody } from '../../src/server/json-body.ts'

const LIMIT = 1024

/** The same bytes as a request with a declared length and as a chunked one (a stream of 7-byte chunks). */
function requests(bytes: Uint8Array<ArrayBuffer>): [string, () => Request][] {
  const declared = () =>
    new Request('http://x/', { method: 'POST', headers: { 'content-length': String(bytes.byteLength) }, body: bytes })
  const chunked = () =>
    new Request('http://x/', {
      method: 'POST',
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < bytes.byteLength; i += 7) controller.enqueue(bytes.slice(i, i + 7))
          controller.close()
        },
      }),
    })
  return [
    ['declared length', declared],
    ['chunked', chunked],
  ]
}

const utf8 = (text: string) => new TextEncoder().encode(text)

async function outcome(request: Request): Promise<unknown> {
  try {
    return { value: await parseJsonBody(request, LIMIT) }
  } catch (e) {
    if (e instanceof HttpError) return { status: e.status, error: e.message }
    throw e
  }
}

describe('parseJsonBody', () => {
  const cases: [string, Uint8Array<ArrayBuffer>, unknown][] = [
    ['an object', utf8('{"a":[1,{"b":"é"}],"c":null}'), { value: { a: [1, { b: 'é' }], c: null } }],
    ['no bytes', new Uint8Array(0), { value: {} }],
    ['a leading BOM, dropped', new Uint8Array([0xef, 0xbb, 0xbf, ...utf8('{"a":1}')]), { value: { a: 1 } }],
    [
      'only a BOM: not JSON',
      new Uint8Array([0xef, 0xbb, 0xbf]),
      { status: 400, error: 'request body must be valid JSON' },
    ],
    [
      'invalid UTF-8 in a string, replaced',
      new Uint8Array([...utf8('{"a":"x'), 0xff, ...utf8('y"}')]),
      { value: { a: 'x\uFFFDy' } },
    ],
    ['malformed JSON', utf8('{"a":'), { status: 400, error: 'request body must be valid JSON' }],
    ['an array', utf8('[1]'), { status: 400, error: 'request body must be a JSON object' }],
    [
      'an escaped NUL in a value',
      utf8('{"a":"x\\u0000"}'),
      { status: 400, error: 'request body strings must not contain NUL characters' },
    ],
    [
      'an escaped NUL in a key',
      utf8('{"x\\u0000":1}'),
      { status: 400, error: 'request body strings must not contain NUL characters' },
    ],
    [
      'nesting of 201 levels',
      utf8(`${'['.repeat(200)}${']'.repeat(200)}`.replace(/^/, '{"a":').concat('}')),
      { status: 400, error: 'request body is nested deeper than 200 levels' },
    ],
    [
      'over the cap',
      utf8(`{"a":"${'x'.repeat(LIMIT)}"}`),
      { status: 413, error: 'request body is larger than the 1 KiB limit' },
    ],
  ]
  for (const [name, bytes, expected] of cases) {
    for (const [how, request] of requests(bytes)) {
      test(`${name} (${how})`, async () => {
        expect(await outcome(request())).toEqual(expected)
      })
    }
  }

  test('a declared length over the cap is refused before the body is read', async () => {
    const request = new Request('http://x/', {
      method: 'POST',
      headers: { 'content-length': String(LIMIT + 1) },
      body: utf8('{}'),
    })
    expect(await outcome(request)).toEqual({ status: 413, error: 'request body is larger than the 1 KiB limit' })
    expect(request.bodyUsed).toBe(false)
  })
})
