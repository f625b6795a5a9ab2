// custom_metrics in the agent config and the pure parts of the collector: every bad entry is one
// config error naming the database and the metric; values parse as numbers (numeric text included),
// labels become text cut to 200 characters; a metric runs at its own interval; a failing query is
// reported for that metric alone.
import { describe, expect, test } from 'bun:test'
import { ConfigError, parseAgentConfig, type CustomMetricConfig } from '../../src/agent/config.ts'
import { collectCustom, customLabel, customNumber, customSamples } from '../../src/agent/collectors/custom-metrics.ts'

const KEY = 'dbm_ak_0123456789abcdef_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ'

function config(metrics: string, poll = '10s'): string {
  return `api:\n  key: ${KEY}\ndatabases:\n  - name: shop\n    dsn: postgres://u@localhost/shop\n    poll_interval: ${poll}\n    custom_metrics:\n${metrics}`
}

function errorOf(text: string): string {
  try {
    parseAgentConfig(text)
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError)
    return (e as Error).message
  }
  throw new Error('expected a ConfigError')
}

describe('custom_metrics config', () => {
  test('a full entry parses with its defaults', () => {
    const parsed = parseAgentConfig(
      config(`      - name: outbox_rows
        sql: SELECT count(*) AS rows FROM outbox
        values: [rows]
      - name: jobs
        sql: SELECT state, n, oldest FROM jobs_by_state
        interval: 1m
        labels: [state]
        values: [n, oldest]
        kind: counter
        timeout: 30s
        description: Jobs by state
        alert: {above: 10_000, for: 5m, severity: critical}
`),
    )
    expect(parsed.databases[0]!.customMetrics).toEqual([
      {
        name: 'outbox_rows',
        sql: 'SELECT count(*) AS rows FROM outbox',
        intervalMs: 10_000,
        labels: [],
        values: ['rows'],
        kind: 'gauge',
        timeoutMs: 5_000,
      },
      {
        name: 'jobs',
        sql: 'SELECT state, n, oldest FROM jobs_by_state',
        intervalMs: 60_000,
        labels: ['state'],
        values: ['n', 'oldest'],
        kind: 'counter',
        timeoutMs: 30_000,
        description: 'Jobs by state',
        alert: { op: 'above', threshold: 10_000, forMs: 300_000, severity: 'critical' },
      },
    ])
  })

  const bad: [string, string][] = [
    [
      '      - name: Outbox\n        sql: SELECT 1 AS v\n        values: [v]\n',
      'database "shop", metric "Outbox": databases[0].custom_metrics[0].name: "Outbox" must match [a-z_][a-z0-9_]* (at most 100 characters)',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: [v]}\n      - {name: a, sql: SELECT 2 AS v, values: [v]}\n',
      'database "shop", metric "a": databases[0].custom_metrics[1].name: "a" is used twice in this database',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: [v], interval: 5s}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0].interval: must be at least the database\'s poll_interval (10s)',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: [v], interval: 15500ms}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0].interval: must be a whole number of seconds, got 15500ms',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: []}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0].values: name at least one column of the query\'s result',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, labels: [v], values: [v]}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0]: "v" is both a label and a value; a column is one or the other',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, labels: [database], values: [v]}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0].labels: "database" is reserved (dbm adds the database label); alias it in the SQL',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: [v], kind: histogram}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0].kind: expected gauge or counter, got "histogram"',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: [v], timeout: 61s}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0].timeout: must be at most 60s, got 61s',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: [v], alert: {above: 1, below: 2}}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0].alert: set one of above or below',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: [v], alert: {above: lots}}\n',
      'database "shop", metric "a": databases[0].custom_metrics[0].alert.above: expected a number, got "lots"',
    ],
    [
      '      - {name: a, sql: SELECT 1 AS v, values: [v], colour: red}\n',
      'database "shop", metric "a": unknown key "colour" in databases[0].custom_metrics[0]',
    ],
    ['      - {name: a, values: [v]}\n', 'database "shop", metric "a": databases[0].custom_metrics[0].sql is required'],
  ]
  for (const [entry, message] of bad) {
    test(`refused: ${message.slice(message.indexOf(': ') + 2, message.indexOf(': ') + 70)}`, () => {
      expect(errorOf(config(entry))).toBe(message)
    })
  }
})

