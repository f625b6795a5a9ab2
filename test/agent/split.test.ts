// The agent's batch splitter (src/agent/split.ts): parts within every item cap and under the body limit
// (bytes of the JSON, multibyte and escaped texts included), deterministic ids, nothing lost or repeated,
// statements biggest first, the server's whole-list sections kept whole, and what cannot fit counted.
import { describe, expect, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { type SplitLimits, batchParts, defaultSplitLimits, partIds, splitBatch } from '../../src/agent/split.ts'
import { INGEST_BODY_LIMIT_BYTES, ingestMaxItems, ingestTextLimits } from '../../src/shared/ingest-limits.ts'
import { createLogger } from '../../src/shared/log.ts'
import { IngestBatch, type QueryStatDelta, type TableStat } from '../../src/shared/wire.ts'

const T0 = Date.UTC(2026, 10, 1)

function batch(sections: Partial<IngestBatch> = {}, batchId = '0b6f8f4e-2a65-4c59-9d3c-6c1f0f7a1e11'): IngestBatch {
  return {
    batch_id: batchId,
    collected_at: T0,
    interval_seconds: 10,
    agent_version: '1.2.3',
    database: {
      name: 'main',
      engine: 'postgres',
      engine_version: '17.2',
      host: 'db.internal',
      port: 5432,
      tags: { env: 'prod' },
    },
    ...sections,
  }
}

function statement(i: number, text = `SELECT * FROM t${i} WHERE id = $1`): QueryStatDelta {
  return {
    query_hash: String(1_000_000_000 + i),
    query_text: text,
    calls: (i % 7) + 1,
    total_time_ms: (i * 7919) % 100_003,
    rows: i,
    shared_blks_hit: 1,
    shared_blks_read: 0,
  }
}

function table(i: number): TableStat {
  const counters = {
    seq_scan: i,
    seq_tup_read: 0,
    idx_scan: 0,
    idx_tup_fetch: 0,
    n_tup_ins: 0,
    n_tup_upd: 0,
    n_tup_del: 0,
    n_tup_hot_upd: 0,
  }
  return {
    schema_name: 'public',
    table_name: `t${i}`,
    ...counters,
    n_live_tup: 0,
    n_dead_tup: 0,
    last_vacuum: null,
    last_autovacuum: null,
    last_analyze: null,
    last_autoanalyze: null,
    table_size_bytes: 8192,
    index_size_bytes: 0,
    delta: counters,
  }
}

const bodyBytes = (part: IngestBatch) => Buffer.byteLength(JSON.stringify(part), 'utf8')

/** Each part passes the server's schema, keeps the header, stays within the limits, and its size was measured right. */
function expectWithinLimits(
  input: IngestBatch,
  result: ReturnType<typeof splitBatch>,
  limits: SplitLimits = defaultSplitLimits,
) {
  result.parts.forEach((part, i) => {
    expect(Value.Check(IngestBatch, part)).toBe(true)
    expect(part.collected_at).toBe(input.collected_at)
    expect(part.interval_seconds).toBe(input.interval_seconds)
    expect(part.agent_version).toBe(input.agent_version)
    expect(part.database).toEqual(input.database)
    const actual = bodyBytes(part)
    expect(actual).toBeLessThanOrEqual(result.bytes[i]!)
    // Measured with room for the longest id: never more than that off.
    expect(result.bytes[i]! - actual).toBeLessThanOrEqual(ingestTextLimits.id + 2)
    expect(result.bytes[i]!).toBeLessThanOrEqual(limits.maxBodyBytes)
    for (const [section, max] of Object.entries(limits.maxItems)) {
      const rows = (part as Record<string, unknown>)[section]
      if (Array.isArray(rows)) expect(rows.length).toBeLessThanOrEqual(max)
    }
  })
}

const sum = (rows: QueryStatDelta[], key: 'calls' | 'total_time_ms') => rows.reduce((s, r) => s + r[key], 0)
const statementsOf = (parts: IngestBatch[]) => parts.flatMap((p) => p.query_stats ?? [])

describe('splitBatch', () => {
  test('a batch within the limits is one part with its own id and every section', () => {
    const input = batch({
      query_stats: [statement(1), statement(2)],
      tables: [table(1)],
      activity: [],
      collector_notes: [],
      bgwriter: { buffers_alloc: 4 },
    })
    const result = splitBatch(input)
    expect(result.parts).toHaveLength(1)
    const [part] = result.parts
    expect(part!.batch_id).toBe(input.batch_id)
    expect(part!.query_stats).toEqual([statement(2), statement(1)])
    expect({ ...part!, query_stats: input.query_stats } as IngestBatch).toEqual(input)
    expect(result.dropped).toEqual({})
    expect(result.truncated).toEqual({})
    expectWithinLimits(input, result)
  })

  test('50,000 statements: parts of at most 20,000, every statement once, the calls add up, biggest first', () => {
    const statements = Array.from({ length: 50_000 }, (_, i) => statement(i))
    const input = batch({
      query_stats: statements,
      tables: Array.from({ length: 10_000 }, (_, i) => table(i)),
      collector_notes: [],
    })
    const result = splitBatch(input)
    expect(result.parts.length).toBe(3)
    expectWithinLimits(input, result)
    const sent = statementsOf(result.parts)
    expect(sent).toHaveLength(50_000)
    expect(new Set(sent.map((s) => s.query_hash)).size).toBe(50_000)
    expect(sum(sent, 'calls')).toBe(sum(statements, 'calls'))
    expect(sum(sent, 'total_time_ms')).toBe(sum(statements, 'total_time_ms'))
    for (let i = 1; i < sent.length; i++)
      expect(sent[i - 1]!.total_time_ms).toBeGreaterThanOrEqual(sent[i]!.total_time_ms)
    expect(result.parts.flatMap((p) => p.tables ?? []).map((t) => t.table_name)).toEqual(
      input.tables!.map((t) => t.table_name),
    )
    expect(result.parts.map((p) => p.batch_id)).toEqual([1, 2, 3].map((n) => `${input.batch_id}.${n}`))
  })

  test('the same batch splits the same way: ids and contents are deterministic', () => {
    const input = batch({ query_stats: Array.from({ length: 45_000 }, (_, i) => statement(i)) })
    const first = splitBatch(input)
    const second = splitBatch(structuredClone(input))
    expect(second.parts.map((p) => p.batch_id)).toEqual(first.parts.map((p) => p.batch_id))
    expect(second.parts).toEqual(first.parts)
    expect(new Set(first.parts.map((p) => p.batch_id)).size).toBe(first.parts.length)
  })

  test('long multibyte and escaped texts: every body under the byte limit, measured in bytes', () => {
    // 10,000 UTF-16 units of 3-byte characters, 4-byte pairs, escaped control characters, quotes and lone surrogates.
    const pieces = ['€', '😀', '\u0001', '"', '\\', '\ud800', 'ж', '\n']
    const text = (i: number) =>
      Array.from({ length: 1250 }, (_, k) => pieces[(i + k) % pieces.length])
        .join('')
        .padEnd(10_000, '界')
    // A statement's text depends only on i modulo the 8 pieces: the 8 texts are made once and shared.
    const texts = pieces.map((_, i) => text(i))
    const statements = Array.from({ length: 15_000 }, (_, i) => statement(i, texts[i % pieces.length]))
    const input = batch({ query_stats: statements })
    const result = splitBatch(input)
    expectWithinLimits(input, result)
    expect(JSON.stringify(input).length).toBeGreaterThan(INGEST_BODY_LIMIT_BYTES)
    expect(result.parts.length).toBeGreaterThan(10)
    const sent = statementsOf(result.parts)
    expect(sent.length).toBe(15_000)
    expect(sum(sent, 'calls')).toBe(sum(statements, 'calls'))
    expect(new Map(sent.map((s) => [s.query_hash, s.query_text]))).toEqual(
      new Map(statements.map((s) => [s.query_hash, s.query_text])),
    )
    for (const bytes of result.bytes) expect(bytes).toBeLessThanOrEqual(INGEST_BODY_LIMIT_BYTES - 1024 * 1024)
  })

  test('whole-list sections stay whole, each in one part; tables and indexes spread; nothing repeated', () => {
    const limits: SplitLimits = { maxBodyBytes: 6_000, maxItems: { ...ingestMaxItems, tables: 7 } }
    const activity = Array.from({ length: 8 }, (_, i) => ({
      pid: i,
      query_text: `SELECT pg_sleep(${i}) -- ${'x'.repeat(200)}`,
      state: 'active',
      wait_event_type: null,
      wait_event: null,
      duration_ms: i,
      blocking_pids: [],
    }))
    const input = batch({
      query_stats: Array.from({ length: 40 }, (_, i) => statement(i)),
      tables: Array.from({ length: 30 }, (_, i) => table(i)),
      activity,
      locks: [],
      collector_notes: [{ collector: 'tables', message: '3 sequences unreadable' }],
      replication: {
        is_replica: false,
        replication_lag_bytes: null,
        replication_lag_seconds: null,
        upstream_host: null,
        replicas: [],
        slots: [],
      },
      database_stats: { xact_commit: 5 },
      waits: [{ wait_event_type: 'Lock', wait_event: 'relation', count: 2, total_duration_ms: 2000 }],
    })
    const result = splitBatch(input, limits)
    expectWithinLimits(input, result, limits)
    expect(result.parts.length).toBeGreaterThan(3)
    for (const section of ['activity', 'locks', 'collector_notes', 'replication', 'database_stats', 'waits'] as const) {
      const holders = result.parts.filter((p) => p[section] !== undefined)
      expect(holders).toHaveLength(1)
      expect(holders[0]![section]).toEqual(input[section] as never)
    }
    expect(result.parts.flatMap((p) => p.tables ?? [])).toEqual(input.tables!)
    for (const part of result.parts) expect((part.tables ?? []).length).toBeLessThanOrEqual(7)
    expect(
      statementsOf(result.parts)
        .map((s) => s.query_hash)
        .sort(),
    ).toEqual(input.query_stats!.map((s) => s.query_hash).sort())
    expect(result.dropped).toEqual({})
  })

  test('a field this agent version does not split is sent whole, and empty sections are kept', () => {
    const input = { ...batch({ tables: [], query_stats: [] }), future_section: { a: [1, 2, 3] } } as IngestBatch
    const [part, ...rest] = splitBatch(input).parts
    expect(rest).toHaveLength(0)
    expect(part).toEqual(input)
  })

  test('a statement too big for a part on its own is shortened to fit and counted; other rows that cannot fit are dropped and counted', () => {
    const limits: SplitLimits = { maxBodyBytes: 2_000, maxItems: ingestMaxItems }
    const huge = statement(1, `SELECT '${'ж'.repeat(5_000)}'`)
    const big = { ...table(2), table_name: 'x'.repeat(3_000) }
    const input = batch({ query_stats: [huge, statement(2)], tables: [table(1), big, table(3)] })
    const result = splitBatch(input, limits)
    expectWithinLimits(input, result, limits)
    const sent = statementsOf(result.parts)
    expect(sent.map((s) => s.query_hash).sort()).toEqual([huge.query_hash, statement(2).query_hash])
    const shortened = sent.find((s) => s.query_hash === huge.query_hash)!
    expect(huge.query_text.startsWith(shortened.query_text)).toBe(true)
    expect(shortened.query_text.length).toBeGreaterThan(100)
    expect(shortened.calls).toBe(huge.calls)
    expect(result.truncated).toEqual({ query_stats: 1 })
    expect(result.dropped).toEqual({ tables: 1 })
    expect(result.parts.flatMap((p) => p.tables ?? []).map((t) => t.table_name)).toEqual(['t1', 't3'])
  })

  test('texts over their length cap are cut to it, never in the middle of a surrogate pair; whole sections past their item cap keep the first entries', () => {
    const text = `${'a'.repeat(ingestTextLimits.queryText - 1)}😀 and more`
    const notes = Array.from({ length: ingestMaxItems.collector_notes + 5 }, (_, i) => ({
      collector: `c${i}`,
      message: 'm',
    }))
    const input = batch({ query_stats: [statement(1, text)], collector_notes: notes })
    const result = splitBatch(input)
    expectWithinLimits(input, result)
    const [sent] = statementsOf(result.parts)
    expect(sent!.query_text).toBe('a'.repeat(ingestTextLimits.queryText - 1))
    expect(result.parts[0]!.collector_notes).toEqual(notes.slice(0, ingestMaxItems.collector_notes))
    expect(result.truncated).toEqual({ query_stats: 1 })
    expect(result.dropped).toEqual({ collector_notes: 5 })
  })

  test('part ids stay within 64 characters and differ per cycle', () => {
    const long = 'b'.repeat(64)
    const ids = partIds(long, 12)
    expect(ids).toHaveLength(12)
    expect(new Set(ids).size).toBe(12)
    for (const id of ids) expect(id.length).toBeLessThanOrEqual(ingestTextLimits.id)
    expect(partIds(long, 12)).toEqual(ids)
    expect(partIds('c'.repeat(64), 12)[0]).not.toBe(ids[0])
    expect(partIds('cycle-1', 1)).toEqual(['cycle-1'])
  })

  test('batchParts logs what it dropped or shortened, with counts', () => {
    const lines: string[] = []
    const log = createLogger('debug', (line) => lines.push(line))
    const limits: SplitLimits = { maxBodyBytes: 2_000, maxItems: ingestMaxItems }
    const parts = batchParts(
      batch({
        query_stats: [statement(1, 'x'.repeat(4_000))],
        tables: [{ ...table(1), table_name: 'y'.repeat(3_000) }, table(2)],
      }),
      log,
      limits,
    )
    expect(parts.length).toBeGreaterThanOrEqual(1)
    const logged = lines.join('\n')
    expect(logged).toContain('dropped database=main section=tables dropped=1')
    expect(logged).toContain('shortened database=main section=query_stats shortened=1')
  })
})
