// The collectors' table (src/shared/collectors.ts) and the agent's registry (src/agent/collectors/registry.ts):
// every name of the table has one implementation, registered once, in the table's order, carrying the
// table's minimum version and server-side switch; a name outside the table or a second registration of
// one is refused; planFor turns the switches off by the table, not by names. No database needed.
import { describe, expect, test } from 'bun:test'
import { collectorNames } from '../../src/shared/collectors.ts'
import { clickhouseCollectors } from '../../src/agent/collectors/clickhouse/index.ts'
import { postgresCollectors } from '../../src/agent/collectors/postgres/index.ts'
import { registerCollector } from '../../src/agent/collectors/registry.ts'
import { planFor } from '../../src/agent/runner.ts'

const settings = {
  poll_interval_seconds: 10,
  collect_explain_plans: false,
  collect_replication: false,
  disabled_collectors: [],
}

describe('the collectors table and registry', () => {
  test('each engine runs exactly the table: names, order, minimum versions and switches', () => {
    for (const [engine, collectors] of [
      ['postgres', postgresCollectors],
      ['clickhouse', clickhouseCollectors],
    ] as const) {
      const table = collectorNames.filter((c) => c.engine === engine)
      expect(collectors.map((c) => [c.engine, c.name, c.minVersion, c.serverSwitch])).toEqual(
        table.map((c) => [c.engine, c.name, c.minVersion, c.serverSwitch]),
      )
    }
    expect(collectorNames.filter((c) => c.serverSwitch).map((c) => c.name)).toEqual(['explain_plans', 'replication'])
  })

  test('a name outside the table, or a second registration, is refused', () => {
    const collect = async () => ({})
    expect(() =>
      registerCollector({ name: 'no_such_collector', engine: 'postgres', defaultEnabled: true, collect }),
    ).toThrow('not in the table')
    expect(() => registerCollector({ name: 'wal_stats', engine: 'postgres', defaultEnabled: true, collect })).toThrow(
      'registered twice',
    )
  })

  test('the server-side switches skip their collectors with the same words as before', () => {
    const skipped = planFor(postgresCollectors, { enabledCollectors: undefined }, 17, settings).filter((p) => !p.run)
    const reasons = Object.fromEntries(skipped.map((p) => [p.collector.name, (p as { reason: string }).reason]))
    expect(reasons.explain_plans).toBe('collect_explain_plans is off on the server')
    expect(reasons.replication).toBe('collect_replication is off on the server')
    expect(
      planFor(postgresCollectors, { enabledCollectors: undefined }, 13, settings).find(
        (p) => p.collector.name === 'io_stats',
      ),
    ).toMatchObject({ run: false, reason: 'needs PostgreSQL 16+' })
  })
})
