// Reads of the database host's figures: the latest host snapshot, and its gauges over time.
import type { HostStatus } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import type { Intervals, MetricPoint } from '../internals/types.ts'
import { metricSeries } from '../internals/reads.ts'
import type { HostReads, LatestHost } from './types.ts'

export class SqlHostReads implements HostReads {
  constructor(private readonly driver: SqlDriver) {}

  async latestHost(databaseId: string): Promise<LatestHost | undefined> {
    const row = await this.driver.get<{ ts: number; payload: string }>(
      "SELECT ts, payload FROM snapshots WHERE database_id = $1 AND kind = 'host'",
      [databaseId],
    )
    return row ? { ts: Number(row.ts), status: JSON.parse(row.payload) as HostStatus } : undefined
  }

  hostSeries(databaseId: string, intervals: Intervals): Promise<MetricPoint[]> {
    return metricSeries(this.driver, databaseId, 'host', intervals)
  }
}
