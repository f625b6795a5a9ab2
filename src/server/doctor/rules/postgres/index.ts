// The PostgreSQL rules, one per file.
import type { Rule } from '../../types.ts'
import { archiverFailing } from './archiver.ts'
import { backupAge } from './backup-age.ts'
import { diskFill } from './disk-fill.ts'
import { cacheHitRatio } from './cache-hit-ratio.ts'
import { deadTuples } from './dead-tuples.ts'
import { autovacuumDisabled } from './autovacuum-disabled.ts'
import { unusedIndexes } from './unused-indexes.ts'
import { duplicateIndexes } from './duplicate-indexes.ts'
import { invalidIndexes } from './invalid-indexes.ts'
import { sequenceExhaustion } from './sequences.ts'
import { missingPrimaryKey } from './missing-primary-key.ts'
import { unindexedForeignKeys } from './unindexed-foreign-keys.ts'
import { sequentialScans } from './sequential-scans.ts'
import { replicationLag } from './replication-lag.ts'
import { inactiveSlots } from './inactive-slots.ts'
import { requestedCheckpoints } from './checkpoints.ts'
import { slowStatements } from './slow-statements.ts'
import { planChanged } from './plan-changed.ts'
import { statementRegressed } from './statement-regressed.ts'
import { longRunningQueries } from './long-running-queries.ts'
import { idleInTransaction } from './idle-in-transaction.ts'
import { blockedSessions } from './blocked-sessions.ts'
import { connections } from './connections.ts'
import { wraparound } from './wraparound.ts'
import { xminHorizon } from './xmin-horizon.ts'
import { riskySettings } from './risky-settings.ts'
import { deadlocks } from './deadlocks.ts'
import { tempFiles } from './temp-files.ts'
import { invalidConstraints } from './invalid-constraints.ts'
import { bloatEstimates } from './bloat.ts'
import { logErrorRate } from './log-error-rate.ts'
import { logAuthFailures } from './log-auth-failures.ts'
import { logAutovacuumCancelled } from './log-autovacuum-cancelled.ts'
import { logResourceFaults } from './log-resource-faults.ts'
import { disabledTriggers } from './disabled-triggers.ts'
import { preparedTransactions } from './prepared-transactions.ts'
import { rollbackRatio } from './rollback-ratio.ts'
import { staleStatistics } from './stale-statistics.ts'
import { walSize } from './wal-size.ts'
import { checkpointOverdue } from './checkpoint-overdue.ts'
import { securityRules } from './security/index.ts'

export const postgresRules: Rule[] = [
  cacheHitRatio,
  deadTuples,
  autovacuumDisabled,
  unusedIndexes,
  duplicateIndexes,
  invalidIndexes,
  sequenceExhaustion,
  missingPrimaryKey,
  unindexedForeignKeys,
  sequentialScans,
  replicationLag,
  inactiveSlots,
  requestedCheckpoints,
  slowStatements,
  planChanged,
  statementRegressed,
  longRunningQueries,
  idleInTransaction,
  blockedSessions,
  connections,
  wraparound,
  xminHorizon,
  riskySettings,
  deadlocks,
  tempFiles,
  invalidConstraints,
  bloatEstimates,
  archiverFailing,
  backupAge,
  diskFill,
  logErrorRate,
  logAuthFailures,
  logAutovacuumCancelled,
  logResourceFaults,
  preparedTransactions,
  disabledTriggers,
  rollbackRatio,
  staleStatistics,
  walSize,
  checkpointOverdue,
  ...securityRules,
]
