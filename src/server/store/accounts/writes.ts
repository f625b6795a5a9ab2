// Changes to accounts (accounts/types.ts AccountWrites): signup, passwords, e-mail tokens, refresh
// tokens and sessions, and the rate limits every process on the store shares. Changes that must not
// race each other take a lock (signup, a user's e-mail tokens, a user's refresh tokens, a rate key).
import type { SqlDriver } from '../driver.ts'
import { num } from '../rows.ts'
import {
  type AccountWrites,
  EmailTakenError,
  type EmailTokenKind,
  type LimitResult,
  type Organization,
  type RotateResult,
  SignupClosedError,
  type User,
} from './types.ts'

/** The lock held while a user's e-mail tokens are replaced. */
const emailTokensLock = (userId: string) => `dbm:email-tokens:${userId}`

/** Removes the user's reset tokens that were never used (a newer one replaces them, or one was used). */
function dropUnusedResetTokens(tx: SqlDriver, userId: string) {
  return tx.run("DELETE FROM email_tokens WHERE user_id = $1 AND kind = 'reset' AND used_at IS NULL", [userId])
}

/** The lock every write to one user's refresh tokens takes, so a revocation never misses a rotation. */
function refreshLock(userId: string) {
  return `dbm:refresh:${userId}`
}

async function refreshTokenOwner(driver: SqlDriver, id: string): Promise<string | undefined> {
  // A token's owner never changes, so reading it before taking the owner's lock is safe.
  return (await driver.get<{ user_id: string }>('SELECT user_id FROM refresh_tokens WHERE id = $1', [id]))?.user_id
}

