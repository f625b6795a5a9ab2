// ClickHouse's error signals as log events, against the real ClickHouse engine (test/support/clickhouse.ts):
// N queries to a missing table give exactly one UNKNOWN_TABLE entry counting N, as system.errors says;
// the first cycle is a baseline; a restarted server (a new one behind the same state) counts from zero;
// crash_log and text_log rows (the tables created with the server's columns, as chdb has neither) become
// server_crash, disk_full, error and other entries, exceptions in text_log are not counted twice, and a
// server without text_log gets one note. Every section is checked against the wire schema.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { type ClickHouseConnection, connectClickHouse } from '../../src/agent/clickhouse-connection.ts'
import { logEvents, maskMessage } from '../../src/agent/collectors/clickhouse/log-events.ts'
import type { BatchSections, ClickHouseContext } from '../../src/agent/collectors/types.ts'
import { createLogger } from '../../src/shared/log.ts'
import { LogEventsSection } from '../../src/shared/wire.ts'
import { type ClickHouseRig, startClickHouse } from '../support/clickhouse.ts'

let ch: ClickHouseRig
let conn: ClickHouseConnection
const state = new Map<string, unknown>()

beforeAll(async () => {
  ch = await startClickHouse()
  conn = await connectClickHouse(ch.dsn, { requestTimeoutMs: 10_000, maxExecutionTimeS: 5 })
})

afterAll(async () => {
  await conn?.close()
  await ch?.stop()
})

const context = (c: ClickHouseConnection, notes = new Map<string, string>()): ClickHouseContext => ({
  name: 'ch',
  client: c.client,
  version: c.version,
  versionNum: c.versionNum,
  major: c.major,
  now: Date.now(),
  settings: { collectExplainPlans: false, collectReplication: false },
  state,
  notes: new Map(),
  // text_log's absence is an info note (the server's configuration, not a fault)
  infos: notes,
  log: createLogger('error'),
})

async function cycle(c = conn, notes?: Map<string, string>): Promise<Partial<BatchSections>> {
  const out = await logEvents.collect(context(c, notes))
  if (out.log_events)
    expect([...Value.Errors(LogEventsSection, out.log_events)].map((e) => `${e.path}: ${e.message}`)).toEqual([])
  return out
}

/** `n` queries to a table that does not exist, each failing with UNKNOWN_TABLE. */
async function missingTable(rig: ClickHouseRig, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await expect(rig.query('SELECT * FROM no_such_table_for_dbm')).rejects.toThrow()
}

const unknownTableCount = async (rig: ClickHouseRig) =>
  Number(
    (
      await rig.query<{ value: string }>(
        "SELECT toString(value) AS value FROM system.errors WHERE name = 'UNKNOWN_TABLE' AND remote = 0",
      )
    )[0]?.value ?? 0,
  )

test('system.errors: a baseline first, then exactly the N errors provoked, with the code, name and message; a restart counts from zero', async () => {
  await missingTable(ch, 3)
  const notes = new Map<string, string>()
  // The errors before the agent started are history: the first cycle sends none.
  expect(await cycle(conn, notes)).toEqual({})
  expect(notes.get('log_events')).toContain('system.text_log is disabled')
  expect(await cycle()).toEqual({})
  const before = await unknownTableCount(ch)
  await missingTable(ch, 7)
  const after = await unknownTableCount(ch)
  expect(after - before).toBe(7)
  const { log_events } = await cycle()
  expect(log_events?.source).toBe('system_tables')
  expect(log_events?.entries).toHaveLength(1)
  const [entry] = log_events!.entries
  expect(entry).toMatchObject({
    kind: 'error',
    severity: 'error',
    sqlstate: 'UNKNOWN_TABLE',
    count: 7,
    fields: { code: 60, remote: false },
  })
  expect(entry!.message).toContain('no_such_table_for_dbm')
  expect(entry!.fingerprint).toBe("Unknown table expression identifier '{}' in scope {}")
  expect(log_events!.counts.reduce((sum, c) => sum + c.count, 0)).toBe(7)
  expect(log_events!.counts.every((c) => c.kind === 'error' && c.severity === 'error')).toBe(true)
  // Nothing new, nothing sent; the agent's own queries raise no error.
  expect(await cycle()).toEqual({})
  expect(await unknownTableCount(ch)).toBe(after)

  // A restart: another server behind the same state, its counters from zero, two errors since.
  const restarted = await startClickHouse()
  const conn2 = await connectClickHouse(restarted.dsn, { requestTimeoutMs: 10_000, maxExecutionTimeS: 5 })
  try {
    await missingTable(restarted, 2)
    expect(await unknownTableCount(restarted)).toBe(2)
    const { log_events: again } = await cycle(conn2)
    expect(again?.entries.map((e) => [e.sqlstate, e.count])).toEqual([['UNKNOWN_TABLE', 2]])
  } finally {
    await conn2.close()
    await restarted.stop()
  }
}, 60_000)

