// What a LOGIN-only user and a client that never logs in can make the log reader say, over PostgreSQL 13's
// and 17's own words (test/fixtures/pg-logs/hostile{13,17}.{log,csv}, captured by capture-hostile.ts with
// log_min_duration_statement=0 and log_parameter_max_length_on_error=-1): no forged kind, no number past the
// wire, no bind parameter value with log_text redacted or none; a lock wait `at character N`, the archiver
// giving up, the agent's own error. Then the forged client lines over the other majors' captures, the
// hand-written wire check against the TypeBox schema over generated hostile entries, and --check's advice.
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Value } from '@sinclair/typebox/value'
import {
  LogTally,
  RECOMMENDED_PREFIX,
  type LogSettings,
  settingsAdvice,
  settingsProblems,
} from '../../src/agent/collectors/postgres/log-events.ts'
import { classify } from '../../src/agent/logs/classify.ts'
import { emptyEntry } from '../../src/agent/logs/entry.ts'
import { toLogEvent } from '../../src/agent/logs/event.ts'
import { redactLiterals, redactParameters } from '../../src/agent/logs/literals.ts'
import { type LogFormat, parseChunk } from '../../src/agent/logs/parse.ts'
import { buildPrefixParser } from '../../src/agent/logs/prefix.ts'
import { OWN_MARKER } from '../../src/agent/logs/own-marker.ts'
import { logEventProblem } from '../../src/agent/logs/wire-check.ts'
import { OWN_MARKER as AGENT_MARKER } from '../../src/agent/own-statements.ts'
import { LOG_KIND_NAMES } from '../../src/shared/log-kinds.ts'
import { type LogEvent, LogEvent as LogEventSchema } from '../../src/shared/wire.ts'

const FIXTURES = join(import.meta.dir, '..', 'fixtures', 'pg-logs')
const PREFIX = buildPrefixParser('%m [%p] %q%u@%d ')
const parse = (buf: Buffer, format: LogFormat) =>
  parseChunk(buf, { format, prefix: PREFIX, tzOffsetMs: 0, settled: true, closed: true })

function tally(buf: Buffer, format: LogFormat) {
  const t = new LogTally(0, true, undefined, 100_000)
  for (const e of parse(buf, format).entries) t.add(e)
  const kinds: Record<string, number> = {}
  for (const c of t.countRows()) kinds[c.kind] = (kinds[c.kind] ?? 0) + c.count
  return { t, kinds }
}

describe('hostile captures of 13 and 17', () => {
  for (const major of [13, 17]) {
    for (const [format, ext] of [
      ['stderr', 'log'],
      ['csvlog', 'csv'],
    ] as const) {
      test(`PostgreSQL ${major} ${format}: no forged kind, no value past the wire, no parameter value unless full`, () => {
        const { t, kinds } = tally(readFileSync(join(FIXTURES, `hostile${major}.${ext}`)), format)
        // The ASSERTs, the RAISEs of a function named with a newline, the plain-SQL text, the forged lines:
        // none of them is a kind of its own.
        for (const k of [
          'deadlock',
          'temp_file',
          'disk_full',
          'out_of_memory',
          'server_crash',
          'checkpoint',
          'io_error',
        ])
          expect(kinds[k]).toBeUndefined()
        // Three failed tries and the archiver giving up on the segment; one lock wait and its acquisition.
        expect(kinds).toMatchObject({
          archive_failed: 3,
          archive_gave_up: 1,
          lock_wait: 1,
          lock_acquired: 1,
          auth_failed: 2,
        })
        for (const mode of ['redacted', 'none', 'full'] as const) {
          const { entries, dropped, invalid } = t.events(mode)
          expect(invalid).toBe(0)
          expect(dropped).toBe(0)
          for (const e of entries) expect(Value.Check(LogEventSchema, e)).toBe(true)
          const text = JSON.stringify(entries)
          if (mode === 'full') expect(text).toContain('SECRET-A')
          else expect(text.match(/SECRET-[A-D]/g)).toBeNull()
          // No entry of pid 1 or 2: the forged lines are inside the failed logins' prefixes.
          expect(entries.some((e) => e.pid === 1 || e.pid === 2)).toBe(false)
          const byKind = (k: string) => entries.filter((e) => e.kind === k)
          expect(byKind('lock_wait')[0]!.fields).toMatchObject({ mode: 'AccessShareLock', relation: '16385' })
          expect(byKind('lock_wait')[0]!.fields.wait_ms as number).toBeGreaterThanOrEqual(100)
          expect(byKind('archive_failed').map((e) => e.fields.exit_code)).toEqual([1, 1, 1])
          expect(byKind('archive_gave_up')).toHaveLength(1)
          expect(byKind('archive_gave_up')[0]!.fields.wal_file).toBe('000000010000000000000001')
          // The agent's own failure is its own, not the application's; its marker stays in the statement.
          // (csvlog names the session's application on every line of it, stderr here only by the marker.)
          const own = entries.filter((e) => e.fields.own === true && e.severity === 'error')
          expect(own).toHaveLength(1)
          expect(entries.filter((e) => e.kind === 'error' && e.message.includes('generate_series'))).toEqual([])
          expect(own[0]!).toMatchObject({ kind: 'other', severity: 'error' })
          if (mode !== 'none') expect(own[0]!.statement).toStartWith('/* dbm-agent */ SELECT generate_series(')
          // The huge duration of the ASSERT (and the statement that carried it) is no slow statement.
          expect(new Set(entries.filter((e) => e.message.includes('99999999999999999999')).map((e) => e.kind))).toEqual(
            new Set(['error', 'other']),
          )
          if (format === 'stderr') {
            // The failed logins of the names with newlines: one entry each, their prefix joined.
            expect(
              byKind('auth_failed')
                .map((e) => e.user!.split('\n')[0])
                .sort(),
            ).toEqual(['n', 'z'])
          }
        }
      })
    }
  }

  test('the forged client lines over the captures of 14, 16 and 18: the kinds stay as they were', () => {
    const forged = readFileSync(join(FIXTURES, 'hostile17.log'), 'utf8').split('\n')
    const from = forged.findIndex((l) => / \[\d+\] z$/.test(l))
    const block = `${forged
      .slice(
        from,
        forged.findIndex((l, i) => i > from && / LOG: {2}duration: /.test(l)),
      )
      .join('\n')}\n`
    for (const major of [14, 16, 18]) {
      const base = readFileSync(join(FIXTURES, `pg${major}.log`))
      const before = tally(base, 'stderr').kinds
      const after = tally(Buffer.concat([base, Buffer.from(block)]), 'stderr').kinds
      expect(after).toEqual({ ...before, auth_failed: (before.auth_failed ?? 0) + 2 })
    }
  })
})

