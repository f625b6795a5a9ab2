// The ClickHouse collectors: importing each module registers it (../registry.ts); the list is in the
// order of the table in src/shared/collectors.ts.
import type { ClickHouseContext } from '../types.ts'
import { collectorsOf } from '../registry.ts'
import '../custom-metrics.ts'
import './activity.ts'
import './host.ts'
import './log-events.ts'
import './merges.ts'
import './mutations.ts'
import './parts.ts'
import './query-stats.ts'
import './security.ts'
import './server-metrics.ts'

export const clickhouseCollectors = collectorsOf<ClickHouseContext>('clickhouse')
