// The directory lock of `dbm agent` (buffer directory) and `dbm local` (data directory) never follows a
// symlink planted in the directory: a `<name>.pid` link is replaced, not written through; a `<name>.lock`
// link is refused with one line naming it; a holder's pid is read only from a regular file holding a number.
import { afterAll, describe, expect, test } from 'bun:test'
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { lockDirectory } from '../../src/agent/dir-lock.ts'
import { lockDataDir } from '../../src/local/lock.ts'
import { runCommand } from '../support/process.ts'

const roots: string[] = []
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true })
})
/** A fresh directory `dir` and a file `precious` beside it, outside it. */
function planted() {
  const root = mkdtempSync(join(tmpdir(), 'dbm-dir-lock-'))
  roots.push(root)
  const precious = join(root, 'precious')
  writeFileSync(precious, 'keep me\n')
  return { dir: join(root, 'dir'), precious }
}

describe.each([
  ['agent', (dir: string) => lockDirectory(dir, 'agent')],
  ['local', (dir: string) => lockDataDir(dir)],
] as const)('the %s lock', (name, lock) => {
  test(`a planted ${name}.pid symlink is replaced by the pid file, its target untouched`, () => {
    const { dir, precious } = planted()
    mkdirSync(dir)
    symlinkSync(precious, join(dir, `${name}.pid`))
    const held = lock(dir)
    expect('release' in held).toBe(true)
    try {
      expect(readFileSync(precious, 'utf8')).toBe('keep me\n')
      expect(lstatSync(join(dir, `${name}.pid`)).isSymbolicLink()).toBe(false)
      expect(readFileSync(join(dir, `${name}.pid`), 'utf8')).toBe(`${process.pid}\n`)
      expect(lstatSync(join(dir, `${name}.pid`)).mode & 0o777).toBe(0o600)
      // No temporary file left behind.
      expect(readdirSync(dir).filter((f) => f.startsWith(`${name}.pid.`))).toEqual([])
      expect(lock(dir)).toEqual({ holder: String(process.pid) })
      // The holder's pid is not read through a link planted after, nor when it is not a number.
      rmSync(join(dir, `${name}.pid`))
      writeFileSync(precious, '4242\n')
      symlinkSync(precious, join(dir, `${name}.pid`))
      expect(lock(dir)).toEqual({ holder: undefined })
      rmSync(join(dir, `${name}.pid`))
      writeFileSync(join(dir, `${name}.pid`), 'pid 1 /* forged */\n')
      expect(lock(dir)).toEqual({ holder: undefined })
    } finally {
      if ('release' in held) held.release()
    }
  })

  test(`a planted ${name}.lock symlink to a file that is not a database is refused in one line, its target untouched`, () => {
    const { dir, precious } = planted()
    mkdirSync(dir)
    symlinkSync(precious, join(dir, `${name}.lock`))
    expect(lock(dir)).toEqual({
      problem: `${join(dir, `${name}.lock`)} is a symbolic link: remove it (the lock and pid files are never followed through a link)`,
    })
    expect(readFileSync(precious, 'utf8')).toBe('keep me\n')
    // Removed, the lock is taken.
    rmSync(join(dir, `${name}.lock`))
    const held = lock(dir)
    expect('release' in held).toBe(true)
    if ('release' in held) held.release()
  })
})

test('dbm agent with a planted agent.lock symlink exits 1 with one line naming it', async () => {
  const { dir, precious } = planted()
  mkdirSync(dir)
  symlinkSync(precious, join(dir, 'agent.lock'))
  const config = join(dir, 'agent.yaml')
  writeFileSync(
    config,
    `api:\n  endpoint: http://127.0.0.1:1\n  key: dbm_ak_0123456789abcdef_${'A'.repeat(43)}\ndatabases:\n  - name: a\n    dsn: postgres://u:p@127.0.0.1:1/db\n`,
  )
  const run = await runCommand(['bun', 'src/cli.ts', 'agent', '--config', config, '--buffer-dir', dir])
  expect([run.exitCode, run.stderr]).toEqual([
    1,
    `dbm agent: ${join(dir, 'agent.lock')} is a symbolic link: remove it (the lock and pid files are never followed through a link)\n`,
  ])
  expect(readFileSync(precious, 'utf8')).toBe('keep me\n')
})
