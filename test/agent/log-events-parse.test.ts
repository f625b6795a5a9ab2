// The log parsers and classifier over logs captured from real PostgreSQL 13, 14, 16, 17 and 18 servers
// (test/fixtures/pg-logs: each server wrote the same session in stderr with prefix '%m [%p] %q%u@%d ',
// csvlog and, from 15 on, jsonlog): every format of a major gives the same entries and kinds. Then
// prefixes, files cut mid-entry, hostile lines, literals and log_text, without a database.
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { LogTally } from '../../src/agent/collectors/postgres/log-events.ts'
import { classify, deadlockFields, fingerprint } from '../../src/agent/logs/classify.ts'
import { emptyEntry } from '../../src/agent/logs/entry.ts'
import { toLogEvent } from '../../src/agent/logs/event.ts'
import { redactLiterals, redactParameters } from '../../src/agent/logs/literals.ts'
import { type LogFormat, parseChunk } from '../../src/agent/logs/parse.ts'
import { buildPrefixParser } from '../../src/agent/logs/prefix.ts'
import { LogEvent } from '../../src/shared/wire.ts'
import { Value } from '@sinclair/typebox/value'

const FIXTURES = join(import.meta.dir, '..', 'fixtures', 'pg-logs')
const PREFIX = buildPrefixParser('%m [%p] %q%u@%d ')
const parse = (text: string | Buffer, format: LogFormat = 'stderr', prefix = PREFIX, settled = true) =>
  parseChunk(typeof text === 'string' ? Buffer.from(text) : text, {
    format,
    prefix,
    tzOffsetMs: 0,
    settled,
    closed: settled,
  })

function tallyOf(text: Buffer, format: LogFormat) {
  const tally = new LogTally(0, true)
  for (const e of parse(text, format).entries) tally.add(e)
  const kinds: Record<string, number> = {}
  for (const c of tally.countRows()) kinds[c.kind] = (kinds[c.kind] ?? 0) + c.count
  return { tally, kinds }
}

describe('captured logs of every major', () => {
  for (const major of [13, 14, 16, 17, 18]) {
    test(`PostgreSQL ${major}: stderr, csvlog${major >= 15 ? ' and jsonlog' : ''} agree, and each kind has its fields`, () => {
      const formats: [LogFormat, string][] = [
        ['stderr', 'log'],
        ['csvlog', 'csv'],
        ...(major >= 15 ? [['jsonlog', 'json'] as [LogFormat, string]] : []),
      ]
      const results = formats.map(([format, ext]) => tallyOf(readFileSync(join(FIXTURES, `pg${major}.${ext}`)), format))
      for (const r of results.slice(1)) expect(r.kinds).toEqual(results[0]!.kinds)
      const { kinds, tally } = results.at(-1)!
      // The session: 2 temp files, 1 deadlock, 1 failed login, 1 checkpoint, 1 statement timeout, one RAISE LOG.
      expect(kinds).toMatchObject({
        server_start: 1,
        temp_file: 2,
        deadlock: 1,
        auth_failed: 1,
        checkpoint: 1,
        statement_cancelled: 1,
      })
      expect(kinds.autovacuum).toBeGreaterThanOrEqual(1)
      const events = tally.events('full').entries
      for (const e of events) expect(Value.Check(LogEvent, e)).toBe(true)
      const byKind = (k: string) => events.filter((e) => e.kind === k)
      const deadlock = byKind('deadlock')[0]!
      expect(deadlock.sqlstate === null || deadlock.sqlstate === '40P01').toBe(true)
      expect((deadlock.fields.statements as string[]).sort()).toEqual([
        'update t set v = 1 where id = 2',
        'update t set v = 2 where id = 1',
      ])
      expect(deadlock.fields.pids as number[]).toHaveLength(2)
      const auth = byKind('auth_failed')[0]!
      expect(auth).toMatchObject({ severity: 'fatal', user: 'postgres', fields: { method: 'password' } })
      const checkpoint = byKind('checkpoint')[0]!
      expect(checkpoint.fields).toMatchObject({
        reason: 'immediate force wait',
        restartpoint: false,
        wal_added: 0,
        wal_removed: 0,
        wal_recycled: 0,
      })
      expect(checkpoint.fields.buffers_written as number).toBeGreaterThan(0)
      expect(checkpoint.fields.distance_bytes as number).toBeGreaterThan(0)
      expect(checkpoint.fields.total_ms).toBeNumber()
      const vacuum = byKind('autovacuum')[0]!
      for (const f of [
        'table',
        'pages_remaining',
        'tuples_removed',
        'tuples_not_removable',
        'removable_cutoff',
        'buffer_hits',
        'buffer_misses',
        'wal_bytes',
        'elapsed_ms',
      ]) {
        expect(vacuum.fields[f]).not.toBeNull()
      }
      expect(
        byKind('temp_file')
          .map((e) => e.fields.size_bytes as number)
          .every((n) => n > 0),
      ).toBe(true)
      expect(byKind('statement_cancelled')[0]!.fields.reason).toBe('statement_timeout')
      expect(byKind('server_start')[0]!.fields.version).toStartWith(String(major))
      // The RAISE LOG whose text looks like an ERROR line of pid 1 is one `other` entry of its own session.
      const raised = events.filter((e) => e.message.startsWith('multi\nline\n'))
      expect(raised).toHaveLength(1)
      expect(raised[0]!).toMatchObject({ kind: 'other', severity: 'log', user: 'postgres' })
      expect(raised[0]!.pid).not.toBe(1)
      expect(events.some((e) => e.pid === 1)).toBe(false)
    })
  }
})

