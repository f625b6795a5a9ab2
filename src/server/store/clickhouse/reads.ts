// Reads of ClickHouse parts, merges, mutations and server metrics: the latest sections whole, and the
// series of source 'server', 'disk' and 'parts' in the metric tables (internals/reads.ts reads them).
import type { MergeEntry, MutationEntry, PartStat } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import type { Intervals } from '../internals/types.ts'
import { metricSeries, readLatest } from '../internals/reads.ts'
import type { ClickHouseLatestKind, ClickHouseReads, ClickHouseSource } from './types.ts'

const latest = <T>(driver: SqlDriver, databaseId: string, kind: ClickHouseLatestKind) =>
  readLatest<T>(driver, 'clickhouse_latest', databaseId, kind)

/** Reads for the ClickHouse routes. */
export function clickhouseReads(driver: SqlDriver): ClickHouseReads {
  return {
    latestParts: (databaseId: string) => latest<PartStat[]>(driver, databaseId, 'parts'),
    latestMerges: (databaseId: string) => latest<MergeEntry[]>(driver, databaseId, 'merges'),
    latestMutations: (databaseId: string) => latest<MutationEntry[]>(driver, databaseId, 'mutations'),
    latestServerMetrics: (databaseId: string) =>
      latest<Record<string, number | null>>(driver, databaseId, 'server_metrics'),
    metricSeries: (databaseId: string, source: ClickHouseSource, intervals: Intervals) =>
      metricSeries(driver, databaseId, source, intervals),
  }
}
