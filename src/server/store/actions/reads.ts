// Reads of actions: one action, the database's latest, how many wait, and what the agent allows.
import type { SqlDriver } from '../driver.ts'
import { COLUMNS, RUNNING_GRACE_MS, readListener, toAction } from './rows.ts'
import type { ActionListener, ActionReads, StoredAction } from './types.ts'
import type { DbRow } from '../rows.ts'

export function actionReads(driver: SqlDriver): ActionReads {
  return {
    async getAction(orgId: string, databaseId: string, id: string, now: number): Promise<StoredAction | undefined> {
      const r = await driver.get(`SELECT ${COLUMNS} FROM actions WHERE id = $1 AND org_id = $2 AND database_id = $3`, [
        id,
        orgId,
        databaseId,
      ])
      if (!r) return undefined
      const action = toAction(r)
      // A running one gets its grace before it reads as expired.
      return toAction(r, action.state === 'running' ? now - RUNNING_GRACE_MS : now)
    },

    async listActions(databaseId: string, limit: number, now: number): Promise<StoredAction[]> {
      const rows = await driver.all(
        `SELECT ${COLUMNS} FROM actions WHERE database_id = $1 ORDER BY requested_at DESC, id LIMIT $2`,
        [databaseId, limit],
      )
      return rows.map((r: DbRow) => toAction(r, r.state === 'running' ? now - RUNNING_GRACE_MS : now))
    },

    async pendingActions(databaseId: string, now: number): Promise<number> {
      const r = await driver.get<{ n: unknown }>(
        "SELECT COUNT(*) AS n FROM actions WHERE database_id = $1 AND state = 'pending' AND expires_at > $2",
        [databaseId, now],
      )
      return Number(r?.n ?? 0)
    },

    async actionListener(databaseId: string): Promise<ActionListener | undefined> {
      const r = await driver.get<{ allowed: string; heard_at: unknown }>(
        'SELECT allowed, heard_at FROM action_listeners WHERE database_id = $1',
        [databaseId],
      )
      return r ? readListener(r) : undefined
    },

    async actionAgentKey(orgId: string, id: string): Promise<string | null | undefined> {
      const r = await driver.get<{ allowed: string | null; heard_at: unknown }>(
        "SELECT l.allowed, l.heard_at FROM actions a LEFT JOIN action_listeners l ON l.database_id = a.database_id WHERE a.id = $1 AND a.org_id = $2 AND a.state = 'running'",
        [id, orgId],
      )
      if (!r) return undefined
      return r.allowed === null ? null : readListener({ allowed: r.allowed, heard_at: r.heard_at }).agent_key_id
    },
  }
}