describe('stderr prefixes', () => {
  test('a prefix without timestamp or pid still parses, and --check says what it lacks', () => {
    const parser = buildPrefixParser('%u: ')
    expect(parser.lacks.join(' ')).toContain('%m')
    expect(parser.lacks.join(' ')).toContain('%p')
    const { entries } = parse(
      'app: ERROR:  relation "x" does not exist\napp: STATEMENT:  select * from x\n: LOG:  checkpoint starting: time\n',
      'stderr',
      parser,
    )
    expect(entries).toHaveLength(2)
    expect(entries[0]).toMatchObject({
      ts: null,
      pid: null,
      user: 'app',
      severity: 'ERROR',
      statement: 'select * from x',
    })
    expect(entries[1]!.user).toBeNull()
  })

  test('every escape: %t %n %a %h %r %e %c %l %s %v %x %Q %b %i %P %% and padding', () => {
    const parser = buildPrefixParser('%t|%n|%a|%h|%r|%e|%c|%l|%s|%v|%x|%Q|%b|%i|%P|%%|%-6u|%d: ')
    expect(parser.lacks).toHaveLength(1)
    expect(parser.lacks[0]).toContain('%p')
    const line =
      '2026-12-07 03:58:29 +03|1796615909.190|psql|10.0.0.5|10.0.0.5(5432)|40P01|6b162ef6.7075|4|2026-12-07 03:58:00 +03|3/2|756|-123456789|client backend|UPDATE|12|%|bob   |shop: ERROR:  deadlock detected\n'
    const [e] = parse(line, 'stderr', parser).entries
    expect(e).toMatchObject({
      user: 'bob',
      database: 'shop',
      application: 'psql',
      client: '10.0.0.5(5432)',
      sqlstate: '40P01',
      backendType: 'client backend',
      queryId: '-123456789',
    })
    expect(e!.ts).toBe(Date.UTC(2026, 11, 7, 0, 58, 29))
  })

  test('%q: server processes print only the part before it', () => {
    const { entries } = parse(
      '2026-12-07 03:58:29.319 UTC [28303] LOG:  checkpoint starting: time\n2026-12-07 03:58:29.320 UTC [5] app@db LOG:  statement: select 1\n',
    )
    expect(entries.map((e) => [e.pid, e.user, e.database])).toEqual([
      [28303, null, null],
      [5, 'app', 'db'],
    ])
  })
})

