// The agent's failure classes (src/agent/reachability.ts) for errors no test engine produces on demand:
// a code decides whenever one is present anywhere in the error, and only a code-less error is read as
// text, by whole phrases (a setting named "statement_timeout" is not a timeout).
import { describe, expect, test } from 'bun:test'
import { failureClass } from '../../src/agent/reachability.ts'

const coded = (code: unknown, message: string) => Object.assign(new Error(message), { code })

describe('failureClass', () => {
  test('codes first, through causes and AggregateErrors', () => {
    expect(failureClass(coded('22023', 'invalid value for parameter "statement_timeout": "x"'))).toBe('other')
    expect(failureClass(coded('3D000', 'database "x" does not exist'))).toBe('permission')
    expect(failureClass(coded(81, 'Database x does not exist. (UNKNOWN_DATABASE)'))).toBe('permission')
    expect(failureClass(coded('ConnectionRefused', 'Unable to connect'))).toBe('refused')
    expect(failureClass(new Error('wrapped', { cause: coded('ECONNREFUSED', 'connect ECONNREFUSED') }))).toBe('refused')
    expect(failureClass(new AggregateError([coded('X1', 'a'), coded('ETIMEDOUT', 'b')], 'all failed'))).toBe('timeout')
    // An unknown code with a telling text is still only `other`.
    expect(failureClass(coded('XX000', 'password authentication failed; timed out'))).toBe('other')
  })

  test('without a code: whole phrases only', () => {
    expect(failureClass(new Error('ping took longer than 2 s'))).toBe('timeout')
    expect(failureClass(new Error('Timeout error.'))).toBe('timeout')
    expect(failureClass(new Error('invalid value for parameter "statement_timeout"'))).toBe('other')
    expect(failureClass(new Error('connection refused'))).toBe('refused')
    expect(failureClass(new Error('self signed certificate in chain'))).toBe('tls')
    expect(failureClass(new Error('password authentication failed for user "x"'))).toBe('authentication')
    expect(failureClass(new Error('the password_encryption setting'))).toBe('other')
    expect(failureClass('plain string')).toBe('other')
  })
})
