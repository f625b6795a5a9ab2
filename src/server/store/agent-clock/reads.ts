// Reads of the agents' clock offsets (types.ts says how they are measured and kept).
import type { SqlDriver } from '../driver.ts'
import { num } from '../rows.ts'
import type { AgentClock, AgentClockReads } from './types.ts'

export function agentClockReads(driver: SqlDriver): AgentClockReads {
  return {
    async agentClock(databaseId: string): Promise<AgentClock | undefined> {
      const row = await driver.get<{ offset_ms: unknown; measured_at: unknown }>(
        'SELECT offset_ms, measured_at FROM agent_clocks WHERE database_id = $1',
        [databaseId],
      )
      return row ? { offset_ms: num(row.offset_ms), measured_at: num(row.measured_at) } : undefined
    },
  }
}