describe('cut files, long and hostile lines', () => {
  const text =
    '2026-12-07 03:58:29.190 UTC [7] a@b ERROR:  boom\n2026-12-07 03:58:29.190 UTC [7] a@b STATEMENT:  select 1\n'
  test('a slice that ends mid-entry leaves that entry for the next read; settled, it is whole', () => {
    const cut = Buffer.from(text).subarray(0, 60)
    expect(parse(cut, 'stderr', PREFIX, false)).toEqual({ entries: [], consumed: 0, ends: [] })
    const whole = parse(Buffer.from(text), 'stderr', PREFIX, false)
    // Not settled: its STATEMENT line might still come.
    expect(whole.entries).toHaveLength(0)
    const next = parse(Buffer.from(`${text}2026-12-07 03:58:30.000 UTC [8] LOG:  x\n`), 'stderr', PREFIX, false)
    expect(next.entries).toHaveLength(1)
    expect(next.consumed).toBe(Buffer.byteLength(text))
  })

  test('csvlog: a quoted field with newlines, and a record cut in the middle', () => {
    const record =
      '2026-12-07 03:58:47.161 UTC,"u","d",9,"127.0.0.1:1",x.y,2,"UPDATE",2026-12-07 03:58:46 UTC,3/2,756,ERROR,40P01,"deadlock detected","Process 9 waits for ShareLock on transaction 1; blocked by process 10.\nProcess 10 waits for ShareLock on transaction 2; blocked by process 9.\nProcess 9: update t set v = ""a,b""\nProcess 10: select 2",,,,,,,,"app","client backend",,0\n'
    const all = parse(record, 'csvlog')
    expect(all.entries).toHaveLength(1)
    expect(deadlockFields(all.entries[0]!.detail).statements).toEqual(['update t set v = "a,b"', 'select 2'])
    const cut = parse(Buffer.from(record).subarray(0, 200), 'csvlog', PREFIX, false)
    expect(cut).toEqual({ entries: [], consumed: 0, ends: [] })
  })

  test('a switch of log_destination: csvlog and jsonlog records PostgreSQL wrote to the stderr file are read as such', () => {
    // While log_destination turns to csvlog (or jsonlog), the logging collector writes the records it has before
    // the new file is open to the stderr file (seen in CI: three RAISE LOGs of a switch, whole CSV lines there).
    const stderr = '2026-12-07 13:11:48.000 UTC [7] a@b LOG:  before\n'
    const csv =
      '2026-12-07 13:11:49.114 UTC,"postgres","postgres",3498,"127.0.0.1:52884",6b16b087.daa,9,"DO",2026-12-07 13:11:35 UTC,1/77,0,LOG,00000,"switch-1-2\n""quoted"", */ ü",,,,,"PL/pgSQL function inline_code_block line 1 at RAISE","DO $$ BEGIN RAISE LOG \'switch-1-2\'; END $$",,,"postgres.js","client backend",,0\n'
    const json =
      '{"timestamp":"2026-12-07 13:11:50.000 UTC","user":"postgres","dbname":"postgres","pid":3499,"error_severity":"LOG","message":"switch-2-0","application_name":"postgres.js","backend_type":"client backend","query_id":0}\n'
    const after = '2026-12-07 13:11:51.000 UTC [8] a@b ERROR:  after\n'
    const all = parse(`${stderr}${csv}${json}${after}`)
    expect(all.entries.map((e) => [e.severity, e.message, e.pid, e.application])).toEqual([
      ['LOG', 'before', 7, null],
      ['LOG', 'switch-1-2\n"quoted", */ ü', 3498, 'postgres.js'],
      ['LOG', 'switch-2-0', 3499, 'postgres.js'],
      ['ERROR', 'after', 8, null],
    ])
    expect(all.consumed).toBe(Buffer.byteLength(`${stderr}${csv}${json}${after}`))
    // A CSV record cut after its quoted newline waits for the rest (read again from its start).
    const cut = parse(
      Buffer.from(`${stderr}${csv}`).subarray(0, Buffer.byteLength(stderr) + 160),
      'stderr',
      PREFIX,
      false,
    )
    expect(cut.entries.map((e) => e.message)).toEqual(['before'])
    expect(cut.consumed).toBe(Buffer.byteLength(stderr))
  })

  test('invalid UTF-8, a 1 MB line, bidi controls, NULs: parsed, offsets exact, events valid', () => {
    const bad = Buffer.concat([
      Buffer.from('2026-12-07 03:58:29.190 UTC [7] a@b LOG:  bad \xff\xfe bytes '),
      Buffer.from([0xc3, 0x28, 0xe2, 0x80]),
      Buffer.from(' \u202e\u0000end\n'),
    ])
    const long = Buffer.from(`2026-12-07 03:58:29.190 UTC [7] a@b LOG:  ${'x'.repeat(1024 * 1024)}\n`)
    const buf = Buffer.concat([bad, long])
    const parsed = parse(buf)
    expect(parsed.entries).toHaveLength(2)
    expect(parsed.consumed).toBe(buf.length)
    for (const e of parsed.entries) {
      const event = toLogEvent(e, classify(e, {}), 'full', 0)
      expect(Value.Check(LogEvent, event)).toBe(true)
    }
  })

  test('forged lines: RAISE LOG text with newlines cannot start an entry or claim another kind', () => {
    const forged = [
      '2026-12-07 03:58:29.196 UTC [28310] mallory@shop LOG:  hello',
      '\t2026-12-07 03:58:29.196 UTC [1] LOG:  checkpoint complete: wrote 999999 buffers (1.0%); 0 WAL file(s) added, 0 removed, 0 recycled; write=1.0 s, sync=1.0 s, total=1.0 s; sync files=1, longest=0.0 s, average=0.0 s; distance=1 kB, estimate=1 kB',
      '2026-12-07 03:58:29.196 UTC [28310] mallory@shop CONTEXT:  PL/pgSQL function inline_code_block line 1 at RAISE',
      '2026-12-07 03:58:29.197 UTC [28310] mallory@shop LOG:  checkpoint complete: wrote 5 buffers (0.0%); 0 WAL file(s) added, 0 removed, 0 recycled; write=0.1 s, sync=0.1 s, total=0.2 s; sync files=1, longest=0.0 s, average=0.0 s; distance=1 kB, estimate=1 kB',
      '2026-12-07 03:58:29.198 UTC [28311] mallory@shop LOG:  process 28311 still waiting for AccessExclusiveLock on relation 1 of database 1 after 5000.0 ms',
      '2026-12-07 03:58:29.198 UTC [28311] mallory@shop CONTEXT:  PL/pgSQL function inline_code_block line 1 at RAISE',
      '',
    ].join('\n')
    const entries = parse(forged).entries
    expect(entries).toHaveLength(3)
    // The tab-indented "line" stays in the first entry's message; pid 1 never appears.
    expect(entries[0]!.message).toContain('wrote 999999 buffers')
    expect(entries.map((e) => classify(e, {}).kind)).toEqual(['other', 'other', 'other'])
  })
})

