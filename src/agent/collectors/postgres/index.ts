// The PostgreSQL collectors, in the order of the name table in src/shared/collectors.ts.
import type { PostgresCollector } from '../types.ts'
import { postgresCustomMetrics } from '../custom-metrics.ts'
import { activity } from './activity.ts'
import { archiver } from './archiver.ts'
import { backups } from './backups.ts'
import { bgwriter } from './bgwriter.ts'
import { bloat } from './bloat.ts'
import { columnStats } from './column-stats.ts'
import { connections } from './connections.ts'
import { constraints } from './constraints.ts'
import { databaseStats } from './database-stats.ts'
import { explainPlans } from './explain-plans.ts'
import { host } from './host.ts'
import { indexes } from './indexes.ts'
import { ioStats } from './io-stats.ts'
import { locks } from './locks.ts'
import { logEvents } from './log-events.ts'
import { progress } from './progress.ts'
import { queryStats } from './query-stats.ts'
import { replication } from './replication.ts'
import { tables } from './tables.ts'
import { security } from './security.ts'
import { triggers } from './triggers.ts'
import { walStats } from './wal-stats.ts'
import { waits } from './waits.ts'

export const postgresCollectors: PostgresCollector[] = [
  queryStats,
  explainPlans,
  activity,
  locks,
  waits,
  tables,
  indexes,
  replication,
  bgwriter,
  walStats,
  ioStats,
  databaseStats,
  constraints,
  bloat,
  connections,
  progress,
  columnStats,
  archiver,
  backups,
  triggers,
  security,
  host,
  logEvents,
  postgresCustomMetrics,
]
