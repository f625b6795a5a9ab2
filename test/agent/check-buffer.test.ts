// `dbm agent --check` on the buffer directory: one the agent cannot write to, or one other users may
// write to, fails the check with a line that says why (the run would lose batches or refuse files).
import { afterAll, expect, test } from 'bun:test'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkBufferDir } from '../../src/agent/check.ts'

const dir = mkdtempSync(join(tmpdir(), 'dbm-check-buffer-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

test("a directory of the agent's own passes, and the probe file is gone", () => {
  const own = join(dir, 'own')
  expect(checkBufferDir(own)).toEqual({ ok: true, line: `ok    buffer: ${own}` })
  expect(checkBufferDir(own).ok).toBe(true)
})

test('a directory that cannot exist fails with the reason', () => {
  const file = join(dir, 'a-file')
  writeFileSync(file, '')
  const line = checkBufferDir(join(file, 'buffer'))
  expect(line.ok).toBe(false)
  expect(line.line).toStartWith(
    `FAIL  buffer: ${join(file, 'buffer')} cannot hold the buffer and the saved baselines: ENOTDIR`,
  )
})

test('a directory other users may write to fails', () => {
  const open = join(dir, 'open')
  checkBufferDir(open)
  chmodSync(open, 0o777)
  expect(checkBufferDir(open)).toEqual({
    ok: false,
    line: `FAIL  buffer: other users may create files in ${open}; give the agent a directory of its own (--buffer-dir)`,
  })
})
