// The ClickHouse rules, one per file (load.ts holds the two load rules: queries and connections against
// their limits; users.ts the two security rules on users: without a password, open to every network).
import type { Rule } from '../../types.ts'
import { bufferFlush } from './buffer-flush.ts'
import { delayedInserts } from './delayed-inserts.ts'
import { detachedParts } from './detached-parts.ts'
import { diskSpace } from './disk-space.ts'
import { distributed } from './distributed.ts'
import { fileIo } from './file-io.ts'
import { failedQueries } from './failed-queries.ts'
import { keeper } from './keeper.ts'
import { logErrorRate } from './log-error-rate.ts'
import { connections, runningQueries } from './load.ts'
import { longMerges } from './long-merges.ts'
import { longRunningQueries } from './long-running-queries.ts'
import { memory } from './memory.ts'
import { dnsErrors } from './network.ts'
import { partsPerPartition } from './parts-per-partition.ts'
import { queryP99 } from './query-p99.ts'
import { queuedMutations } from './queued-mutations.ts'
import { replication } from './replication.ts'
import { replicationErrors } from './replication-errors.ts'
import { slowReads } from './slow-reads.ts'
import { smallInserts } from './small-inserts.ts'
import { stuckMutations } from './stuck-mutations.ts'
import { totalParts } from './total-parts.ts'
import { usersOpenToEveryNetwork, usersWithoutPassword } from './users.ts'

export const clickhouseRules: Rule[] = [
  partsPerPartition,
  smallInserts,
  delayedInserts,
  totalParts,
  stuckMutations,
  queuedMutations,
  longMerges,
  memory,
  diskSpace,
  replication,
  detachedParts,
  failedQueries,
  logErrorRate,
  queryP99,
  longRunningQueries,
  // ClickHouse's error signals (system.events / system.metrics; see signals.ts).
  distributed,
  replicationErrors,
  keeper,
  bufferFlush,
  fileIo,
  dnsErrors,
  slowReads,
  runningQueries,
  connections,
  // Security advisors (system.users).
  usersWithoutPassword,
  usersOpenToEveryNetwork,
]