export function accountWrites(driver: SqlDriver): AccountWrites {
  const writes: AccountWrites = {
    async createAccount(input: Parameters<AccountWrites['createAccount']>[0]) {
      const now = Date.now()
      return driver.transaction(async (tx) => {
        if (input.onlyFirst && (await tx.get('SELECT 1 AS x FROM organizations LIMIT 1'))) throw new SignupClosedError()
        if (await tx.get('SELECT 1 AS x FROM users WHERE email = $1', [input.user.email])) throw new EmailTakenError()
        const taken = new Set(
          (
            await tx.all<{ slug: string }>('SELECT slug FROM organizations WHERE slug = $1 OR slug LIKE $2', [
              input.org.slug,
              `${input.org.slug}-%`,
            ])
          ).map((r) => r.slug),
        )
        let slug = input.org.slug
        for (let n = 2; taken.has(slug); n++) slug = `${input.org.slug}-${n}`
        const org: Organization = {
          id: Bun.randomUUIDv7(),
          name: input.org.name,
          slug,
          plan: input.org.plan,
          verified: false,
          created_at: now,
        }
        await tx.run(
          'INSERT INTO organizations (id, name, slug, plan, verified, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
          [org.id, org.name, org.slug, org.plan, false, now],
        )
        const user: User = {
          id: Bun.randomUUIDv7(),
          org_id: org.id,
          email: input.user.email,
          name: input.user.name,
          role: input.user.role,
          email_verified_at: null,
          created_at: now,
        }
        await tx.run(
          'INSERT INTO users (id, org_id, email, name, role, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
          [user.id, org.id, user.email, user.name, user.role, input.user.passwordHash, now],
        )
        return { org, user }
      }, 'dbm:signup')
    },

    async setPassword(userId: string, passwordHash: string) {
      await driver.run('UPDATE users SET password_hash = $1 WHERE id = $2', [passwordHash, userId])
    },

    async markEmailVerified(userId: string, at: number) {
      await driver.transaction(async (tx) => {
        await tx.run('UPDATE users SET email_verified_at = COALESCE(email_verified_at, $1) WHERE id = $2', [at, userId])
        await tx.run('UPDATE organizations SET verified = $1 WHERE id = (SELECT org_id FROM users WHERE id = $2)', [
          true,
          userId,
        ])
      })
    },

    async createEmailToken(input: {
      tokenHash: string
      userId: string
      kind: EmailTokenKind
      expiresAt: number
      now: number
    }) {
      await driver.transaction(async (tx) => {
        // Only the newest reset link works: the older unused ones are removed.
        if (input.kind === 'reset') await dropUnusedResetTokens(tx, input.userId)
        await tx.run(
          'INSERT INTO email_tokens (token_hash, user_id, kind, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)',
          [input.tokenHash, input.userId, input.kind, input.expiresAt, input.now],
        )
      }, emailTokensLock(input.userId))
    },

    async consumeEmailToken(tokenHash: string, kind: EmailTokenKind, now: number) {
      const consume = (d: SqlDriver) =>
        d.get<{ user_id: string }>(
          `UPDATE email_tokens SET used_at = $1
           WHERE token_hash = $2 AND kind = $3 AND used_at IS NULL AND expires_at > $1
           RETURNING user_id`,
          [now, tokenHash, kind],
        )
      if (kind !== 'reset') return (await consume(driver))?.user_id
      return driver.transaction(async (tx) => {
        const r = await consume(tx)
        // A used reset link ends every other one of that user (links issued before this rule, say).
        if (r) await dropUnusedResetTokens(tx, r.user_id)
        return r?.user_id
      })
    },

    async createRefreshToken(record: {
      id: string
      user_id: string
      family_id: string
      expires_at: number
      now: number
    }) {
      await driver.run(
        'INSERT INTO refresh_tokens (id, user_id, family_id, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)',
        [record.id, record.user_id, record.family_id, record.expires_at, record.now],
      )
    },

    async rotateRefreshToken(id: string, next: { id: string; expires_at: number }, now: number): Promise<RotateResult> {
      const owner = await refreshTokenOwner(driver, id)
      if (!owner) return { ok: false, reason: 'unknown' }
      return driver.transaction(async (tx) => {
        const row = await tx.get<{
          user_id: string
          family_id: string
          expires_at: number
          revoked_at: number | null
          replaced_by: string | null
        }>('SELECT user_id, family_id, expires_at, revoked_at, replaced_by FROM refresh_tokens WHERE id = $1', [id])
        if (!row) return { ok: false, reason: 'unknown' } as const
        if (row.revoked_at !== null && row.replaced_by === null) return { ok: false, reason: 'revoked' } as const
        if (row.revoked_at !== null) {
          // A token that was already rotated is being replayed, perhaps by whoever stole it: end its
          // session, with every access token issued to it (the user's other sessions go on).
          await tx.run('UPDATE refresh_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL', [
            now,
            row.family_id,
          ])
          return { ok: false, reason: 'reused' } as const
        }
        if (num(row.expires_at) <= now) return { ok: false, reason: 'expired' } as const
        await tx.run('UPDATE refresh_tokens SET revoked_at = $1, replaced_by = $2 WHERE id = $3', [now, next.id, id])
        await tx.run(
          'INSERT INTO refresh_tokens (id, user_id, family_id, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)',
          [next.id, row.user_id, row.family_id, next.expires_at, now],
        )
        return { ok: true, userId: row.user_id, sessionId: row.family_id } as const
      }, refreshLock(owner))
    },

    async revokeRefreshToken(id: string, now: number) {
      const owner = await refreshTokenOwner(driver, id)
      if (!owner) return
      await driver.transaction(
        (tx) => tx.run('UPDATE refresh_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, id]),
        refreshLock(owner),
      )
    },

    async revokeSession(userId: string, sessionId: string, now: number) {
      await driver.transaction(
        (tx) =>
          tx.run(
            'UPDATE refresh_tokens SET revoked_at = $1 WHERE family_id = $2 AND user_id = $3 AND revoked_at IS NULL',
            [now, sessionId, userId],
          ),
        refreshLock(userId),
      )
    },

    async revokeUserSessions(userId: string, now: number) {
      await driver.transaction(
        (tx) =>
          tx.run('UPDATE refresh_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL', [now, userId]),
        refreshLock(userId),
      )
    },

    async hitRateLimit(key: string, limit: number, windowMs: number, now: number): Promise<LimitResult> {
      return driver.transaction(async (tx) => {
        await tx.run('DELETE FROM rate_events WHERE key = $1 AND at <= $2', [key, now - windowMs])
        const r = await tx.get<{ n: number; oldest: number | null }>(
          'SELECT COUNT(*) AS n, MIN(at) AS oldest FROM rate_events WHERE key = $1',
          [key],
        )
        if (num(r?.n ?? 0) >= limit) {
          return { allowed: false, retryAfterMs: Math.max(1, num(r?.oldest ?? now) + windowMs - now) }
        }
        await tx.run('INSERT INTO rate_events (key, at) VALUES ($1, $2)', [key, now])
        return { allowed: true, retryAfterMs: 0 }
      }, `dbm:rate:${key}`)
    },

    async takeCooldown(key: string, cooldownMs: number, now: number): Promise<LimitResult> {
      return writes.hitRateLimit(key, 1, cooldownMs, now)
    },

    /** Removes rate-limit events older than `before` (housekeeping; keys never seen again). */
    async sweepRateEvents(before: number) {
      return driver.run('DELETE FROM rate_events WHERE at < $1', [before])
    },
  }
  return writes
}
