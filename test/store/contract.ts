// The store contract: one suite of behaviour every Store backend must show, registered by
// store.test.ts for SQLite and PostgreSQL (and a PostgreSQL database of another collation). Each
// registration opens one fresh store; tests stay independent by creating their own accounts and
// using their own rate-limit keys.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { UniqueViolation } from '../../src/server/store/driver.ts'
import { openStore } from '../../src/server/store/open.ts'
import { EmailTakenError } from '../../src/server/store/accounts/types.ts'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import type {
  ApiKey,
  ApiKeyScope,
  NewDatabase,
  Organization,
  RotateResult,
  User,
} from '../../src/server/store/types.ts'
import { type StoreKind, freshStoreLocation, storeKinds } from '../support/server.ts'

/** A fixed point in time (2026-11-01T00:00:00Z) that the tests move from explicitly. */
const T0 = Date.UTC(2026, 10, 1)
const MINUTE = 60_000
const HOUR = 60 * MINUTE

export type StoreLocation = Awaited<ReturnType<typeof freshStoreLocation>>

export interface ContractOptions {
  /** Shown after the kind in the describe title. */
  label?: string
  /** Where to open the store; default a fresh location of `kind`. */
  location?: () => Promise<StoreLocation>
}

export function storeContract(kind: StoreKind, options: ContractOptions = {}): void {
  if (!storeKinds.includes(kind)) return // narrowed away for a local run (DBM_TEST_STORES)
  describe(`store contract (${kind}${options.label ? `, ${options.label}` : ''})`, () => {
    let store: SqlStore
    let cleanup = () => {}

    beforeAll(async () => {
      const location = await (options.location ?? (() => freshStoreLocation(kind)))()
      cleanup = location.cleanup
      store = (await openStore(location)).store
    })
    afterAll(async () => {
      await store?.close()
      cleanup()
    })

    let counter = 0
    /** A name no other test of this store used. */
    const unique = (prefix: string) => `${prefix}-${++counter}-${Math.random().toString(36).slice(2, 8)}`

    const newAccount = (overrides: { slug?: string; email?: string; plan?: string } = {}) =>
      store.createAccount({
        org: { name: 'Acme Inc', slug: overrides.slug ?? unique('org'), plan: overrides.plan ?? 'free' },
        user: {
          email: overrides.email ?? `${unique('user')}@example.com`,
          name: 'Ada',
          passwordHash: 'hash-1',
          role: 'owner',
        },
      })

    const pgInput = (name: string, overrides: Partial<NewDatabase> = {}): NewDatabase => ({
      name,
      engine: 'postgres',
      engine_version: '17.2',
      host: 'db1.internal',
      port: 5432,
      tags: { env: 'prod' },
      ...overrides,
    })

    test('reports its dialect', () => {
      expect(store.dialect).toBe(kind)
    })

    describe('accounts', () => {
      test('createAccount returns an unverified organization with the plan passed and an unverified user', async () => {
        const slug = unique('acme')
        const email = `${unique('ada')}@example.com`
        const before = Date.now()
        const { org, user } = await store.createAccount({
          org: { name: 'Acme Inc', slug, plan: 'free' },
          user: { email, name: 'Ada Lovelace', passwordHash: 'argon-hash', role: 'owner' },
        })
        const after = Date.now()
        expect(org).toEqual({
          id: org.id,
          name: 'Acme Inc',
          slug,
          plan: 'free',
          verified: false,
          created_at: org.created_at,
        })
        expect(user).toEqual({
          id: user.id,
          org_id: org.id,
          email,
          name: 'Ada Lovelace',
          role: 'owner',
          email_verified_at: null,
          created_at: org.created_at,
        })
        expect(org.id).not.toBe(user.id)
        expect(org.created_at).toBeGreaterThanOrEqual(before)
        expect(org.created_at).toBeLessThanOrEqual(after)

        expect(await store.getOrganization(org.id)).toEqual(org)
        expect(await store.getUser(user.id)).toEqual(user)
        expect(await store.findUserByEmail(email)).toEqual({ ...user, password_hash: 'argon-hash' })
      })

      test('the plan is stored as passed', async () => {
        const { org } = await newAccount({ plan: 'team' })
        expect((await store.getOrganization(org.id))?.plan).toBe('team')
      })

      test('unknown ids and addresses give undefined', async () => {
        expect(await store.getOrganization('00000000-0000-0000-0000-000000000000')).toBeUndefined()
        expect(await store.getUser('00000000-0000-0000-0000-000000000000')).toBeUndefined()
        expect(await store.findUserByEmail('nobody@example.com')).toBeUndefined()
      })

      test('a taken slug gets -2, then -3', async () => {
        const slug = unique('taken')
        const first = await newAccount({ slug })
        const second = await newAccount({ slug })
        const third = await newAccount({ slug })
        expect([first.org.slug, second.org.slug, third.org.slug]).toEqual([slug, `${slug}-2`, `${slug}-3`])
        expect((await store.getOrganization(third.org.id))?.slug).toBe(`${slug}-3`)
      })

      test('a slug that merely starts like a taken one is not suffixed', async () => {
        const slug = unique('prefix')
        await newAccount({ slug: `${slug}-eu` })
        const { org } = await newAccount({ slug })
        expect(org.slug).toBe(slug)
      })

      test('the same e-mail twice is refused with EmailTakenError and creates nothing', async () => {
        const email = `${unique('twice')}@example.com`
        const slug = unique('twice-org')
        const first = await newAccount({ email, slug: unique('first') })
        const error = await newAccount({ email, slug }).catch((e) => e)
        expect(error).toBeInstanceOf(EmailTakenError)
        expect(error.message).toBe('email is already registered')
        // the refused signup took neither the address nor the slug
        expect((await store.findUserByEmail(email))?.id).toBe(first.user.id)
        expect((await newAccount({ slug })).org.slug).toBe(slug)
      })

      test('setPassword replaces the hash of that user only', async () => {
        const a = await newAccount()
        const b = await newAccount()
        await store.setPassword(a.user.id, 'hash-2')
        expect((await store.findUserByEmail(a.user.email))?.password_hash).toBe('hash-2')
        expect((await store.findUserByEmail(b.user.email))?.password_hash).toBe('hash-1')
      })

      test('markEmailVerified sets the user time and verifies the organization; a second call keeps the first time', async () => {
        const { org, user } = await newAccount()
        const other = await newAccount()
        await store.markEmailVerified(user.id, T0)
        expect(await store.getUser(user.id)).toEqual({ ...user, email_verified_at: T0 })
        expect(await store.getOrganization(org.id)).toEqual({ ...org, verified: true })
        await store.markEmailVerified(user.id, T0 + HOUR)
        expect((await store.getUser(user.id))?.email_verified_at).toBe(T0)
        // nobody else was touched
        expect(await store.getUser(other.user.id)).toEqual(other.user)
        expect(await store.getOrganization(other.org.id)).toEqual(other.org)
      })
    })

    describe('e-mail tokens', () => {
      test('a token is consumed once, and only as its own kind', async () => {
        const { user } = await newAccount()
        const hash = unique('verify-hash')
        await store.createEmailToken({
          tokenHash: hash,
          userId: user.id,
          kind: 'verify',
          expiresAt: T0 + HOUR,
          now: T0,
        })
        expect(await store.consumeEmailToken(hash, 'reset', T0 + 1)).toBeUndefined()
        expect(await store.usedEmailTokenUser(hash, 'verify')).toBeUndefined()
        expect(await store.consumeEmailToken(hash, 'verify', T0 + 2)).toBe(user.id)
        expect(await store.consumeEmailToken(hash, 'verify', T0 + 3)).toBeUndefined()
        // Once used, its user is still known (a verification link opened twice), as its own kind only.
        expect(await store.usedEmailTokenUser(hash, 'verify')).toBe(user.id)
        expect(await store.usedEmailTokenUser(hash, 'reset')).toBeUndefined()
      })

      test('an expired token is refused, one just before expiry is accepted', async () => {
        const { user } = await newAccount()
        const expired = unique('reset-hash')
        const live = unique('reset-hash')
        await store.createEmailToken({
          tokenHash: expired,
          userId: user.id,
          kind: 'reset',
          expiresAt: T0 + HOUR,
          now: T0,
        })
        await store.createEmailToken({ tokenHash: live, userId: user.id, kind: 'reset', expiresAt: T0 + HOUR, now: T0 })
        expect(await store.consumeEmailToken(expired, 'reset', T0 + HOUR)).toBeUndefined()
        expect(await store.consumeEmailToken(live, 'reset', T0 + HOUR - 1)).toBe(user.id)
      })

      test('an unknown token is refused', async () => {
        expect(await store.consumeEmailToken('no-such-hash', 'verify', T0)).toBeUndefined()
      })
    })

    describe('refresh tokens', () => {
      /** A new session's first token; its id names the family (the session), as a sign-in makes it. */
      const refresh = async (user: User, expiresAt = T0 + 7 * 24 * HOUR) => {
        const id = unique('rt')
        await store.createRefreshToken({ id, user_id: user.id, family_id: id, expires_at: expiresAt, now: T0 })
        return id
      }
      const rotated = (user: User, session: string): Extract<RotateResult, { ok: true }> => ({
        ok: true,
        userId: user.id,
        sessionId: session,
      })
      const next = (expiresAt = T0 + 8 * 24 * HOUR) => ({ id: unique('rt'), expires_at: expiresAt })

      test('rotation succeeds and the new token rotates in turn', async () => {
        const { user } = await newAccount()
        const first = await refresh(user)
        const second = next()
        const third = next()
        expect(await store.rotateRefreshToken(first, second, T0 + MINUTE)).toEqual(rotated(user, first))
        expect(await store.rotateRefreshToken(second.id, third, T0 + 2 * MINUTE)).toEqual(rotated(user, first))
      })

      test('presenting a rotated token again is reuse and revokes the whole family', async () => {
        const { user } = await newAccount()
        const first = await refresh(user)
        const sibling = await refresh(user) // another session of the same user, another family
        const second = next()
        const replacement = next()
        expect(await store.rotateRefreshToken(first, second, T0 + MINUTE)).toEqual(rotated(user, first))
        expect(await store.rotateRefreshToken(first, replacement, T0 + 2 * MINUTE)).toEqual({
          ok: false,
          reason: 'reused',
        })
        // the newest token of the family is dead too, and the replayed call created nothing
        expect(await store.rotateRefreshToken(second.id, next(), T0 + 3 * MINUTE)).toEqual({
          ok: false,
          reason: 'revoked',
        })
        expect(await store.rotateRefreshToken(replacement.id, next(), T0 + 3 * MINUTE)).toEqual({
          ok: false,
          reason: 'unknown',
        })
        // the other session is untouched
        expect(await store.rotateRefreshToken(sibling, next(), T0 + 4 * MINUTE)).toEqual(rotated(user, sibling))
      })

      test('an expired token gives expired, one just before its expiry rotates', async () => {
        const { user } = await newAccount()
        const expired = await refresh(user, T0 + HOUR)
        const live = await refresh(user, T0 + HOUR)
        expect(await store.rotateRefreshToken(expired, next(), T0 + HOUR)).toEqual({ ok: false, reason: 'expired' })
        expect(await store.rotateRefreshToken(live, next(), T0 + HOUR - 1)).toEqual(rotated(user, live))
      })

      test('an unknown token gives unknown', async () => {
        expect(await store.rotateRefreshToken('no-such-token', next(), T0)).toEqual({ ok: false, reason: 'unknown' })
      })

      test('revokeRefreshToken ends that token only', async () => {
        const { user } = await newAccount()
        const revoked = await refresh(user)
        const kept = await refresh(user)
        await store.revokeRefreshToken(revoked, T0 + MINUTE)
        // A signed-out token is refused without being treated as a replay of a rotated one.
        expect(await store.rotateRefreshToken(revoked, next(), T0 + 2 * MINUTE)).toEqual({
          ok: false,
          reason: 'revoked',
        })
        expect(await store.rotateRefreshToken(kept, next(), T0 + 2 * MINUTE)).toEqual(rotated(user, kept))
      })

      test('a session is live while its family holds an unrevoked token: through rotations, until revokeSession or a revocation of its newest token', async () => {
        const { user } = await newAccount()
        const other = await newAccount()
        const session = await refresh(user)
        const kept = await refresh(user)
        expect(await store.getSessionUser(user.id, session)).toEqual(user)
        // Another user's id with this session, and an unknown session, are no session.
        expect(await store.getSessionUser(other.user.id, session)).toBeUndefined()
        expect(await store.getSessionUser(user.id, 'no-such-session')).toBeUndefined()
        const second = next()
        expect(await store.rotateRefreshToken(session, second, T0 + MINUTE)).toEqual(rotated(user, session))
        expect(await store.getSessionUser(user.id, session)).toEqual(user)
        // revokeSession of another user's session changes nothing.
        await store.revokeSession(other.user.id, session, T0 + 2 * MINUTE)
        expect(await store.getSessionUser(user.id, session)).toEqual(user)
        await store.revokeSession(user.id, session, T0 + 2 * MINUTE)
        expect(await store.getSessionUser(user.id, session)).toBeUndefined()
        expect(await store.rotateRefreshToken(second.id, next(), T0 + 3 * MINUTE)).toEqual({
          ok: false,
          reason: 'revoked',
        })
        // The user's other session goes on, until its newest token is revoked (a logout).
        expect(await store.getSessionUser(user.id, kept)).toEqual(user)
        await store.revokeRefreshToken(kept, T0 + 3 * MINUTE)
        expect(await store.getSessionUser(user.id, kept)).toBeUndefined()
      })

      test('a replayed token ends its session only', async () => {
        const { user } = await newAccount()
        const stolen = await refresh(user)
        const sibling = await refresh(user)
        expect(await store.rotateRefreshToken(stolen, next(), T0 + MINUTE)).toEqual(rotated(user, stolen))
        expect(await store.rotateRefreshToken(stolen, next(), T0 + 2 * MINUTE)).toEqual({ ok: false, reason: 'reused' })
        expect(await store.getSessionUser(user.id, stolen)).toBeUndefined()
        expect(await store.getSessionUser(user.id, sibling)).toEqual(user)
      })

      test("revokeUserSessions ends every family of that user and nobody else's", async () => {
        const a = await newAccount()
        const b = await newAccount()
        const a1 = await refresh(a.user)
        const a2 = await refresh(a.user)
        const a2next = next()
        expect(await store.rotateRefreshToken(a2, a2next, T0 + MINUTE)).toEqual(rotated(a.user, a2))
        const b1 = await refresh(b.user)
        await store.revokeUserSessions(a.user.id, T0 + 2 * MINUTE)
        expect(await store.rotateRefreshToken(a1, next(), T0 + 3 * MINUTE)).toEqual({ ok: false, reason: 'revoked' })
        expect(await store.rotateRefreshToken(a2next.id, next(), T0 + 3 * MINUTE)).toEqual({
          ok: false,
          reason: 'revoked',
        })
        expect(await store.getSessionUser(a.user.id, a1)).toBeUndefined()
        expect(await store.getSessionUser(a.user.id, a2)).toBeUndefined()
        expect(await store.getSessionUser(b.user.id, b1)).toEqual(b.user)
        expect(await store.rotateRefreshToken(b1, next(), T0 + 3 * MINUTE)).toEqual(rotated(b.user, b1))
      })

      // A replayed token and the legitimate rotation of the newest one arriving together: in any serial
      // order the family ends dead (reuse first: the rotation is refused; rotation first: the reuse
      // revokes the new token), so afterwards no token of the family may rotate.
      test('a replay racing the rotation of the newest token still ends the whole family', async () => {
        const { user } = await newAccount()
        for (let round = 0; round < 20; round++) {
          const stolen = await refresh(user)
          const newest = next()
          expect(await store.rotateRefreshToken(stolen, newest, T0 + MINUTE)).toEqual(rotated(user, stolen))
          const replacement = next()
          const [replay, legit] = await Promise.all([
            store.rotateRefreshToken(stolen, next(), T0 + 2 * MINUTE),
            store.rotateRefreshToken(newest.id, replacement, T0 + 2 * MINUTE),
          ])
          expect(replay).toEqual({ ok: false, reason: 'reused' })
          const after = await store.rotateRefreshToken(replacement.id, next(), T0 + 3 * MINUTE)
          expect({ round, legit: legit.ok, after }).toEqual({
            round,
            legit: legit.ok,
            after: { ok: false, reason: legit.ok ? 'revoked' : 'unknown' },
          })
        }
      })

      // Same reasoning for a password reset (revokeUserRefreshTokens) racing a refresh. The interleaving
      // that loses the new token is hit only some of the time, hence the rounds.
      test('revoking all tokens of a user racing a rotation leaves no live token', async () => {
        for (let round = 0; round < 50; round++) {
          const { user } = await newAccount()
          const token = await refresh(user)
          const replacement = next()
          const [, rotated] = await Promise.all([
            store.revokeUserSessions(user.id, T0 + MINUTE),
            store.rotateRefreshToken(token, replacement, T0 + MINUTE),
          ])
          const after = await store.rotateRefreshToken(replacement.id, next(), T0 + 2 * MINUTE)
          expect({ round, rotated: rotated.ok, after }).toEqual({
            round,
            rotated: rotated.ok,
            after: { ok: false, reason: rotated.ok ? 'revoked' : 'unknown' },
          })
        }
      })

      test('concurrent rotations of one token: exactly one succeeds, the rest are reuse', async () => {
        const { user } = await newAccount()
        const token = await refresh(user)
        const results = await Promise.all(
          Array.from({ length: 8 }, () => store.rotateRefreshToken(token, next(), T0 + MINUTE)),
        )
        expect(results.filter((r) => r.ok)).toEqual([rotated(user, token)])
        expect(results.filter((r) => !r.ok)).toEqual(Array(7).fill({ ok: false, reason: 'reused' }))
      })
    })

    describe('API keys', () => {
      const newKey = (
        org: Organization,
        user: User | null,
        createdAt: number,
        name = 'agent',
        more: { scopes?: ApiKeyScope[]; created_by_key?: string } = {},
      ) => {
        const keyId = unique('kid')
        return store.createApiKey({
          id: unique('key'),
          org_id: org.id,
          key_id: keyId,
          name,
          secret_hash: `hash-of-${keyId}`,
          scopes: more.scopes ?? ['ingest', 'read'],
          created_by: user?.id ?? null,
          created_by_key: more.created_by_key ?? null,
          created_at: createdAt,
        })
      }
      /** A key as listApiKeys gives it: with its creator while the user exists. */
      const listed = (key: ApiKey, user: User | null) => ({
        ...key,
        creator: user && { id: user.id, email: user.email, name: user.name },
      })

      test('createApiKey returns the record, findApiKey finds it by key_id', async () => {
        const { org, user } = await newAccount()
        const key = await newKey(org, user, T0, 'prod agent')
        expect(key).toEqual({
          id: key.id,
          org_id: org.id,
          key_id: key.key_id,
          name: 'prod agent',
          secret_hash: `hash-of-${key.key_id}`,
          scopes: ['ingest', 'read'],
          created_by: user.id,
          created_by_key: null,
          created_at: T0,
          last_used_at: null,
          revoked_at: null,
        })
        expect(await store.findApiKey(key.key_id)).toEqual(key)
        expect(await store.findApiKey('no-such-key-id')).toBeUndefined()
      })

      test('created_by may be null', async () => {
        const { org } = await newAccount()
        const key = await store.createApiKey({
          id: unique('key'),
          org_id: org.id,
          key_id: unique('kid'),
          name: 'orphan',
          secret_hash: 'h',
          scopes: ['ingest'],
          created_by: null,
          created_at: T0,
        })
        expect((await store.findApiKey(key.key_id))?.created_by).toBeNull()
      })

      test('a key_id is unique', async () => {
        const { org, user } = await newAccount()
        const key = await newKey(org, user, T0)
        const error = await store.createApiKey({ ...key, id: unique('key') }).catch((e) => e)
        expect(error).toBeInstanceOf(UniqueViolation)
      })

      test('listApiKeys orders by creation, hides revoked keys unless asked, and is scoped to the organization', async () => {
        const { org, user } = await newAccount()
        const other = await newAccount()
        const late = await newKey(org, user, T0 + 3000, 'late')
        const early = await newKey(org, user, T0 + 1000, 'early')
        const middle = await newKey(org, user, T0 + 2000, 'middle')
        await newKey(other.org, other.user, T0 + 1500, 'other org')
        expect(await store.revokeApiKey(org.id, middle.id, T0 + 5000)).toBe(true)

        expect(await store.listApiKeys(org.id, false)).toEqual([listed(early, user), listed(late, user)])
        expect(await store.listApiKeys(org.id, true)).toEqual([
          listed(early, user),
          listed({ ...middle, revoked_at: T0 + 5000 }, user),
          listed(late, user),
        ])
        expect((await store.listApiKeys(other.org.id, true)).map((k) => k.name)).toEqual(['other org'])
      })

      test('keys created in the same millisecond list in id order', async () => {
        const { org, user } = await newAccount()
        const keys = [await newKey(org, user, T0), await newKey(org, user, T0), await newKey(org, user, T0)]
        const byId = [...keys].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        expect(await store.listApiKeys(org.id, false)).toEqual(byId.map((k) => listed(k, user)))
      })

      test("revokeApiKey is idempotent, keeps the first time, and refuses another organization's key", async () => {
        const { org, user } = await newAccount()
        const other = await newAccount()
        const key = await newKey(org, user, T0)
        expect(await store.revokeApiKey(other.org.id, key.id, T0 + 500)).toBe(false)
        expect((await store.findApiKey(key.key_id))?.revoked_at).toBeNull()

        expect(await store.revokeApiKey(org.id, key.id, T0 + 1000)).toBe(true)
        expect(await store.revokeApiKey(org.id, key.id, T0 + 2000)).toBe(true)
        expect((await store.findApiKey(key.key_id))?.revoked_at).toBe(T0 + 1000)
        expect(await store.revokeApiKey(other.org.id, key.id, T0 + 3000)).toBe(false)
        expect(await store.revokeApiKey(org.id, 'no-such-id', T0 + 3000)).toBe(false)
      })

      test('touchApiKey writes on first use, then only once the stored time is older than the interval', async () => {
        const { org, user } = await newAccount()
        const key = await newKey(org, user, T0)
        const lastUsed = async () => (await store.findApiKey(key.key_id))?.last_used_at
        await store.touchApiKey(key.id, T0 + 1000, MINUTE)
        expect(await lastUsed()).toBe(T0 + 1000)
        await store.touchApiKey(key.id, T0 + 1000 + MINUTE - 1, MINUTE)
        expect(await lastUsed()).toBe(T0 + 1000)
        await store.touchApiKey(key.id, T0 + 1000 + MINUTE, MINUTE)
        expect(await lastUsed()).toBe(T0 + 1000)
        await store.touchApiKey(key.id, T0 + 1001 + MINUTE, MINUTE)
        expect(await lastUsed()).toBe(T0 + 1001 + MINUTE)
      })
    })

    describe('API key scopes and owners', () => {
      const newKey = (
        org: Organization,
        user: User | null,
        name: string,
        more: { scopes?: ApiKeyScope[]; created_by_key?: string } = {},
      ) => {
        const keyId = unique('kid')
        return store.createApiKey({
          id: unique('key'),
          org_id: org.id,
          key_id: keyId,
          name,
          secret_hash: `hash-of-${keyId}`,
          scopes: more.scopes ?? ['ingest', 'read'],
          created_by: user?.id ?? null,
          created_by_key: more.created_by_key ?? null,
          created_at: T0,
        })
      }
      /** An organization with two owners (the first and `second`) and a member. */
      const team = async () => {
        const { org, user: first } = await newAccount()
        const invite = async (role: 'owner' | 'member') => {
          const tokenHash = unique('invite')
          const email = `${unique('joiner')}@example.com`
          await store.members.createInvite({
            orgId: org.id,
            email,
            role,
            tokenHash,
            invitedBy: first.id,
            now: T0,
            expiresAt: T0 + HOUR,
          })
          const accepted = await store.members.acceptInvite({ tokenHash, name: role, passwordHash: 'h', now: T0 + 1 })
          if (typeof accepted === 'string') throw new Error(`invite not accepted: ${accepted}`)
          return accepted.user
        }
        return { org, first, second: await invite('owner'), member: await invite('member') }
      }
      const revokedAt = async (key: ApiKey) => (await store.findApiKey(key.key_id))?.revoked_at ?? null

      test('scopes are kept as given, in a fixed order, and found with the key', async () => {
        const { org, user } = await newAccount()
        const key = await newKey(org, user, 'all', { scopes: ['admin', 'ingest', 'read'] })
        expect(key.scopes).toEqual(['ingest', 'read', 'admin'])
        expect((await store.findApiKey(key.key_id))?.scopes).toEqual(['ingest', 'read', 'admin'])
        const ingestOnly = await newKey(org, user, 'agent', { scopes: ['ingest'] })
        expect((await store.findApiKey(ingestOnly.key_id))?.scopes).toEqual(['ingest'])
      })

      test('a key made by a key records both, and lists with the user as its creator', async () => {
        const { org, user } = await newAccount()
        const parent = await newKey(org, user, 'parent', { scopes: ['read', 'admin'] })
        const child = await newKey(org, user, 'child', { scopes: ['read'], created_by_key: parent.id })
        expect(await store.findApiKey(child.key_id)).toEqual({
          ...child,
          created_by: user.id,
          created_by_key: parent.id,
        })
        const list = await store.listApiKeys(org.id, false)
        expect(list.map((k) => [k.name, k.creator?.email])).toEqual([
          ['parent', user.email],
          ['child', user.email],
        ])
      })

      test("removing an owner revokes, in the removal, the keys they created and the keys made with those; others' keys stay", async () => {
        const { org, first, second } = await team()
        const own = await newKey(org, second, 'second owner agent', { scopes: ['ingest', 'read', 'admin'] })
        const made = await newKey(org, second, 'made by their key', { created_by_key: own.id })
        // made by their key, whatever the creator recorded (a key made before creators were kept)
        const madeUnowned = await newKey(org, null, 'made by their key, no creator', { created_by_key: made.id })
        const kept = await newKey(org, first, 'first owner agent')
        const orphan = await newKey(org, null, 'no creator')
        expect(await revokedAt(own)).toBeNull()
        expect(await store.members.removeMember(org.id, second.id, T0 + 5000)).toBe('removed')
        expect(await revokedAt(own)).toBe(T0 + 5000)
        expect(await revokedAt(made)).toBe(T0 + 5000)
        expect(await revokedAt(madeUnowned)).toBe(T0 + 5000)
        expect(await revokedAt(kept)).toBeNull()
        expect(await revokedAt(orphan)).toBeNull()
        // the removed creator is gone: the keys list without one
        const all = await store.listApiKeys(org.id, true)
        expect(all.find((k) => k.id === own.id)?.creator).toBeNull()
        expect(all.find((k) => k.id === kept.id)?.creator?.id).toBe(first.id)
      })

      test('demoting an owner revokes their keys; promoting, or a refused demotion, revokes none', async () => {
        const { org, first, second, member } = await team()
        const secondKey = await newKey(org, second, 'second')
        const firstKey = await newKey(org, first, 'first')
        expect(await store.members.setMemberRole(org.id, member.id, 'owner', T0 + 1000)).toMatchObject({
          role: 'owner',
        })
        expect(await store.members.setMemberRole(org.id, second.id, 'owner', T0 + 1500)).toMatchObject({
          role: 'owner',
        })
        expect(await revokedAt(secondKey)).toBeNull()
        expect(await store.members.setMemberRole(org.id, second.id, 'member', T0 + 2000)).toMatchObject({
          role: 'member',
        })
        expect(await revokedAt(secondKey)).toBe(T0 + 2000)
        expect(await revokedAt(firstKey)).toBeNull()
        // the last owners: demoting the one left is refused, and their key stays
        expect(await store.members.setMemberRole(org.id, member.id, 'member', T0 + 3000)).toMatchObject({
          role: 'member',
        })
        expect(await store.members.setMemberRole(org.id, first.id, 'member', T0 + 4000)).toBe('last_owner')
        expect(await store.members.removeMember(org.id, first.id, T0 + 4000)).toBe('last_owner')
        expect(await revokedAt(firstKey)).toBeNull()
      })

      test('a key is never created for a creator already removed or demoted, nor with a revoked key (CreatorRevokedError)', async () => {
        const { org, first, second, member } = await team()
        const parent = await newKey(org, second, 'parent', { scopes: ['admin'] })
        expect(await store.members.removeMember(org.id, second.id, T0 + 1000)).toBe('removed')
        const fails = (p: Promise<unknown>) =>
          p.then(
            () => undefined,
            (e) => [e.constructor.name, e.by],
          )
        // what a request that authenticated just before the removal would ask
        expect(await fails(newKey(org, second, 'after removal'))).toEqual(['CreatorRevokedError', 'user'])
        expect(await fails(newKey(org, second, 'with the revoked key', { created_by_key: parent.id }))).toEqual([
          'CreatorRevokedError',
          'key',
        ])
        expect(await fails(newKey(org, member, 'by a member'))).toEqual(['CreatorRevokedError', 'user'])
        expect((await store.listApiKeys(org.id, true)).map((k) => k.name)).toEqual(['parent'])
        expect(await fails(newKey(org, first, 'by an owner'))).toBeUndefined()
      })

      test("another organization's removal never touches this organization's keys", async () => {
        const a = await team()
        const b = await newAccount()
        const key = await newKey(b.org, b.user, 'b')
        expect(await store.members.removeMember(a.org.id, a.second.id, T0 + 1000)).toBe('removed')
        expect(await store.members.removeMember(a.org.id, b.user.id, T0 + 1000)).toBe('not_found')
        expect(await revokedAt(key)).toBeNull()
      })
    })

    describe('registered databases', () => {
      test('createDatabase applies the defaults and getDatabase returns the same record', async () => {
        const { org } = await newAccount()
        const db = await store.createDatabase(org.id, pgInput('orders'), T0)
        if (db === 'limit') throw new Error('unexpected limit')
        expect(db).toEqual({
          id: db.id,
          org_id: org.id,
          name: 'orders',
          engine: 'postgres',
          engine_version: '17.2',
          host: 'db1.internal',
          port: 5432,
          tags: { env: 'prod' },
          poll_interval_seconds: 10,
          collect_explain_plans: true,
          collect_replication: true,
          disabled_collectors: [],
          created_at: T0,
          updated_at: T0,
          last_seen_at: null,
        })
        expect(await store.getDatabase(org.id, db.id)).toEqual(db)
      })

      test('a null engine_version and empty tags round-trip', async () => {
        const { org } = await newAccount()
        const db = await store.createDatabase(
          org.id,
          { name: 'events', engine: 'clickhouse', engine_version: null, host: 'ch1', port: 8123, tags: {} },
          T0,
        )
        if (db === 'limit') throw new Error('unexpected limit')
        const stored = await store.getDatabase(org.id, db.id)
        expect(stored).toMatchObject({ engine: 'clickhouse', engine_version: null, tags: {}, port: 8123 })
        expect(stored).toEqual(db)
      })

      test("limit: refused with 'limit' once the organization holds that many, counted per organization", async () => {
        const { org } = await newAccount()
        const other = await newAccount()
        const first = await store.createDatabase(org.id, pgInput('one'), T0, 1)
        expect(first).toMatchObject({ name: 'one' })
        expect(await store.createDatabase(org.id, pgInput('two'), T0, 1)).toBe('limit')
        expect(await store.countDatabases(org.id)).toBe(1)
        expect(await store.createDatabase(org.id, pgInput('two'), T0, 2)).toMatchObject({ name: 'two' })
        expect(await store.createDatabase(org.id, pgInput('three'), T0, 2)).toBe('limit')
        expect(await store.createDatabase(org.id, pgInput('three'), T0)).toMatchObject({ name: 'three' })
        expect(await store.countDatabases(org.id)).toBe(3)
        expect(await store.createDatabase(other.org.id, pgInput('one'), T0, 1)).toMatchObject({ name: 'one' })
      })

      test('limit holds under concurrent creates', async () => {
        const { org } = await newAccount()
        const results = await Promise.all(
          Array.from({ length: 6 }, (_, i) => store.createDatabase(org.id, pgInput(`race-${i}`), T0, 2)),
        )
        expect(results.filter((r) => r === 'limit').length).toBe(4)
        expect(await store.countDatabases(org.id)).toBe(2)
      })

      test('a taken name is a UniqueViolation in the same organization but allowed in another', async () => {
        const { org } = await newAccount()
        const other = await newAccount()
        await store.createDatabase(org.id, pgInput('shared-name'), T0)
        const error = await store
          .createDatabase(org.id, pgInput('shared-name', { host: 'elsewhere' }), T0)
          .catch((e) => e)
        expect(error).toBeInstanceOf(UniqueViolation)
        expect(await store.countDatabases(org.id)).toBe(1)
        expect(await store.createDatabase(other.org.id, pgInput('shared-name'), T0)).toMatchObject({
          name: 'shared-name',
          org_id: other.org.id,
        })
      })

      test('listDatabases orders by name and countDatabases counts, each per organization', async () => {
        const { org } = await newAccount()
        const other = await newAccount()
        expect(await store.listDatabases(org.id)).toEqual([])
        expect(await store.countDatabases(org.id)).toBe(0)
        for (const name of ['orders', 'analytics', 'billing']) await store.createDatabase(org.id, pgInput(name), T0)
        await store.createDatabase(other.org.id, pgInput('zzz'), T0)
        expect((await store.listDatabases(org.id)).map((d) => d.name)).toEqual(['analytics', 'billing', 'orders'])
        expect(await store.countDatabases(org.id)).toBe(3)
        expect(await store.countDatabases(other.org.id)).toBe(1)
      })

      // The SQLite store keeps lists in memory between writes: a list read between every kind of write
      // must show that write, and a caller changing a listed record must not change the next list.
      test('listDatabases shows every write at once: create, update, ingest (last seen, version), delete', async () => {
        const { org } = await newAccount()
        const names = async () =>
          (await store.listDatabases(org.id)).map((d) => [d.name, d.engine_version, d.last_seen_at])
        expect(await names()).toEqual([])
        const db = await store.createDatabase(org.id, pgInput('orders'), T0)
        if (db === 'limit') throw new Error('unexpected limit')
        expect(await names()).toEqual([['orders', '17.2', null]])
        await store.updateDatabase(org.id, db.id, { name: 'orders-primary' }, T0 + 1)
        expect(await names()).toEqual([['orders-primary', '17.2', null]])
        const listed = await store.listDatabases(org.id)
        listed[0]!.name = 'changed by a caller'
        listed.pop()
        expect(await names()).toEqual([['orders-primary', '17.2', null]])
        const batch = {
          batch_id: crypto.randomUUID(),
          collected_at: T0 + 2,
          interval_seconds: 10,
          agent_version: 'test',
          database: {
            name: 'orders-primary',
            engine: 'postgres' as const,
            engine_version: '17.4',
            host: 'db.internal',
            port: 5432,
          },
        }
        expect((await store.ingest(org.id, batch, T0 + 5)).kind).toBe('applied')
        expect(await names()).toEqual([['orders-primary', '17.4', T0 + 5]])
        expect(await store.deleteDatabase(org.id, db.id)).toBe(true)
        expect(await names()).toEqual([])
      })

      // Both backends list in the same order: by code point, as SQLite compares text (uppercase before
      // '_' before lowercase), whatever the PostgreSQL database's default collation is.
      test('listDatabases orders names by code point on every backend', async () => {
        const { org } = await newAccount()
        const names = ['beta', 'Alpha', 'alpha-2', 'B', '_x', 'a b', 'ab']
        for (const name of names) await store.createDatabase(org.id, pgInput(name), T0)
        expect((await store.listDatabases(org.id)).map((d) => d.name)).toEqual([
          'Alpha',
          'B',
          '_x',
          'a b',
          'ab',
          'alpha-2',
          'beta',
        ])
      })

      test('updateDatabase applies the patch, round-trips tags and disabled_collectors, and stamps updated_at', async () => {
        const { org } = await newAccount()
        const db = await store.createDatabase(org.id, pgInput('orders'), T0)
        if (db === 'limit') throw new Error('unexpected limit')
        const patched = await store.updateDatabase(
          org.id,
          db.id,
          {
            name: 'orders-primary',
            host: 'db2.internal',
            port: 6432,
            tags: { env: 'staging', team: 'core', 'quote"s': 'a\\b' },
            poll_interval_seconds: 30,
            collect_explain_plans: false,
            collect_replication: false,
            disabled_collectors: ['locks', 'io_stats'],
          },
          T0 + HOUR,
        )
        const expected = {
          ...db,
          name: 'orders-primary',
          host: 'db2.internal',
          port: 6432,
          tags: { env: 'staging', team: 'core', 'quote"s': 'a\\b' },
          poll_interval_seconds: 30,
          collect_explain_plans: false,
          collect_replication: false,
          disabled_collectors: ['locks', 'io_stats'],
          updated_at: T0 + HOUR,
        }
        expect(patched).toEqual(expected)
        expect(await store.getDatabase(org.id, db.id)).toEqual(expected)

        // a partial patch leaves the other fields alone; undefined fields are skipped
        const again = await store.updateDatabase(
          org.id,
          db.id,
          { collect_replication: true, host: undefined },
          T0 + 2 * HOUR,
        )
        expect(again).toEqual({ ...expected, collect_replication: true, updated_at: T0 + 2 * HOUR })
        // an empty patch only stamps the time
        expect(await store.updateDatabase(org.id, db.id, {}, T0 + 3 * HOUR)).toEqual({
          ...expected,
          collect_replication: true,
          updated_at: T0 + 3 * HOUR,
        })
      })

      test('renaming onto a taken name is a UniqueViolation and changes nothing', async () => {
        const { org } = await newAccount()
        await store.createDatabase(org.id, pgInput('alpha'), T0)
        const beta = await store.createDatabase(org.id, pgInput('beta'), T0)
        if (beta === 'limit') throw new Error('unexpected limit')
        const error = await store.updateDatabase(org.id, beta.id, { name: 'alpha', port: 1 }, T0 + 1).catch((e) => e)
        expect(error).toBeInstanceOf(UniqueViolation)
        expect(await store.getDatabase(org.id, beta.id)).toEqual(beta)
      })

      test("another organization's id gives undefined / false and leaves the database alone", async () => {
        const { org } = await newAccount()
        const other = await newAccount()
        const db = await store.createDatabase(org.id, pgInput('private'), T0)
        if (db === 'limit') throw new Error('unexpected limit')
        expect(await store.getDatabase(other.org.id, db.id)).toBeUndefined()
        expect(await store.updateDatabase(other.org.id, db.id, { name: 'stolen' }, T0 + 1)).toBeUndefined()
        expect(await store.deleteDatabase(other.org.id, db.id)).toBe(false)
        expect(await store.getDatabase(org.id, db.id)).toEqual(db)
        expect(await store.updateDatabase(org.id, 'no-such-id', { name: 'x' }, T0 + 1)).toBeUndefined()
        expect(await store.getDatabase(org.id, 'no-such-id')).toBeUndefined()
      })

      test('deleteDatabase removes it once', async () => {
        const { org } = await newAccount()
        const db = await store.createDatabase(org.id, pgInput('doomed'), T0)
        if (db === 'limit') throw new Error('unexpected limit')
        await store.createDatabase(org.id, pgInput('kept'), T0)
        expect(await store.deleteDatabase(org.id, db.id)).toBe(true)
        expect(await store.deleteDatabase(org.id, db.id)).toBe(false)
        expect(await store.getDatabase(org.id, db.id)).toBeUndefined()
        expect(await store.countDatabases(org.id)).toBe(1)
        // the name is free again
        expect(await store.createDatabase(org.id, pgInput('doomed'), T0 + 1)).toMatchObject({ name: 'doomed' })
      })
    })

    describe('rate limits and cooldowns', () => {
      test('exactly `limit` requests pass in the window; the next waits until the oldest leaves it', async () => {
        const key = unique('rate')
        const hit = (at: number) => store.hitRateLimit(key, 3, 1000, at)
        expect(await hit(T0)).toEqual({ allowed: true, retryAfterMs: 0 })
        expect(await hit(T0 + 100)).toEqual({ allowed: true, retryAfterMs: 0 })
        expect(await hit(T0 + 200)).toEqual({ allowed: true, retryAfterMs: 0 })
        expect(await hit(T0 + 300)).toEqual({ allowed: false, retryAfterMs: 700 })
        expect(await hit(T0 + 999)).toEqual({ allowed: false, retryAfterMs: 1 })
        // the request at T0 has left the window; refused requests were not counted
        expect(await hit(T0 + 1000)).toEqual({ allowed: true, retryAfterMs: 0 })
        expect(await hit(T0 + 1001)).toEqual({ allowed: false, retryAfterMs: 99 })
        expect(await hit(T0 + 1100)).toEqual({ allowed: true, retryAfterMs: 0 })
      })

      test('keys are independent', async () => {
        const a = unique('rate-a')
        const b = unique('rate-b')
        expect(await store.hitRateLimit(a, 1, HOUR, T0)).toEqual({ allowed: true, retryAfterMs: 0 })
        expect(await store.hitRateLimit(a, 1, HOUR, T0 + 1)).toEqual({ allowed: false, retryAfterMs: HOUR - 1 })
        expect(await store.hitRateLimit(b, 1, HOUR, T0 + 1)).toEqual({ allowed: true, retryAfterMs: 0 })
      })

      test('20 concurrent requests with limit 5: exactly 5 pass', async () => {
        const key = unique('race')
        const results = await Promise.all(Array.from({ length: 20 }, () => store.hitRateLimit(key, 5, HOUR, T0)))
        expect(results.filter((r) => r.allowed).length).toBe(5)
        expect(results.filter((r) => !r.allowed)).toEqual(Array(15).fill({ allowed: false, retryAfterMs: HOUR }))
      })

      test('takeCooldown allows one per cooldown', async () => {
        const key = unique('cooldown')
        expect(await store.takeCooldown(key, MINUTE, T0)).toEqual({ allowed: true, retryAfterMs: 0 })
        expect(await store.takeCooldown(key, MINUTE, T0 + 1000)).toEqual({
          allowed: false,
          retryAfterMs: MINUTE - 1000,
        })
        expect(await store.takeCooldown(key, MINUTE, T0 + MINUTE - 1)).toEqual({ allowed: false, retryAfterMs: 1 })
        expect(await store.takeCooldown(key, MINUTE, T0 + MINUTE)).toEqual({ allowed: true, retryAfterMs: 0 })
        expect(await store.takeCooldown(unique('cooldown'), MINUTE, T0 + MINUTE)).toEqual({
          allowed: true,
          retryAfterMs: 0,
        })
      })

      test('sweepRateEvents removes events older than `before` and returns how many', async () => {
        // Times far below T0, so events of the other tests in this store are never swept here.
        const a = unique('sweep-a')
        const b = unique('sweep-b')
        const window = 10_000
        for (const at of [100, 200, 300]) expect((await store.hitRateLimit(a, 10, window, at)).allowed).toBe(true)
        expect((await store.hitRateLimit(b, 10, window, 150)).allowed).toBe(true)
        expect(await store.sweepRateEvents(250)).toBe(3)
        expect(await store.sweepRateEvents(250)).toBe(0)
        // key a keeps its event at 300 only: with limit 2 one more passes, then it is full until 300 + window
        expect(await store.hitRateLimit(a, 2, window, 400)).toEqual({ allowed: true, retryAfterMs: 0 })
        expect(await store.hitRateLimit(a, 2, window, 500)).toEqual({
          allowed: false,
          retryAfterMs: 300 + window - 500,
        })
        expect(await store.sweepRateEvents(301)).toBe(1)
      })
    })
  })
}
