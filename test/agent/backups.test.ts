// The backups collector's parts without a database: the pgBackRest and WAL-G parsers over recorded
// samples of each tool's JSON (test/fixtures/backups, written from the tools' documented formats), the
// command runner with commands that hang, fail, print garbage or too much, and the collector's schedule.
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Value } from '@sinclair/typebox/value'
import { parsePgBackRestInfo } from '../../src/agent/backups/pgbackrest.ts'
import { maskLine, runCommand } from '../../src/agent/backups/run-command.ts'
import { parseWalgBackupList } from '../../src/agent/backups/walg.ts'
import { backups, readBackups } from '../../src/agent/collectors/postgres/backups.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import type { BackupConfig } from '../../src/agent/config.ts'
import { createLogger } from '../../src/shared/log.ts'
import { BackupStatus } from '../../src/shared/wire.ts'

const fixture = (name: string) => readFileSync(join(import.meta.dir, '../fixtures/backups', name), 'utf8')

describe('pgBackRest info --output=json', () => {
  test('every backup of every stanza, newest first, with times, sizes and the error flag; a stanza in error named', () => {
    const parsed = parsePgBackRestInfo(fixture('pgbackrest-info.json'))
    expect(parsed.error).toBe('stanza reporting: missing stanza path (status 1)')
    expect(parsed.backups).toEqual([
      {
        label: '20261101-010000F_20261103-010000I',
        type: 'incr',
        started_at: 1793667600_000,
        finished_at: 1793667611_000,
        size_bytes: 31700000,
        stored_bytes: 65536,
        stanza: 'main',
        ok: false,
      },
      {
        label: '20261101-010000F_20261102-010000D',
        type: 'diff',
        started_at: 1793581200_000,
        finished_at: 1793581230_000,
        size_bytes: 31600000,
        stored_bytes: 1048576,
        stanza: 'main',
        ok: true,
      },
      {
        label: '20261101-010000F',
        type: 'full',
        started_at: 1793494800_000,
        finished_at: 1793494862_000,
        size_bytes: 31457280,
        stored_bytes: 4194304,
        stanza: 'main',
        ok: true,
      },
    ])
  })

  test('no valid backup yet is an empty list, not an error; an empty answer and garbage are errors', () => {
    const none =
      '[{"archive":[],"backup":[],"cipher":"none","db":[],"name":"main","status":{"code":2,"message":"no valid backups"}}]'
    expect(parsePgBackRestInfo(none)).toEqual({ backups: [], error: null })
    expect(parsePgBackRestInfo('[]').error).toContain('lists no stanza')
    expect(parsePgBackRestInfo('').error).toContain('printed nothing')
    expect(parsePgBackRestInfo('ERROR: [031]: invalid option').error).toBe(
      'pgbackrest printed no valid JSON: expected the output of `pgbackrest info --output=json`',
    )
    expect(parsePgBackRestInfo('{"a":1}').error).toContain('not a list of stanzas')
    // Hostile values: wrong types, control characters, huge numbers: bounded or dropped, never thrown.
    const odd = JSON.stringify([
      {
        name: 'm\u0000\n',
        backup: [
          {
            label: 'x\u202e\u0000y',
            type: 'FULL; rm',
            timestamp: { start: 'x', stop: 1e300 },
            info: { size: -5, repository: 'no' },
          },
          { label: 7 },
          null,
        ],
      },
    ])
    const parsed = parsePgBackRestInfo(odd)
    expect(parsed.backups).toEqual([
      {
        label: 'x\u202e y',
        type: 'full',
        started_at: null,
        finished_at: null,
        size_bytes: null,
        stored_bytes: null,
        stanza: 'm',
        ok: true,
      },
    ])
    expect(
      Value.Check(BackupStatus, { tool: 'pgbackrest', checked_at: 1, error: parsed.error, backups: parsed.backups }),
    ).toBe(true)
  })
})

describe('wal-g backup-list --json --detail', () => {
  test('full and delta backups, newest first, with RFC 3339 times and both sizes', () => {
    const parsed = parseWalgBackupList(fixture('walg-backup-list.json'))
    expect(parsed.error).toBeNull()
    expect(parsed.backups).toEqual([
      {
        label: 'base_00000001000000000000000C_D_000000010000000000000004',
        type: 'delta',
        started_at: Date.parse('2026-11-02T02:00:00.5Z'),
        finished_at: Date.parse('2026-11-02T02:00:11.75Z'),
        size_bytes: 53000000,
        stored_bytes: 1200000,
        stanza: 'default',
        ok: true,
      },
      {
        label: 'base_000000010000000000000004',
        type: 'full',
        started_at: Date.parse('2026-11-01T02:00:00.104Z'),
        finished_at: Date.parse('2026-11-01T02:00:40.981Z'),
        size_bytes: 52428800,
        stored_bytes: 7340032,
        stanza: 'default',
        ok: true,
      },
    ])
  })

  test('without --detail the time of storing stands for the finish; null is no backup; garbage is an error', () => {
    const plain =
      '[{"backup_name":"base_000000010000000000000002","time":"2026-11-01T00:00:05Z","wal_file_name":"000000010000000000000002"}]'
    expect(parseWalgBackupList(plain).backups[0]).toMatchObject({
      label: 'base_000000010000000000000002',
      started_at: null,
      finished_at: Date.parse('2026-11-01T00:00:05Z'),
      size_bytes: null,
    })
    expect(parseWalgBackupList('null')).toEqual({ backups: [], error: null })
    expect(parseWalgBackupList('No backups found').error).toBe(
      'wal-g printed no valid JSON: expected the output of `wal-g backup-list --json --detail`',
    )
    // Go's zero time is no time.
    expect(
      parseWalgBackupList(
        '[{"backup_name":"b","start_time":"0001-01-01T00:00:00Z","finish_time":"0001-01-01T00:00:00Z"}]',
      ).backups[0]!.finished_at,
    ).toBeNull()
  })
})

