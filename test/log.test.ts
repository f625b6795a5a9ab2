// Log lines carry text from monitored databases and tenants (statement texts, error messages, names):
// each field stays one token on one line, and no control or bidi character reaches the terminal.
import { describe, expect, test } from 'bun:test'
import { createLogger, formatLogValue } from '../src/shared/log.ts'

describe('log values', () => {
  test('plain values stay as they are; anything else is one quoted, escaped token', () => {
    expect(formatLogValue('orders')).toBe('orders')
    expect(formatLogValue(42)).toBe('42')
    expect(formatLogValue('')).toBe('""')
    expect(formatLogValue('a b')).toBe('"a b"')
    expect(formatLogValue('x=1')).toBe('"x=1"')
    expect(formatLogValue('C:\\dir')).toBe('"C:\\\\dir"')
    expect(formatLogValue({ a: 1 })).toBe('"{\\"a\\":1}"')
  })

  test('hostile text cannot break the line, fake a field, or send escape sequences', () => {
    const hostile = 'SELECT 1 /*\nDROP TABLE t; --*/ level=ERROR \u001b[2J\u001b[31m \u009b31m \u202eevil\u2066 \u2028'
    const lines: string[] = []
    createLogger('info', (l) => lines.push(l)).warn('collector failed', { cause: hostile, database: 'orders' })
    expect(lines).toHaveLength(1)
    const line = lines[0]!
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/)
    expect(line).toEndWith(' database=orders')
    expect(line).toContain(
      'cause="SELECT 1 /*\\nDROP TABLE t; --*/ level=ERROR \\u001b[2J\\u001b[31m \\u009b31m \\u202eevil\\u2066 \\u2028"',
    )
    // The quoted token reads back as the original text.
    const token = line.slice(line.indexOf('cause=') + 'cause='.length, line.lastIndexOf(' database='))
    expect(JSON.parse(token)).toBe(hostile)
  })

  test('text hidden in tag characters, blank fillers and variation selectors is escaped, and reads back', () => {
    const hidden = 'shop\u{e0044}\u{e0052}\u3164\ufff9x\ufffb\u034f\ufe0f-db'
    const value = formatLogValue(hidden)
    expect(value).toBe('"shop\\udb40\\udc44\\udb40\\udc52\\u3164\\ufff9x\\ufffb\\u034f\\ufe0f-db"')
    expect(JSON.parse(value)).toBe(hidden)
  })
})