test('crash_log and text_log: crashes, disk full and warnings since the watermark; exceptions counted once, by system.errors', async () => {
  await ch.command(`CREATE TABLE system.crash_log (event_date Date, event_time DateTime, timestamp_ns UInt64, signal Int32, thread_id UInt64,
    query_id String, trace Array(UInt64), trace_full Array(String), version String, revision UInt32, build_id String) ENGINE = Memory`)
  await ch.command(`CREATE TABLE system.text_log (event_date Date, event_time DateTime, event_time_microseconds DateTime64(6), microseconds UInt32,
    thread_name LowCardinality(String), thread_id UInt64,
    level Enum8('Fatal' = 1, 'Critical' = 2, 'Error' = 3, 'Warning' = 4, 'Notice' = 5, 'Information' = 6, 'Debug' = 7, 'Trace' = 8, 'Test' = 9),
    query_id String, logger_name LowCardinality(String), message String, revision UInt32, source_file LowCardinality(String), source_line UInt64,
    message_format_string LowCardinality(String)) ENGINE = Memory`)
  // The first test's state belongs to the restarted server now: a fresh agent.
  state.clear()
  try {
    const notes = new Map<string, string>()
    // The tables appear: a watermark, nothing sent, the note gone.
    notes.set('log_events', 'old')
    expect(await cycle(conn, notes)).toEqual({})
    expect(notes.has('log_events')).toBe(false)
    const t = Date.now() + 1_000
    const us = (ms: number) => ms * 1000
    await ch.insert('system.crash_log', [
      {
        event_date: new Date(t).toISOString().slice(0, 10),
        event_time: Math.floor(t / 1000),
        timestamp_ns: `${t}000000`,
        signal: 11,
        thread_id: 4242,
        query_id: 'q-1',
        trace: [1, 2],
        trace_full: ['0. DB::f() @ 0x1', '1. DB::g() @ 0x2'],
        version: 'ClickHouse 26.7.2.1',
        revision: 54500,
        build_id: 'abc',
      },
    ])
    const text = (ms: number, level: string, message: string) => ({
      event_date: new Date(ms).toISOString().slice(0, 10),
      event_time: Math.floor(ms / 1000),
      event_time_microseconds: (us(ms) / 1e6).toFixed(6),
      microseconds: 0,
      thread_name: 'TCPHandler',
      thread_id: 1,
      level,
      query_id: '',
      logger_name: 'executeQuery',
      message,
      revision: 54500,
      source_file: '',
      source_line: 0,
      message_format_string: '',
    })
    await ch.insert('system.text_log', [
      text(t + 1, 'Warning', 'Table default.events has 3000 parts: inserts are delayed'),
      text(
        t + 2,
        'Error',
        "Code: 60. DB::Exception: Unknown table expression identifier 'x'. (UNKNOWN_TABLE) (version 26.7.2.1)",
      ),
      text(t + 3, 'Fatal', 'Cannot reserve 1.00 MiB, not enough space (NOT_ENOUGH_SPACE)'),
      text(t + 4, 'Error', 'Cannot flush: connection reset'),
      text(t + 5, 'Information', 'Ready for connections'),
    ])
    const { log_events } = await cycle()
    // Entries of system.errors (the rig's own faults, counted by `count`) are not this test's.
    const fromErrors = log_events!.entries.filter((e) => e.count !== undefined)
    const logged = log_events!.entries.filter((e) => e.count === undefined)
    expect(logged.map((e) => [e.kind, e.severity, e.sqlstate])).toEqual([
      ['server_crash', 'panic', null],
      ['other', 'warning', null],
      ['disk_full', 'fatal', 'NOT_ENOUGH_SPACE'],
      ['error', 'error', null],
    ])
    expect(logged[0]!.fields).toEqual({
      signal: 11,
      process: 'thread 4242',
      version: 'ClickHouse 26.7.2.1',
      trace: ['0. DB::f() @ 0x1', '1. DB::g() @ 0x2'],
    })
    expect(log_events!.counts.reduce((sum, c) => sum + c.count, 0)).toBe(
      4 + fromErrors.reduce((sum, e) => sum + e.count!, 0),
    )
    // Read once: the watermarks moved past them.
    expect((await cycle()).log_events?.entries.filter((e) => e.count === undefined) ?? []).toEqual([])
  } finally {
    await ch.command('DROP TABLE IF EXISTS system.crash_log')
    await ch.command('DROP TABLE IF EXISTS system.text_log')
  }
}, 60_000)

test('crash_log created by a crash after the agent started: that first crash is reported, not taken as history', async () => {
  state.clear()
  expect(await cycle()).toEqual({}) // the baseline, without crash_log
  // ClickHouse creates crash_log when it writes its first crash: the table and the row appear together.
  await ch.command(`CREATE TABLE system.crash_log (event_date Date, event_time DateTime, timestamp_ns UInt64, signal Int32, thread_id UInt64,
    query_id String, trace Array(UInt64), trace_full Array(String), version String, revision UInt32, build_id String) ENGINE = Memory`)
  try {
    const t = Date.now()
    await ch.insert('system.crash_log', [
      {
        event_date: new Date(t).toISOString().slice(0, 10),
        event_time: Math.floor(t / 1000),
        timestamp_ns: `${t}000000`,
        signal: 6,
        thread_id: 7,
        query_id: '',
        trace: [],
        trace_full: [],
        version: 'ClickHouse 26.7.2.1',
        revision: 1,
        build_id: '',
      },
    ])
    const crashes = (await cycle()).log_events?.entries.filter((e) => e.kind === 'server_crash') ?? []
    expect(crashes.map((e) => [e.ts, e.severity, e.fields.signal])).toEqual([[t, 'panic', 6]])
    expect((await cycle()).log_events?.entries.filter((e) => e.kind === 'server_crash') ?? []).toEqual([])
  } finally {
    await ch.command('DROP TABLE IF EXISTS system.crash_log')
  }
}, 60_000)

test('messages are masked: passwords of users, URLs and secret statements', () => {
  expect(maskMessage("Syntax error: CREATE USER bob IDENTIFIED WITH sha256_password BY 'hunter2' x")).toBe(
    "Syntax error: CREATE USER bob IDENTIFIED WITH sha256_password BY '***' x",
  )
  expect(maskMessage('cannot reach postgres://u:pw@h/db')).toBe('cannot reach postgres://u:***@h/db')
})