describe('the command runner', () => {
  test('a command that hangs is killed at its deadline, with what it started', async () => {
    const started = performance.now()
    // The shell's child keeps stdout open: the answer must not wait for it.
    const result = await runCommand(['sh', '-c', 'sleep 30 & sleep 30; echo late'], {
      timeoutMs: 300,
      maxOutputBytes: 1000,
    })
    const elapsed = performance.now() - started
    expect(result).toEqual({ stdout: null, error: 'sh did not finish within 0.3 s and was killed' })
    expect(elapsed).toBeLessThan(2_000)
  })

  test('a failing command: its exit code and the first line of stderr, masked', async () => {
    const result = await runCommand([
      'sh',
      '-c',
      'echo; echo "ERROR: [037]: repo1-s3-key-secret=hunter2 postgres://u:pw@h/db\tbad" >&2; echo second >&2; exit 37',
    ])
    expect(result).toEqual({
      stdout: null,
      error: 'sh exited with code 37: ERROR: [037]: repo1-s3-key-secret=*** postgres://u:***@h/db bad',
    })
    // pgBackRest's errors go to stdout when stderr is quiet.
    expect((await runCommand(['sh', '-c', 'echo "ERROR: [055]: unable to load info file"; exit 55'])).error).toBe(
      'sh exited with code 55: ERROR: [055]: unable to load info file',
    )
    expect((await runCommand(['/nonexistent/pgbackrest', 'info'])).error).toBe(
      '/nonexistent/pgbackrest could not start: not found',
    )
  })

  test('huge output is cut off and the command killed; garbage is read as garbage', async () => {
    const result = await runCommand(['sh', '-c', 'yes'], { timeoutMs: 10_000, maxOutputBytes: 1_000_000 })
    expect(result).toEqual({ stdout: null, error: 'sh printed more than 1000000 bytes and was killed' })
    const garbage = await readBackups(
      {
        command: ['sh', '-c', 'printf "\\377\\376 not json"'],
        tool: 'pgbackrest',
        intervalMs: 60_000,
        timeoutMs: 5_000,
      },
      () => 42,
    )
    expect(garbage).toEqual({
      tool: 'pgbackrest',
      checked_at: 42,
      error: 'pgbackrest printed no valid JSON: expected the output of `pgbackrest info --output=json`',
      backups: [],
    })
  })

  test('masking: secret-looking pairs and URL passwords, control characters', () => {
    expect(maskLine('AWS_SECRET_ACCESS_KEY=abc WALG_S3_PREFIX=s3://b/p token: "x y" \u0007ok')).toBe(
      'AWS_SECRET_ACCESS_KEY=*** WALG_S3_PREFIX=s3://b/p token: ***  ok',
    )
  })
})

describe('the collector', () => {
  const context = (backup: BackupConfig | undefined, state: Map<string, unknown>, now: number): PostgresContext =>
    ({ name: 'db', state, now, backup, notes: new Map(), log: createLogger('error') }) as unknown as PostgresContext

  test('runs at start and then every interval, sending each result once; without a command it does not run', async () => {
    const dir = join(import.meta.dir, '../fixtures/backups')
    const config: BackupConfig = {
      command: ['cat', join(dir, 'walg-backup-list.json')],
      tool: 'walg',
      intervalMs: 60_000,
      timeoutMs: 5_000,
    }
    expect(backups.unconfigured?.({})).toBe('no backup_command configured')
    expect(backups.unconfigured?.({ backup: config })).toBeUndefined()
    const state = new Map<string, unknown>()
    const first = await backups.collect(context(config, state, 1_000_000))
    expect(first.backups?.backups.map((b) => b.label)).toEqual([
      'base_00000001000000000000000C_D_000000010000000000000004',
      'base_000000010000000000000004',
    ])
    expect(Value.Check(BackupStatus, first.backups)).toBe(true)
    expect(await backups.collect(context(config, state, 1_030_000))).toEqual({})
    expect((await backups.collect(context(config, state, 1_060_000))).backups?.error).toBeNull()
  })

  test('a listing slower than the wait is sent by a later cycle', async () => {
    const config: BackupConfig = {
      command: ['sh', '-c', 'sleep 3.2; echo null'],
      tool: 'walg',
      intervalMs: 60_000,
      timeoutMs: 10_000,
    }
    const state = new Map<string, unknown>()
    expect(await backups.collect(context(config, state, 0))).toEqual({})
    const later = await backups.collect(context(config, state, 10_000))
    expect(later.backups).toMatchObject({ tool: 'walg', error: null, backups: [] })
  })
})
