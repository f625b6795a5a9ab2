// An organization's members (its users and their roles) and its invites (migration 13), for
// routes/organization.ts. Removing or demoting a user also revokes, in the same transaction, the API
// keys they created (and the keys made with those): an ex-owner keeps no access through a key. Every write that changes who is in an organization, or who owns it, runs under
// the organization's members lock (an advisory lock on PostgreSQL; SQLite transactions are exclusive), so
// two owners demoting or removing each other at once never leave the organization without an owner, and
// an address has at most one pending invite per organization. An accepted invite creates the user with
// the invite's role and its address verified (an invited owner's verifies the organization); a removed user's row is deleted, which ends their sessions
// (refresh tokens cascade, access tokens need a live session) and revokes the invites they sent. A
// demoted owner's pending invites are revoked too, and an invite is accepted only while its inviter is
// still an owner of the organization: a demoted owner cannot make themselves owner again through an
// invite they sent before (to a second address of their own, say).
import { num, type DbRow } from '../rows.ts'
import { toOrg, toUser } from './rows.ts'
import { type SqlDriver, UniqueViolation } from '../driver.ts'
import { membersLock, revokeKeysCreatedBy } from './api-keys.ts'
import type { Organization, User } from './types.ts'

export type MemberRole = 'owner' | 'member'
export const MEMBER_ROLES = ['owner', 'member'] as const satisfies readonly MemberRole[]

export interface Invite {
  id: string
  org_id: string
  email: string
  role: MemberRole
  invited_by: string | null
  /** The inviter's name as it is now (null once that user is gone). */
  invited_by_name: string | null
  created_at: number
  expires_at: number
}

/** Why a member change was refused. */
export type MemberRefusal = 'not_found' | 'last_owner'

export interface MembersReads {
  /** The organization's users, oldest first. */
  listMembers(orgId: string): Promise<User[]>
  /** The organization's pending invites (neither accepted, revoked nor expired), newest first. */
  listInvites(orgId: string, now: number): Promise<Invite[]>
}

/** An invitation to create: who is invited, as what, by whom, and its token's hash. */
export interface NewInvite {
  orgId: string
  email: string
  role: MemberRole
  tokenHash: string
  invitedBy: string
  now: number
  expiresAt: number
}

export interface MembersWrites {
  createInvite(input: NewInvite): Promise<Invite | 'registered'>
  revokeInvite(orgId: string, id: string, now: number): Promise<'revoked' | 'not_found' | 'accepted'>
  acceptInvite(input: {
    tokenHash: string
    name: string
    passwordHash: string
    now: number
  }): Promise<{ org: Organization; user: User } | 'invalid' | 'registered'>
  removeMember(orgId: string, userId: string, now: number): Promise<'removed' | MemberRefusal>
  setMemberRole(orgId: string, userId: string, role: MemberRole, now: number): Promise<User | MemberRefusal>
}

export interface MembersStore extends MembersReads, MembersWrites {}

/** The lock routes of the user's refresh tokens take (sql-store.ts refreshLock), so no rotation outlives a removal. */
const refreshLock = (userId: string) => `dbm:refresh:${userId}`

const INVITE_SELECT = `SELECT i.id, i.org_id, i.email, i.role, i.invited_by, u.name AS invited_by_name, i.created_at, i.expires_at
  FROM invites i LEFT JOIN users u ON u.id = i.invited_by`
const USER_COLUMNS = 'id, org_id, email, name, role, email_verified_at, created_at'

function toInvite(r: DbRow): Invite {
  return {
    id: r.id,
    org_id: r.org_id,
    email: r.email,
    role: r.role,
    invited_by: r.invited_by ?? null,
    invited_by_name: r.invited_by_name ?? null,
    created_at: num(r.created_at),
    expires_at: num(r.expires_at),
  }
}

/** The organization's owners other than `userId`. */
async function otherOwners(tx: SqlDriver, orgId: string, userId: string): Promise<number> {
  const r = await tx.get<{ n: number }>(
    "SELECT COUNT(*) AS n FROM users WHERE org_id = $1 AND role = 'owner' AND id <> $2",
    [orgId, userId],
  )
  return num(r?.n ?? 0)
}

