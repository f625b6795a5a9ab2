// The metric records of src/shared/metrics.ts and what is derived from them: each record has help text
// and a unit its key's suffix agrees with, keys are unique per section, and the agent's exporter prints each exported record's HELP
// and TYPE lines from the record and its value in the series' unit. No database needed.
import { describe, expect, test } from 'bun:test'
import { Exporter } from '../../src/agent/exporter.ts'
import { METRIC_SECTIONS, type MetricRecord } from '../../src/shared/metrics.ts'
import { Registry } from '../../src/shared/prometheus.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'

const sections = Object.entries(METRIC_SECTIONS) as [keyof typeof METRIC_SECTIONS, readonly MetricRecord[]][]

describe('metric records', () => {
  test('every record has help text, one key per section, and a kind that fits its unit', () => {
    for (const [section, records] of sections) {
      expect(new Set(records.map((r) => r.key)).size).toBe(records.length)
      for (const r of records) {
        expect(r.help.length, `${section}.${r.key}`).toBeGreaterThan(10)
        expect(r.help.endsWith('.'), `${section}.${r.key}: help ends without a period`).toBe(false)
        if (['flag', 'setting', 'pid'].includes(r.unit)) expect(r.kind, `${section}.${r.key}`).toBe('gauge')
        if (r.exported) expect(r.exported.endsWith('_total'), r.exported).toBe(r.kind === 'counter')
        // The API's descriptions read the unit from the key's suffix (shared/api/internals.ts): the two agree.
        const bySuffix = r.key.endsWith('_ms')
          ? 'ms'
          : r.key.endsWith('_bytes')
            ? 'bytes'
            : r.key.endsWith('_s')
              ? 's'
              : /_(on|installed)$/.test(r.key)
                ? 'flag'
                : undefined
        if (bySuffix !== undefined || ['ms', 'bytes', 's', 'flag'].includes(r.unit))
          expect(r.unit, `${section}.${r.key}`).toBe(bySuffix!)
      }
    }
  })

  test('the exporter prints each exported record with its help and type, milliseconds as seconds', () => {
    const registry = new Registry()
    const exporter = new Exporter(registry)
    const batch = {
      database_stats: { xact_commit: 5, numbackends: 3 },
      bgwriter: { checkpoint_write_time_ms: 1500 },
      wal_stats: {},
    } as unknown as IngestBatch
    exporter.recorder('db1', 'postgres')(batch)
    exporter.recorder('ch1', 'clickhouse')({ server_metrics: { uptime_s: 60 } } as unknown as IngestBatch)
    const text = registry.expose()
    const exported = sections.flatMap(([, records]) => records.filter((r) => r.exported))
    expect(exported.length).toBeGreaterThan(30)
    for (const r of exported) {
      expect(text).toContain(
        `# HELP ${r.exported} ${r.help}${r.kind === 'counter' ? ', since the agent started.' : '.'}\n# TYPE ${r.exported} ${r.kind}\n`,
      )
    }
    expect(text).toContain('dbm_pg_xact_commit_total{database="db1"} 5\n')
    expect(text).toContain('dbm_pg_backends{database="db1"} 3\n')
    expect(text).toContain('dbm_pg_checkpoint_write_seconds_total{database="db1"} 1.5\n')
    expect(text).toContain('dbm_clickhouse_uptime_seconds{database="ch1"} 60\n')
  })
})
