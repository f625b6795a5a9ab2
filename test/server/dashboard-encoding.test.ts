// Which compression the dashboard's files go out in for a request's Accept-Encoding: brotli when
// accepted, else gzip, else none; q=0 refuses a coding and `*` stands for the unlisted ones.
import { expect, test } from 'bun:test'
import { chooseEncoding } from '../../src/server/web/dashboard.ts'

test('brotli first, then gzip, then the file as it is', () => {
  expect(chooseEncoding('gzip, deflate, br, zstd')).toBe('br')
  expect(chooseEncoding('gzip, deflate')).toBe('gzip')
  expect(chooseEncoding('x-gzip')).toBe('gzip')
  expect(chooseEncoding('identity')).toBeUndefined()
  expect(chooseEncoding('')).toBeUndefined()
  expect(chooseEncoding(null)).toBeUndefined()
})

test('q=0 refuses a coding; * accepts the ones not listed', () => {
  expect(chooseEncoding('br;q=0, gzip')).toBe('gzip')
  expect(chooseEncoding('br;q=0, gzip;q=0')).toBeUndefined()
  expect(chooseEncoding('*')).toBe('br')
  expect(chooseEncoding('br;q=0, *')).toBe('gzip')
  expect(chooseEncoding('*;q=0')).toBeUndefined()
  expect(chooseEncoding('BR;Q=0.5')).toBe('br')
})
