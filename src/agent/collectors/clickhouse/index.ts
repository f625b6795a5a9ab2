// The ClickHouse collectors, in the order of the name table in src/shared/collectors.ts.
import type { ClickHouseCollector } from '../types.ts'
import { activity } from './activity.ts'
import { logEvents } from './log-events.ts'
import { merges } from './merges.ts'
import { mutations } from './mutations.ts'
import { parts } from './parts.ts'
import { queryStats } from './query-stats.ts'
import { serverMetrics } from './server-metrics.ts'
import { host } from './host.ts'
import { clickhouseCustomMetrics } from '../custom-metrics.ts'

export const clickhouseCollectors: ClickHouseCollector[] = [queryStats, activity, parts, merges, mutations, serverMetrics, logEvents, host, clickhouseCustomMetrics]