const metric = (over: Partial<CustomMetricConfig> = {}): CustomMetricConfig => ({
  name: 'm',
  sql: 'SELECT 1',
  intervalMs: 10_000,
  labels: ['state'],
  values: ['n'],
  kind: 'gauge',
  timeoutMs: 5_000,
  ...over,
})

describe('custom metric values', () => {
  test('numbers, numeric text and NULL', () => {
    expect(customNumber(42)).toBe(42)
    expect(customNumber('9007199254740993')).toBe(9007199254740992)
    expect(customNumber('12.50')).toBe(12.5)
    expect(customNumber(' -1e3 ')).toBe(-1000)
    expect(customNumber(null)).toBeNull()
    expect(customNumber('NaN')).toBeUndefined()
    expect(customNumber('abc')).toBeUndefined()
    expect(customNumber(true)).toBeUndefined()
  })

  test('labels: text, NUL replaced, cut to 200 characters without splitting a pair', () => {
    expect(customLabel(null)).toBe('')
    expect(customLabel('a\0b')).toBe('a\uFFFDb')
    expect(customLabel(`${'x'.repeat(199)}😀`)).toBe('x'.repeat(199))
    expect(customLabel('y'.repeat(300)).length).toBe(200)
  })

  test("rows become one sample per value column; a non-number is the metric's error", () => {
    expect(
      customSamples(metric(), [
        { state: 'new', n: '7' },
        { state: 'done', n: 3 },
      ]),
    ).toEqual({
      samples: [
        { name: 'm', column: 'n', labels: { state: 'new' }, value: 7 },
        { name: 'm', column: 'n', labels: { state: 'done' }, value: 3 },
      ],
    })
    expect(customSamples(metric(), [{ state: 'new', n: 'seven' }]).error).toBe(
      'value column "n" is not a number in row 1: "seven"',
    )
    expect(customSamples(metric(), [{ n: 1 }]).error).toBe('the result has no column "state" (it has: "n")')
    expect(
      customSamples(metric(), [
        { state: 'a', n: 1 },
        { state: 'a', n: 2 },
      ]).error,
    ).toContain('same labels')
  })

  test('each metric at its own interval; one failing leaves the other', async () => {
    const state = new Map<string, unknown>()
    const notes = new Map<string, string>()
    const metrics = [metric({ name: 'ok', labels: [] }), metric({ name: 'bad', intervalMs: 30_000 })]
    const run = async (m: CustomMetricConfig) => {
      if (m.name === 'bad') throw new Error('relation "nope" does not exist')
      return [{ n: 5 }]
    }
    const first = await collectCustom(metrics, { now: 1_000_000, state, notes }, run)
    expect(first!.samples).toEqual([{ name: 'ok', column: 'n', labels: {}, value: 5 }])
    expect(first!.errors).toEqual([{ name: 'bad', message: 'relation "nope" does not exist' }])
    expect(notes.get('custom_metrics')).toBe('bad: relation "nope" does not exist')
    const second = await collectCustom(metrics, { now: 1_010_000, state, notes }, run)
    expect(second!.samples.length).toBe(1)
    expect(second!.errors).toEqual([])
    expect(await collectCustom(metrics, { now: 1_015_000, state, notes }, run)).toBeUndefined()
  })
})

describe('counter rates (server side)', () => {
  test('per second between readings; a drop is a reset; no rate without time passing', async () => {
    const { counterRate } = await import('../../src/server/store/custom-metrics/writes.ts')
    expect(counterRate({ value: 1000, at: 0 }, { value: 1600, at: 10_000 })).toBe(60)
    expect(counterRate({ value: 1600, at: 10_000 }, { value: 7, at: 12_000 })).toBe(3.5)
    expect(counterRate({ value: 5, at: 10_000 }, { value: 9, at: 10_000 })).toBeUndefined()
  })
})

describe('wire version 3', () => {
  test('a server of version 2 gets the batch without custom_metrics, the rest intact', async () => {
    const { addedAfter, leaveOut } = await import('../../src/shared/wire-contract.ts')
    const batch = {
      batch_id: 'b',
      custom_metrics: { definitions: [], samples: [], errors: [] },
      tables: [{ heap_bytes: 1, schema_name: 's' }],
    }
    expect(leaveOut(batch, addedAfter(2))).toEqual({ values: 1, paths: ['custom_metrics'] })
    expect(batch).toEqual({ batch_id: 'b', tables: [{ heap_bytes: 1, schema_name: 's' }] } as never)
  })
})
