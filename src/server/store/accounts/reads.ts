// Reads of organizations, users, e-mail tokens and sessions (accounts/types.ts AccountReads).
import type { SqlDriver } from '../driver.ts'
import { USER_COLUMNS, toOrg, toUser } from './rows.ts'
import type { AccountReads, EmailTokenKind, UserWithPassword } from './types.ts'

export function accountReads(driver: SqlDriver): AccountReads {
  return {
    async findUserByEmail(email: string) {
      const r = await driver.get(`SELECT ${USER_COLUMNS}, password_hash FROM users WHERE email = $1`, [email])
      return r ? ({ ...toUser(r), password_hash: String(r.password_hash) } as UserWithPassword) : undefined
    },

    async getUser(id: string) {
      const r = await driver.get(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [id])
      return r ? toUser(r) : undefined
    },

    async getSessionUser(userId: string, sessionId: string) {
      // Rotation revokes a family's newest token and inserts its successor in one transaction, so a live
      // session always shows exactly one unrevoked token to any reader.
      const r = await driver.get(
        `SELECT ${USER_COLUMNS} FROM users WHERE users.id = $1
           AND EXISTS (SELECT 1 FROM refresh_tokens WHERE family_id = $2 AND user_id = $1 AND revoked_at IS NULL)`,
        [userId, sessionId],
      )
      return r ? toUser(r) : undefined
    },

    async hasOrganization() {
      return (await driver.get('SELECT 1 AS x FROM organizations LIMIT 1', [])) !== undefined
    },

    async getOrganization(id: string) {
      const r = await driver.get('SELECT id, name, slug, plan, verified, created_at FROM organizations WHERE id = $1', [
        id,
      ])
      return r ? toOrg(r) : undefined
    },

    async usedEmailTokenUser(tokenHash: string, kind: EmailTokenKind) {
      const r = await driver.get<{ user_id: string }>(
        'SELECT user_id FROM email_tokens WHERE token_hash = $1 AND kind = $2 AND used_at IS NOT NULL',
        [tokenHash, kind],
      )
      return r?.user_id
    },
  }
}
