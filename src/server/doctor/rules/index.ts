// Every doctor rule, in the order findings of equal severity are listed. One rule per file.
import type { Rule } from '../types.ts'
import { agentDisconnected } from './agent-disconnected.ts'
import { agentClockSkew } from './agent-clock.ts'
import { databaseUnreachable } from './database-unreachable.ts'
import { hostMemoryPressure } from './host-memory.ts'
import { customMetricThreshold } from './custom-metric-threshold.ts'
import { serverRestarted } from './server-restart.ts'
import { serverVersionChanged } from './server-version.ts'
import { settingChanged } from './setting-changes.ts'
import { postgresRules } from './postgres/index.ts'
import { clickhouseRules } from './clickhouse/index.ts'

export const rules: Rule[] = [
  databaseUnreachable,
  agentDisconnected,
  agentClockSkew,
  serverRestarted,
  serverVersionChanged,
  settingChanged,
  ...postgresRules,
  ...clickhouseRules,
  hostMemoryPressure,
  customMetricThreshold,
]