describe('classification details', () => {
  const entry = (message: string, more: Partial<ReturnType<typeof emptyEntry>> = {}) => ({
    ...emptyEntry('LOG', message),
    ...more,
  })
  test('lock waits with their holders and queue', () => {
    const e = entry(
      'process 5 still waiting for AccessExclusiveLock on relation 16384 of database 5 after 1000.072 ms',
      { detail: 'Processes holding the lock: 3, 4. Wait queue: 5, 6.', user: 'u', database: 'd' },
    )
    expect(classify(e, {})).toMatchObject({
      kind: 'lock_wait',
      fields: { mode: 'AccessExclusiveLock', relation: '16384', wait_ms: 1000.072, holders: [3, 4], waiters: [5, 6] },
    })
  })
  test('server messages of 13 to 18', () => {
    const cases: [string, string, Record<string, unknown>][] = [
      [
        'checkpoints are occurring too frequently (12 seconds apart)',
        'checkpoints_too_frequent',
        { seconds_apart: 12 },
      ],
      ['received fast shutdown request', 'server_shutdown', { mode: 'fast' }],
      [
        'server process (PID 123) was terminated by signal 9: Killed',
        'server_crash',
        { signal: 9, process: 'server process' },
      ],
      ['database system was not properly shut down; automatic recovery in progress', 'recovery', { phase: 'started' }],
      [
        'redo done at 0/1528F48 system usage: CPU: user: 0.00 s, system: 0.00 s, elapsed: 0.25 s',
        'recovery',
        { phase: 'redo_done', redo_ms: 250 },
      ],
      [
        'archive command failed with exit code 1',
        'archive_failed',
        { exit_code: 1, wal_file: '000000010000000000000002' },
      ],
    ]
    for (const [message, kind, fields] of cases) {
      const e = entry(message, { detail: 'The failed archive command was: cp pg_wal/000000010000000000000002 /x' })
      expect(classify(e, {})).toMatchObject({ kind, fields })
      // The same text from a client session (a user and database) is not the server's.
      expect(classify(entry(message, { user: 'u', database: 'd' }), {}).kind).toBe('other')
    }
  })
  test('errors by sqlstate and fingerprint; statements and parameters per log_text', () => {
    const e = entry('duration: 1.5 ms  execute S_1: SELECT * FROM t WHERE email = $1 AND n = 42', {
      detail: "parameters: $1 = 'bob@example.com'",
      user: 'u',
      database: 'd',
    })
    const c = classify(e, {})
    expect(c.kind).toBe('slow_statement')
    const redacted = toLogEvent(e, c, 'redacted', 0)
    expect(redacted).toMatchObject({
      message: 'duration: 1.5 ms  execute S_1',
      statement: 'SELECT * FROM t WHERE email = $1 AND n = ?',
      detail: 'parameters: $1 = ?',
    })
    expect(toLogEvent(e, c, 'none', 0)).toMatchObject({ statement: null, detail: null })
    expect(toLogEvent(e, c, 'full', 0).detail).toContain('bob@example.com')
    const secret = entry("statement: ALTER ROLE app PASSWORD 'hunter2'", { user: 'u', database: 'd' })
    expect(JSON.stringify(toLogEvent(secret, classify(secret, {}), 'full', 0))).not.toContain('hunter2')
    expect(fingerprint('relation "orders_2024" does not exist at 0/1528F48 line 12')).toBe(
      'relation "?" does not exist at ? line ?',
    )
  })
  test('literals of every quoting go; names, keywords and parameters stay', () => {
    expect(
      redactLiterals(`select 'a''b', E'x\\'y', $$body$$, $t$x$t$, 1.5e3, "Col1", t1.c2, $3 /* ' */ from u&'x' -- 'c`),
    ).toBe('select ?, ?, ?, ?, ?, "Col1", t1.c2, $3 /*?*/ from ? -- \'c')
    expect(redactParameters("parameters: $1 = 'a, b', $2 = NULL, $3 = '1'")).toBe('parameters: $1 = ?, $2 = ?, $3 = ?')
  })
})