describe('classification of hostile texts', () => {
  const entry = (message: string, more: Partial<ReturnType<typeof emptyEntry>> = {}) => ({
    ...emptyEntry('ERROR', message),
    user: 'u',
    database: 'd',
    ...more,
  })
  test('resource kinds by SQLSTATE when given, else by PostgreSQL wording at the start only', () => {
    const phrase = 'could not write to file "pg_wal/x": No space left on device'
    expect(classify(entry(`invalid input syntax for type integer: "${phrase}"`), {}).kind).toBe('error')
    expect(classify(entry(`invalid input syntax for type integer: "${phrase}"`, { sqlstate: '22P02' }), {}).kind).toBe(
      'error',
    )
    expect(classify(entry(phrase), {}).kind).toBe('disk_full')
    expect(classify(entry(phrase, { sqlstate: '53100' }), {})).toMatchObject({
      kind: 'disk_full',
      fields: { path: 'pg_wal/x' },
    })
    expect(classify(entry(phrase, { sqlstate: 'P0001' }), {}).kind).toBe('error')
    expect(classify(entry('out of memory', { sqlstate: '53200' }), {}).kind).toBe('out_of_memory')
    expect(classify(entry('out of memory', { sqlstate: 'P0004' }), {}).kind).toBe('error')
    // User code of every PL, a name with a newline included: error or other, whatever the SQLSTATE.
    for (const context of [
      'PL/pgSQL function inline_code_block line 1 at ASSERT',
      'PL/pgSQL function pg_temp_3."f\nx"() line 2 at RAISE',
      'PL/Python function "f"',
      'PL/Perl function "f"',
      'SQL function "g" statement 1\nPL/pgSQL function h() line 1 at PERFORM',
    ]) {
      expect(classify(entry(phrase, { sqlstate: '53100', context }), {}).kind).toBe('error')
      expect(classify({ ...entry('deadlock detected', { context }), severity: 'LOG' }, {}).kind).toBe('other')
    }
  })
  test('numbers past 2^53 are null; every form of bind parameter loses its value', () => {
    const huge = '99999999999999999999'
    for (const message of [
      `duration: ${huge} ms`,
      `temporary file: path "x", size ${huge}`,
      `process 5 still waiting for ShareLock on relation 1 of database 1 after ${huge} ms at character 3`,
    ]) {
      const e = { ...entry(message), severity: 'LOG' }
      const event = toLogEvent(e, classify(e, {}), 'redacted', 0)
      expect(logEventProblem(event)).toBeNull()
      expect(
        Object.values(event.fields).filter((v) => typeof v === 'number' && !Number.isSafeInteger(Math.round(v))),
      ).toEqual([])
    }
    const forms = [
      "Parameters: $1 = 'a, ''b''\nc', $2 = NULL, $3 = 'x'",
      "parameters: $1 = 'a'",
      "unnamed portal parameter $1 = 'a'",
      'portal "S_1" parameter $2 = \'a\'',
      "unnamed portal with parameters: $1 = 'a', $2 = 'b'",
      'portal "C_1" with parameters: $1 = \'a\'',
      'extended query "SELECT $1" with parameters: $1 = \'a\'',
      "extended query with parameters: $1 = 'a...'",
    ]
    for (const f of forms) expect(redactParameters(f)).not.toMatch(/'[abx]/)
    expect(redactParameters(forms[0]!)).toBe('Parameters: $1 = ?, $2 = ?, $3 = ?')
    expect(redactLiterals("/* dbm-agent */ SELECT 'x' /* y */")).toBe('/* dbm-agent */ SELECT ? /*?*/')
    expect(OWN_MARKER).toBe(AGENT_MARKER)
  })
})

describe('the hand-written wire check agrees with the TypeBox schema', () => {
  test('over generated hostile entries', () => {
    let seed = 42
    const rnd = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!
    const strings = [
      '',
      'a',
      'x\u0000y',
      '\ud800',
      '\u202e',
      'é'.repeat(1_001),
      'a'.repeat(8_000),
      'a'.repeat(8_001),
      'a'.repeat(20_001),
      '-12',
      '1x',
      'A_b',
      'ab c',
    ]
    const numbers = [
      0,
      -1,
      1.5,
      2 ** 31 - 1,
      2 ** 31,
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER + 2,
      1e20,
      -1e20,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      253_402_300_799_999,
      253_402_300_800_000,
    ]
    const values = [...strings, ...numbers, null, true, [1, 'a'], Array(65).fill(1), [1e20], ['x\u0000']]
    let agreed = 0
    let invalid = 0
    for (let i = 0; i < 5_000; i++) {
      const base: LogEvent = {
        ts: 1,
        kind: 'error',
        severity: 'error',
        sqlstate: null,
        message: 'm',
        fingerprint: 'f',
        pid: 1,
        user: null,
        database: null,
        application: null,
        client: null,
        detail: null,
        statement: null,
        query_id: null,
        fields: {},
      }
      const e = base as unknown as Record<string, unknown>
      for (let k = 0; k < 3; k++) {
        const key = pick(Object.keys(base))
        if (key === 'fields') {
          const fields: Record<string, unknown> = {}
          const n = rnd() < 0.1 ? 33 : Math.floor(rnd() * 4)
          for (let f = 0; f < n; f++)
            fields[rnd() < 0.1 ? pick(['A', '', 'a-b', 'k'.repeat(65)]) : `f${f}`] = pick(values)
          e.fields = fields
        } else if (key === 'kind') e.kind = pick([...LOG_KIND_NAMES, 'Bad', '', 'x'.repeat(41)])
        else e[key] = rnd() < 0.5 ? pick(strings) : rnd() < 0.5 ? pick(numbers) : null
      }
      if (rnd() < 0.1) e.count = pick(numbers)
      const schema = Value.Check(LogEventSchema, e)
      const mine = logEventProblem(e as unknown as LogEvent) === null
      // Never more lenient than the schema; stricter only on a field name outside the schema's pattern
      // (TypeBox lets such a key through, unchecked).
      const oddKey = Object.keys(e.fields as object).some((k) => !/^[a-z0-9_]{1,64}$/.test(k))
      if (schema !== mine && !(schema && oddKey))
        throw new Error(`disagree (${schema} vs ${mine}): ${JSON.stringify(e).slice(0, 300)}`)
      agreed++
      if (!schema) invalid++
    }
    expect(agreed).toBe(5_000)
    expect(invalid).toBeGreaterThan(1_000)
  })
})

describe('--check advice', () => {
  const settings: LogSettings = {
    logging_collector: 'on',
    log_destination: 'stderr',
    log_line_prefix: RECOMMENDED_PREFIX,
    log_directory: 'log',
    lc_messages: 'C',
    tz_offset_ms: 0,
    log_lock_waits: 'on',
    log_checkpoints: 'on',
    log_autovacuum_min_duration: '600000',
    log_temp_files: '0',
    log_min_duration_statement: '-1',
  }
  test('the recommended prefix is silent; settings that are off are listed with a pasteable fix', () => {
    expect(settingsProblems(settings, false)).toEqual([])
    expect(buildPrefixParser(RECOMMENDED_PREFIX).lacks).toEqual([])
    expect(settingsAdvice(settings)).toBe(
      "logging settings off, their kinds never appear: log_min_duration_statement (slow_statement); to turn them on: ALTER SYSTEM SET log_min_duration_statement = '1s'; SELECT pg_reload_conf();",
    )
    expect(settingsAdvice({ ...settings, log_min_duration_statement: '0' })).toBeNull()
    const [problem] = settingsProblems({ ...settings, log_line_prefix: '%m [%p] ' }, false)
    expect(problem).toContain(`set '${RECOMMENDED_PREFIX}'`)
    expect(problem).toContain('csvlog or jsonlog')
  })
})
