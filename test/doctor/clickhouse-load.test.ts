// ch_running_queries and ch_connections from recorded server_metrics (the engine's own limits cannot be
// lowered on the chdb rig, whose max_concurrent_queries is 0, no limit; clickhouse-queries.test.ts
// checks the counts the agent reads there): each warns from 80 % of its limit and is critical from
// 95 %, names what it counted, and says nothing without a known limit.
import { describe, expect, test } from 'bun:test'
import { agentSession, chBatch } from '../support/batches.ts'

describe('from recorded rows', () => {
  const session = agentSession('sqlite')
  const findingsOf = async (id: string, rule: string) =>
    ((await session.ok(id, '/doctor')).top_issues as any[]).filter((f) => f.rule === rule)
  const query = (n: number, user: string) => ({
    pid: `q${n}`,
    query_text: 'SELECT sleep(3)',
    state: 'active',
    wait_event_type: null,
    wait_event: null,
    duration_ms: 1000,
    blocking_pids: [],
    user,
    database: 'default',
    client_addr: null,
    application_name: null,
    memory_usage: 0,
    read_bytes: 0,
    written_bytes: 0,
    read_rows: 0,
  })

  test('running queries against max_concurrent_queries: 79 of 100 nothing, 80 a warning naming the users, 95 critical', async () => {
    const ingest = (running: number, limit: number | null) =>
      session.ingest(
        chBatch('busy', Date.now(), {
          server_metrics: { running_queries: running, ...(limit === null ? {} : { max_concurrent_queries: limit }) },
          activity: Array.from({ length: running }, (_, i) => query(i, i % 4 === 0 ? 'etl' : 'dashboards')),
        }),
      )
    const id = await ingest(79, 100)
    expect(await findingsOf(id, 'ch_running_queries')).toEqual([])
    await ingest(80, 100)
    const [warning] = await findingsOf(id, 'ch_running_queries')
    expect(warning).toMatchObject({
      key: 'ch_running_queries',
      severity: 'warning',
      category: 'capacity',
      title: '80 queries running of 100 allowed',
      objects: ['user dashboards', 'user etl'],
      metrics: { running_queries: 80, max_concurrent_queries: 100, ratio: 0.8 },
    })
    expect(warning.detail).toBe(
      '80 queries are running (80.0 % of max_concurrent_queries 100; a warning from 80 %, critical from 95 %). At the limit ClickHouse refuses new queries with TOO_MANY_SIMULTANEOUS_QUERIES. The most by user: dashboards 60, etl 20.',
    )
    await ingest(95, 100)
    expect((await findingsOf(id, 'ch_running_queries')).map((f) => [f.severity, f.metrics.ratio])).toEqual([
      ['critical', 0.95],
    ])
    await ingest(5000, null) // no known limit (an older server, or 0: none)
    expect(await findingsOf(id, 'ch_running_queries')).toEqual([])
  })

  test('connections of every protocol against max_connections: the sum judged, each protocol named', async () => {
    const ingest = (metrics: Record<string, number>) =>
      session.ingest(chBatch('connected', Date.now(), { server_metrics: metrics }))
    const protocols = {
      tcp_connections: 2000,
      http_connections: 1200,
      mysql_connections: 50,
      postgresql_connections: 25,
      interserver_connections: 1,
    }
    const id = await ingest({ ...protocols, max_connections: 4096 }) // 3,276 of 4,096: 79.98 %
    expect(await findingsOf(id, 'ch_connections')).toEqual([])
    await ingest({ ...protocols, interserver_connections: 2, max_connections: 4096 }) // 3,277: 80.0 %
    const [warning] = await findingsOf(id, 'ch_connections')
    expect(warning).toMatchObject({
      key: 'ch_connections',
      severity: 'warning',
      category: 'capacity',
      title: '3,277 connections open of 4,096 allowed',
      metrics: { connections: 3277, max_connections: 4096, ratio: 0.8, ...protocols, interserver_connections: 2 },
    })
    expect(warning.detail).toStartWith(
      '3,277 connections are open (2,000 native TCP, 1,200 HTTP, 50 MySQL, 25 PostgreSQL, 2 interserver): 80.0 % of max_connections 4,096',
    )
    await ingest({ tcp_connections: 3900, http_connections: 2, max_connections: 4096 }) // 3,902: 95.3 %
    expect((await findingsOf(id, 'ch_connections')).map((f) => [f.severity, f.metrics.connections])).toEqual([
      ['critical', 3902],
    ])
    await ingest({ tcp_connections: 3900, http_connections: 2 }) // max_connections unknown
    expect(await findingsOf(id, 'ch_connections')).toEqual([])
    const { runningQueries, connections } = await import('../../src/server/doctor/rules/clickhouse/load.ts')
    expect(runningQueries.thresholds).toEqual({ warning_ratio: 0.8, critical_ratio: 0.95, users_named: 3 })
    expect(connections.thresholds).toEqual({ warning_ratio: 0.8, critical_ratio: 0.95 })
  })
})
