// The agent's failure classes (src/agent/reachability.ts) for errors no test engine produces on demand:
// a code decides whenever one is present anywhere in the error, and only a code-less error is read as
// text, by whole phrases (a setting named "statement_timeout" is not a timeout).
import { describe, expect, test } from 'bun:test'
import { connectionFailure, failureClass, isVagueTimeout } from '../../src/agent/reachability.ts'

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

  test('a failed connection attempt is told from a query that failed on a working connection', () => {
    expect(connectionFailure(coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'))).toBe('refused')
    expect(connectionFailure(coded('28P01', 'password authentication failed for user "m"'))).toBe('authentication')
    expect(connectionFailure(coded('57P03', 'the database system is shutting down'))).toBe('refused')
    expect(connectionFailure(coded('516', 'Authentication failed: password is incorrect'))).toBe('authentication')
    expect(connectionFailure(coded('ERR_TLS_CERT_ALTNAME_INVALID', 'altname'))).toBe('tls')
    expect(connectionFailure(new Error('wrapped', { cause: coded('ENOTFOUND', 'getaddrinfo ENOTFOUND db') }))).toBe(
      'name_resolution',
    )
    // A query's own failure, or a session ended under it: the next attempt says more.
    expect(connectionFailure(coded('42501', 'permission denied for view pg_stat_replication'))).toBeUndefined()
    expect(connectionFailure(coded('57014', 'canceling statement due to statement timeout'))).toBeUndefined()
    expect(connectionFailure(coded('57P01', 'terminating connection due to administrator command'))).toBeUndefined()
    expect(connectionFailure(coded('CONNECTION_CLOSED', 'write CONNECTION_CLOSED'))).toBeUndefined()
    expect(connectionFailure(coded('53300', 'sorry, too many clients already'))).toBeUndefined()
    expect(connectionFailure(new Error('replication took longer than 10000 ms'))).toBeUndefined()
  })

  test("a vague timeout is the runner's own deadline without a code", () => {
    expect(isVagueTimeout(new Error('health ping took longer than 5000 ms'))).toBe(true)
    expect(isVagueTimeout(new Error('no PostgreSQL answered at h:5432 within 10 s'))).toBe(true)
    expect(isVagueTimeout(coded('CONNECT_TIMEOUT', 'write CONNECT_TIMEOUT h:5432'))).toBe(false)
    expect(isVagueTimeout(coded('ECONNREFUSED', 'connect ECONNREFUSED'))).toBe(false)
  })
})
