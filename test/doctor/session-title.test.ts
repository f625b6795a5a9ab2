// session-title.ts: the names a finding's title quotes (a role may be named anything) are cut and their
// control, bidi and invisible characters written as visible escapes, so a title is one line that reads as
// written in the dashboard, a mail subject, a webhook and a log.
import { expect, test } from 'bun:test'
import { firstHeldRelation, sessionWho, titleText } from '../../src/server/doctor/session-title.ts'
import { HIDDEN_CHARACTERS } from '../../src/shared/invisible.ts'

const UNSAFE = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'u')

test('hostile names are shown escaped, plain ones as they are', () => {
  const who = sessionWho(
    { pid: 77, user: 'ops\u202eevil', application_name: 'app\u2028\n\u0085x\u{e0041}' },
    'public.t\u200b',
  )
  expect(UNSAFE.test(who)).toBe(false)
  expect(who).toBe('pid 77, user ops\\u202Eevil, application "app\\u2028\\u000A\\u0085x\\u{E0041}", on public.t\\u200B')
  expect(sessionWho({ pid: 5, user: 'postgres', application_name: 'psql' }, 'public.orders')).toBe(
    'pid 5, user postgres, application "psql", on public.orders',
  )
  expect(sessionWho({ pid: 5, user: null, application_name: '' })).toBe('pid 5')
})

test('names are cut by characters, never inside a surrogate pair', () => {
  expect(titleText(`${'a'.repeat(39)}\u{1f600}tail`, 40)).toBe(`${'a'.repeat(39)}\u{1f600}…`)
  expect(titleText('short', 40)).toBe('short')
})

test('the first table a session holds a lock on, by name', () => {
  const locks = [
    { pid: 1, granted: true, relation_name: 'public.z' },
    { pid: 1, granted: false, relation_name: 'public.a' },
    { pid: 1, granted: true, relation_name: null },
    { pid: 1, granted: true, relation_name: 'public.m' },
    { pid: 2, granted: true, relation_name: 'public.b' },
  ]
  expect(firstHeldRelation(locks, 1)).toBe('public.m')
  expect(firstHeldRelation(locks, 3)).toBeUndefined()
})
