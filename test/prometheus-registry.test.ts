// The registry of src/shared/prometheus.ts: its exposition read back by the text-format parser package,
// label values with backslashes, quotes and line breaks round-tripping, cumulative histogram buckets
// (an observation on a bound counts in that bound's bucket), and the names it refuses.
import { describe, expect, test } from 'bun:test'
import { Registry } from '../src/shared/prometheus.ts'
import { checkConventions, histogram, parseScrape, value } from './support/prometheus.ts'

describe('prometheus registry', () => {
  test('counters, gauges and histograms round-trip through the parser, hostile label values included', () => {
    const r = new Registry()
    const c = r.counter({
      name: 'dbm_things_total',
      help: 'Things.\nWith a line break and a \\ backslash.',
      labelNames: ['database', 'collector'],
    })
    const hostile = 'a"b\\c\nd\u2028e'
    c.labels(hostile, 'tables').inc(3)
    c.labels('plain', 'tables').inc()
    const g = r.gauge({ name: 'dbm_buffer_bytes', help: 'Bytes.' })
    g.set(1234.5)
    const h = r.histogram({
      name: 'dbm_run_duration_seconds',
      help: 'Runs.',
      labelNames: ['collector'],
      buckets: [0.1, 1, 10],
    })
    for (const v of [0.05, 0.1, 0.5, 1, 20]) h.labels('x').observe(v)
    h.labels('y').observe(2)
    const scrape = parseScrape(r.expose())
    checkConventions(scrape)
    expect(scrape.get('dbm_things_total')!.help).toBe('Things.\nWith a line break and a \\ backslash.')
    expect(value(scrape, 'dbm_things_total', { database: hostile, collector: 'tables' })).toBe(3)
    expect(value(scrape, 'dbm_things_total', { database: 'plain' })).toBe(1)
    expect(value(scrape, 'dbm_buffer_bytes')).toBe(1234.5)
    expect(histogram(scrape, 'dbm_run_duration_seconds', { collector: 'x' })).toEqual({
      buckets: [
        [0.1, 2],
        [1, 4],
        [10, 4],
        [Number.POSITIVE_INFINITY, 5],
      ],
      sum: 21.65,
      count: 5,
    })
    expect(histogram(scrape, 'dbm_run_duration_seconds', { collector: 'y' })?.buckets.map((b) => b[1])).toEqual([
      0, 0, 1, 1,
    ])
  })

  test('names and labels that break the conventions are refused at registration', () => {
    const r = new Registry()
    expect(() => r.counter({ name: 'dbm_things', help: 'x' })).toThrow('counter dbm_things must end in _total')
    expect(() => r.gauge({ name: 'dbm-bad', help: 'x' })).toThrow('invalid metric name: dbm-bad')
    expect(() => r.gauge({ name: 'dbm_ok', help: 'x', labelNames: ['__x'] })).toThrow(
      'invalid label name __x of dbm_ok',
    )
    expect(() => r.histogram({ name: 'dbm_h_seconds', help: 'x', labelNames: ['le'], buckets: [1] })).toThrow(
      'cannot have a label named le',
    )
    r.gauge({ name: 'dbm_once', help: 'x' })
    expect(() => r.gauge({ name: 'dbm_once', help: 'x' })).toThrow('metric dbm_once is registered already')
    expect(() => r.gauge({ name: 'dbm_g', help: 'x', labelNames: ['a'] }).labels()).toThrow(
      'dbm_g takes 1 label values, got 0',
    )
  })
})