/**
 * `keysRevoked`: told the key_ids of the API keys a removal or demotion revoked, once its transaction
 * committed (the SQLite store drops them from its key cache).
 */
export function membersStore(driver: SqlDriver, keysRevoked: (keyIds: string[]) => void = () => {}): MembersStore {
  return {
    /** The organization's users, oldest first. */
    async listMembers(orgId: string): Promise<User[]> {
      const rows = await driver.all(`SELECT ${USER_COLUMNS} FROM users WHERE org_id = $1 ORDER BY created_at, id`, [
        orgId,
      ])
      return rows.map(toUser)
    },

    /**
     * Records an invite of `email` to the organization, replacing (revoking) a pending one of the same
     * address; 'registered' when the address already has an account (anywhere on the server).
     */
    async createInvite(input: NewInvite): Promise<Invite | 'registered'> {
      return driver.transaction(async (tx) => {
        if (await tx.get('SELECT 1 AS x FROM users WHERE email = $1', [input.email])) return 'registered'
        await tx.run(
          'UPDATE invites SET revoked_at = $1 WHERE org_id = $2 AND email = $3 AND accepted_at IS NULL AND revoked_at IS NULL',
          [input.now, input.orgId, input.email],
        )
        const id = Bun.randomUUIDv7()
        await tx.run(
          'INSERT INTO invites (id, org_id, email, role, token_hash, invited_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
          [id, input.orgId, input.email, input.role, input.tokenHash, input.invitedBy, input.now, input.expiresAt],
        )
        return toInvite((await tx.get<DbRow>(`${INVITE_SELECT} WHERE i.id = $1`, [id]))!)
      }, membersLock(input.orgId))
    },

    /** The organization's pending invites (neither accepted, revoked nor expired), newest first. */
    async listInvites(orgId: string, now: number): Promise<Invite[]> {
      const rows = await driver.all(
        `${INVITE_SELECT} WHERE i.org_id = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > $2 ORDER BY i.created_at DESC, i.id`,
        [orgId, now],
      )
      return rows.map(toInvite)
    },

    /**
     * Revokes the organization's invite `id` (idempotent); 'not_found' when the organization has no
     * such invite, 'accepted' when it was already used (the user is a member now).
     */
    async revokeInvite(orgId: string, id: string, now: number): Promise<'revoked' | 'not_found' | 'accepted'> {
      return driver.transaction(async (tx) => {
        const row = await tx.get<{ accepted_at: number | null }>(
          'SELECT accepted_at FROM invites WHERE id = $1 AND org_id = $2',
          [id, orgId],
        )
        if (!row) return 'not_found'
        if (row.accepted_at !== null) return 'accepted'
        await tx.run('UPDATE invites SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, id])
        return 'revoked'
      }, membersLock(orgId))
    },

    /**
     * Uses the invite whose token hashes to `tokenHash`: creates its user (the invite's role, the address
     * verified; an owner's verifies the organization too, as an owner's verification mail does) and marks
     * it accepted, once.
     * 'invalid' when no pending, unexpired invite has that token, or its inviter is no longer an owner of
     * the organization; 'registered' when its address got an
     * account meanwhile (the invite stays unused).
     */
    async acceptInvite(input: {
      tokenHash: string
      name: string
      passwordHash: string
      now: number
    }): Promise<{ org: Organization; user: User } | 'invalid' | 'registered'> {
      const found = await driver.get<{ org_id: string }>('SELECT org_id FROM invites WHERE token_hash = $1', [
        input.tokenHash,
      ])
      if (!found) return 'invalid'
      try {
        return await driver.transaction(async (tx) => {
          const invite = await tx.get<{
            id: string
            org_id: string
            email: string
            role: string
            invited_by: string | null
          }>(
            'SELECT id, org_id, email, role, invited_by FROM invites WHERE token_hash = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $2',
            [input.tokenHash, input.now],
          )
          if (!invite) return 'invalid' as const
          // Only an owner's invite lets anyone in: its inviter must still be an owner of the organization
          // (a demotion or removal revokes their invites as well; this holds whatever revoked them or not).
          const inviterOwns =
            invite.invited_by !== null &&
            (await tx.get("SELECT 1 AS x FROM users WHERE id = $1 AND org_id = $2 AND role = 'owner'", [
              invite.invited_by,
              invite.org_id,
            ]))
          if (!inviterOwns) return 'invalid' as const
          if (await tx.get('SELECT 1 AS x FROM users WHERE email = $1', [invite.email])) return 'registered' as const
          const user: User = {
            id: Bun.randomUUIDv7(),
            org_id: invite.org_id,
            email: invite.email,
            name: input.name,
            role: invite.role,
            email_verified_at: input.now,
            created_at: input.now,
          }
          await tx.run(
            'INSERT INTO users (id, org_id, email, name, role, password_hash, email_verified_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
            [user.id, user.org_id, user.email, user.name, user.role, input.passwordHash, input.now, input.now],
          )
          await tx.run('UPDATE invites SET accepted_at = $1, accepted_by = $2 WHERE id = $3', [
            input.now,
            user.id,
            invite.id,
          ])
          // An owner who verified their address verifies the organization (as the verification mail does).
          if (invite.role === 'owner')
            await tx.run('UPDATE organizations SET verified = $1 WHERE id = $2', [true, invite.org_id])
          const org = await tx.get<DbRow>(
            'SELECT id, name, slug, plan, verified, created_at FROM organizations WHERE id = $1',
            [invite.org_id],
          )
          return {
            org: toOrg(org!),
            user,
          }
        }, membersLock(found.org_id))
      } catch (e) {
        // A signup of the same address that committed between the check and the insert.
        if (e instanceof UniqueViolation) return 'registered'
        throw e
      }
    },

    /**
     * Removes the organization's user `userId`: their row (sessions and tokens go with it), the pending
     * invites they sent and the API keys they created. Never the organization's last owner.
     */
    async removeMember(orgId: string, userId: string, now: number): Promise<'removed' | MemberRefusal> {
      let revoked: string[] = []
      const outcome = await driver.transaction(async (tx) => {
        const user = await tx.get<{ role: string }>('SELECT role FROM users WHERE id = $1 AND org_id = $2', [
          userId,
          orgId,
        ])
        if (!user) return 'not_found'
        if (user.role === 'owner' && (await otherOwners(tx, orgId, userId)) === 0) return 'last_owner'
        await tx.run(
          'UPDATE invites SET revoked_at = $1 WHERE invited_by = $2 AND accepted_at IS NULL AND revoked_at IS NULL',
          [now, userId],
        )
        revoked = await revokeKeysCreatedBy(tx, orgId, userId, now)
        // Also under the user's refresh lock: a rotation in flight finishes before the row goes.
        await tx.transaction((inner) => inner.run('DELETE FROM users WHERE id = $1', [userId]), refreshLock(userId))
        return 'removed'
      }, membersLock(orgId))
      keysRevoked(revoked)
      return outcome
    },

    /**
     * Gives the organization's user `userId` the role; never demotes the last owner. A demoted owner's
     * pending invites and the API keys they created are revoked with the demotion: only owners invite
     * and manage keys.
     */
    async setMemberRole(orgId: string, userId: string, role: MemberRole, now: number): Promise<User | MemberRefusal> {
      let revoked: string[] = []
      const outcome = await driver.transaction(async (tx): Promise<User | MemberRefusal> => {
        const user = await tx.get(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1 AND org_id = $2`, [userId, orgId])
        if (!user) return 'not_found'
        const demoted = user.role === 'owner' && role !== 'owner'
        if (demoted && (await otherOwners(tx, orgId, userId)) === 0) return 'last_owner'
        if (user.role !== role) await tx.run('UPDATE users SET role = $1 WHERE id = $2', [role, userId])
        if (demoted) {
          await tx.run(
            'UPDATE invites SET revoked_at = $1 WHERE org_id = $2 AND invited_by = $3 AND accepted_at IS NULL AND revoked_at IS NULL',
            [now, orgId, userId],
          )
          revoked = await revokeKeysCreatedBy(tx, orgId, userId, now)
        }
        return toUser({ ...user, role })
      }, membersLock(orgId))
      keysRevoked(revoked)
      return outcome
    },
  }
}
