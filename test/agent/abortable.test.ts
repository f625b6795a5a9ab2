// abortable() with a signal that had aborted already: the work's own later rejection is handled (it was
// an unhandled rejection once, when a PostgreSQL restart destroyed the connection of a session being
// opened as the agent stopped it: a fresh-clone CI run reported it between tests).
import { afterEach, beforeEach, expect, test } from 'bun:test'
import { abortable, withDeadline } from '../../src/agent/runner.ts'

const unhandled: unknown[] = []
const record = (reason: unknown) => unhandled.push(reason)
beforeEach(() => {
  unhandled.length = 0
  process.on('unhandledRejection', record)
})
afterEach(() => {
  process.off('unhandledRejection', record)
})

/** A promise that rejects once `reject()` is called, as a query does when its connection is destroyed. */
function later() {
  let reject!: (e: Error) => void
  const promise = new Promise<never>((_, r) => {
    reject = r
  })
  return { promise, reject: () => reject(new Error('write CONNECTION_DESTROYED')) }
}

/** Lets rejections be reported: a macrotask after the microtasks. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0))

test('an already aborted signal: the abort reason, and the work rejecting later is not unhandled', async () => {
  const stop = new AbortController()
  stop.abort(new Error('stopping'))
  const work = later()
  await expect(abortable(work.promise, stop.signal)).rejects.toThrow('stopping')
  work.reject()
  await settle()
  expect(unhandled).toEqual([])
})

test('a signal aborted while the work runs: the same', async () => {
  const stop = new AbortController()
  const work = later()
  const raced = abortable(withDeadline(work.promise, 60_000, 'opening'), stop.signal)
  stop.abort(new Error('stopping'))
  await expect(raced).rejects.toThrow('stopping')
  work.reject()
  await settle()
  expect(unhandled).toEqual([])
})
