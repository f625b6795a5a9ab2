// Writes of actions: asking (within the pending limit, under the database's actions lock), claiming,
// finishing, expiring, the agent's listener, the audit event; and which rows retention sweeps.
import { actionClass } from '../../../shared/action-kinds.ts'
import type { ActionKind } from '../../../shared/wire.ts'
import { num } from '../rows.ts'
import type { SqlDriver } from '../driver.ts'
import { recordEventsNow } from '../events/record.ts'
import type { DbEvent } from '../events/types.ts'
import {
  COLUMNS,
  KEY_TOKEN,
  RUNNING_GRACE_MS,
  expiryReason,
  killsFirst,
  lateResult,
  readListener,
  toAction,
} from './rows.ts'
import type {
  ActionAdmission,
  ActionResult,
  ActionWrites,
  ListenerAdmission,
  NewAction,
  StoredAction,
} from './types.ts'

export function actionWrites(driver: SqlDriver): ActionWrites {
  return {
    createAction(a: NewAction, maxPending: number): Promise<ActionAdmission> {
      // One process at a time per database between the count and the insert (an advisory lock on PostgreSQL;
      // SQLite's transactions are exclusive already).
      return driver.transaction(async (tx) => {
        const kind = actionClass(a.kind)
        const waiting = await tx.get<{ n: unknown; first: unknown }>(
          `SELECT COUNT(*) AS n, MIN(expires_at) AS first FROM actions
           WHERE database_id = $1 AND state = 'pending' AND expires_at > $2 AND (CASE WHEN kind = 'explain' THEN 'explain' ELSE 'kill' END) = $3`,
          [a.database_id, a.requested_at, kind],
        )
        const pending = Number(waiting?.n ?? 0)
        if (pending >= maxPending) return { full: { class: kind, pending, next_expiry: num(waiting?.first) } }
        await tx.run(
          `INSERT INTO actions (id, org_id, database_id, kind, state, request, requested_by, requested_at, expires_at) VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8)`,
          [
            a.id,
            a.org_id,
            a.database_id,
            a.kind,
            JSON.stringify(a.request),
            a.requested_by,
            a.requested_at,
            a.expires_at,
          ],
        )
        return { created: { ...a, state: 'pending', claimed_at: null, finished_at: null, result: null } }
      }, `dbm:actions:${a.database_id}`)
    },

    async claimActions(databaseId: string, now: number, limit: number): Promise<StoredAction[]> {
      // The state is checked again on the row being updated: of two processes claiming at once, one wins.
      // Kills first: a queue of explains never keeps a cancel or terminate out of the agent's batch.
      const rows = await driver.all(
        `UPDATE actions SET state = 'running', claimed_at = $2
         WHERE id IN (SELECT id FROM actions WHERE database_id = $1 AND state = 'pending' AND expires_at > $2
                      ORDER BY CASE WHEN kind = 'explain' THEN 1 ELSE 0 END, requested_at, id LIMIT $3)
           AND state = 'pending' AND expires_at > $2
         RETURNING ${COLUMNS}`,
        [databaseId, now, limit],
      )
      return rows.map((r) => toAction(r)).sort(killsFirst)
    },

    async finishAction(
      orgId: string,
      id: string,
      result: ActionResult,
      now: number,
    ): Promise<StoredAction | undefined> {
      const row = await driver.get<{ expires_at: unknown }>(
        `SELECT expires_at FROM actions WHERE id = $1 AND org_id = $2 AND state = 'running'`,
        [id, orgId],
      )
      if (!row) return undefined
      const lateBy = now - num(row.expires_at)
      const recorded: ActionResult = lateBy > 0 && result.outcome !== 'expired' ? lateResult(result, lateBy) : result
      // Still running on the row being updated: of two results at once, one is taken.
      const rows = await driver.all(
        `UPDATE actions SET state = $3, result = $4, finished_at = $5 WHERE id = $1 AND org_id = $2 AND state = 'running' RETURNING ${COLUMNS}`,
        [id, orgId, recorded.outcome, JSON.stringify(recorded), now],
      )
      return rows[0] ? toAction(rows[0]) : undefined
    },

    async expireActions(databaseId: string, now: number): Promise<StoredAction[]> {
      // Called every second by each waiting long-poll: a read first, so that nothing is written (on SQLite,
      // no write lock taken) unless something is overdue.
      const overdue = await driver.get(
        "SELECT 1 AS x FROM actions WHERE database_id = $1 AND ((state = 'pending' AND expires_at <= $2) OR (state = 'running' AND expires_at <= $3)) LIMIT 1",
        [databaseId, now, now - RUNNING_GRACE_MS],
      )
      if (!overdue) return []
      const out: StoredAction[] = []
      for (const state of ['pending', 'running'] as const) {
        const before = state === 'pending' ? now : now - RUNNING_GRACE_MS
        const result = JSON.stringify({ outcome: 'expired', reason: expiryReason(state) })
        const rows = await driver.all(
          `UPDATE actions SET state = 'expired', result = $3, finished_at = $4 WHERE database_id = $1 AND state = '${state}' AND expires_at <= $2 RETURNING ${COLUMNS}`,
          [databaseId, before, result, now],
        )
        out.push(...rows.map((r) => toAction(r)))
      }
      return out
    },

    heardListener(
      databaseId: string,
      agentKeyId: string,
      allowed: readonly ActionKind[],
      now: number,
      silentBefore: number,
    ): Promise<ListenerAdmission> {
      // Read and write under the database's actions lock: of two keys asking at once, one is the agent's.
      return driver.transaction(async (tx) => {
        const r = await tx.get<{ allowed: string; heard_at: unknown }>(
          'SELECT allowed, heard_at FROM action_listeners WHERE database_id = $1',
          [databaseId],
        )
        const current = r ? readListener(r) : undefined
        if (current?.agent_key_id && current.agent_key_id !== agentKeyId && current.heard_at > silentBefore) {
          return { own: false, agent_key_id: current.agent_key_id, heard_at: current.heard_at }
        }
        await tx.run(
          `INSERT INTO action_listeners (database_id, allowed, heard_at) VALUES ($1, $2, $3)
           ON CONFLICT (database_id) DO UPDATE SET allowed = excluded.allowed, heard_at = excluded.heard_at`,
          [databaseId, [...allowed, `${KEY_TOKEN}${agentKeyId}`].join(' '), now],
        )
        return {
          own: true,
          took_over_from: current?.agent_key_id && current.agent_key_id !== agentKeyId ? current.agent_key_id : null,
        }
      }, `dbm:actions:${databaseId}`)
    },

    auditAction(databaseId: string, event: DbEvent): Promise<void> {
      return recordEventsNow(driver, databaseId, [event])
    },
  }
}

/**
 * The actions retention (retention/retention.ts) deletes from a database, with the parameters of its cutoff: those
 * asked before it that are over, finished or expired before it (a running one with its grace), so that no
 * expiry goes before it was swept and audited.
 */
export function sweptActions(databaseId: string, before: number): { where: string; params: unknown[] } {
  return {
    where:
      "database_id = $1 AND requested_at < $2 AND (state IN ('done', 'refused', 'failed', 'expired') OR expires_at < $3)",
    params: [databaseId, before, before - RUNNING_GRACE_MS],
  }
}
