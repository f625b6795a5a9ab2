// Organization members and invites through HTTP on both stores: the whole flow with the link read from
// the server's log and from a real SMTP relay; links single use, expiring after 7 days, revoked,
// replaced; 409s for registered addresses and the last owner; a removed member's tokens refused at once;
// members refused (403) on API keys, the webhook, invites and member changes; API keys refused on invites
// and members; another organization's ids are 404s; DBM_SIGNUP=closed still lets an invitee in; an
// unverified organization cannot invite (403); a demoted owner's invites are revoked, and an invite whose
// inviter is not an owner is refused at acceptance; the mail's subject is fixed text, and hostile inviter
// and organization names stay quoted on their lines in the body.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type CookieJar, startSession } from '../../src/server/auth/session.ts'
import { sha256 } from '../../src/server/auth/secrets.ts'
import { INVALID_INVITE, INVITES_LOCKED, INVITE_SUBJECT, LAST_OWNER } from '../../src/server/routes/organization.ts'
import {
  type Account,
  type TestServer,
  createApiKey,
  signup,
  startTestServer,
  storeKinds,
  uniqueIp,
  verify,
} from '../support/server.ts'
import { startSmtpReceiver } from '../support/smtp.ts'
import type { User } from '../../src/server/store/types.ts'

/** A cookie jar that keeps nothing: sessions the tests start themselves use the tokens. */
const noCookies = new Proxy({}, { get: () => ({ set() {}, remove() {} }) }) as CookieJar

const WEEK_MS = 7 * 24 * 60 * 60 * 1000
const PASSWORD = 'invited person pass'

let addressCounter = 0
const newAddress = (label = 'invitee') =>
  `${label}${++addressCounter}-${Math.random().toString(36).slice(2, 7)}@example.com`

/** The token of an accept-invite link (`<public URL>/accept-invite?token=…`). */
const tokenOf = (link: string) => new URL(link).searchParams.get('token') ?? ''

async function invite(
  server: TestServer,
  owner: { token: string },
  email: string,
  role: 'owner' | 'member' = 'member',
) {
  const res = await server.call('POST', '/api/v1/organization/invites', { token: owner.token, body: { email, role } })
  if (res.status !== 201) throw new Error(`invite failed: ${res.status} ${JSON.stringify(res.body)}`)
  await server.deps.mailer.idle()
  const link = server.mailLink(email, /^You are invited to join an organization on dbm$/)
  if (!link) throw new Error(`no invite mail to ${email} in the log`)
  return { id: res.body.id as string, link, token: tokenOf(link) }
}

function accept(server: TestServer, token: string, name = 'Invited Person', ip = uniqueIp()) {
  return server.call('POST', '/api/v1/auth/accept-invite', { ip, body: { token, name, password: PASSWORD } })
}

/** Invites `email` and accepts: the new member's account. */
async function join(
  server: TestServer,
  owner: Account,
  role: 'owner' | 'member' = 'member',
  email = newAddress(),
): Promise<Account> {
  const { token } = await invite(server, owner, email, role)
  const res = await accept(server, token)
  if (res.status !== 201) throw new Error(`accept failed: ${res.status} ${JSON.stringify(res.body)}`)
  return {
    email,
    password: PASSWORD,
    token: res.body.access_token,
    refreshToken: res.body.refresh_token,
    userId: res.body.user.id,
    orgId: res.body.organization.id,
  }
}

for (const kind of storeKinds) {
  describe(`organization members and invites (${kind})`, () => {
    let server: TestServer
    beforeAll(async () => {
      // DBM_SIGNUP=closed: signups stop after the first account, accepting an invite does not.
      server = await startTestServer(kind, { signup: 'closed' })
    })
    afterAll(async () => {
      await server?.stop()
    })

    /**
     * An organization of its own, verified (only verified organizations invite): through signup and the
     * verification link for the first, through the store afterwards (signup is closed).
     */
    let firstOwner: Account | undefined
    async function newOrganization(name = 'Acme', verified = true): Promise<Account> {
      if (!firstOwner) {
        firstOwner = await signup(server, { org_name: name })
        await server.deps.mailer.idle()
        await verify(server, firstOwner)
        return firstOwner
      }
      const { user } = await server.store.createAccount({
        org: { name, slug: `org-${Math.random().toString(36).slice(2, 9)}`, plan: 'free' },
        user: { email: newAddress('owner'), name: 'Other Owner', passwordHash: firstOwnerHash, role: 'owner' },
      })
      if (verified) await server.store.markEmailVerified(user.id, Date.now())
      return sessionOf(user, firstOwner.password)
    }

    /** A new session of `user`, as a sign-in starts it (without spending a password check on a loaded machine). */
    async function sessionOf(user: User, password: string): Promise<Account> {
      const session = await startSession(server.deps, user, noCookies)
      return {
        email: user.email,
        password,
        token: session.access_token,
        refreshToken: session.refresh_token,
        userId: user.id,
        orgId: user.org_id,
      }
    }
    let firstOwnerHash = ''
    beforeAll(async () => {
      await newOrganization('Acme')
      firstOwnerHash = (await server.store.findUserByEmail(firstOwner!.email))!.password_hash
    })

    test('an owner invites, the link from the log signs the invitee in as a verified member (signup closed), once', async () => {
      const owner = firstOwner!
      expect(
        (
          await server.call('POST', '/api/v1/auth/signup', {
            ip: uniqueIp(),
            body: { email: newAddress(), password: PASSWORD, name: 'x', org_name: 'y' },
          })
        ).status,
      ).toBe(403)

      const email = newAddress()
      const created = await server.call('POST', '/api/v1/organization/invites', {
        token: owner.token,
        body: { email: email.toUpperCase(), role: 'member' },
      })
      expect(created.status).toBe(201)
      expect(Object.keys(created.body).sort()).toEqual([
        'created_at',
        'email',
        'expires_at',
        'id',
        'invited_by',
        'role',
      ])
      expect(created.body).toMatchObject({ email, role: 'member', invited_by: { id: owner.userId, name: 'Test User' } })
      expect(Date.parse(created.body.expires_at) - Date.parse(created.body.created_at)).toBe(WEEK_MS)

      await server.deps.mailer.idle()
      const line = server.logs.filter((l) => l.includes(' INFO mail ') && l.includes(`to=${email}`))
      expect(line).toHaveLength(1)
      expect(line[0]).toMatch(
        / subject="You are invited to join an organization on dbm" link="http:\/\/dbm\.test:8080\/accept-invite\?token=[A-Za-z0-9_-]{43}"$/,
      )
      const link = server.mailLink(email, /^You are invited/)!
      const token = tokenOf(link)
      expect(JSON.stringify(created.body)).not.toContain(token)

      // The link opens the dashboard's page, which posts the token.
      const page = await fetch(`${server.base}/accept-invite?token=${token}`, { redirect: 'manual' })
      expect(page.status).toBe(302)
      expect(page.headers.get('location')).toBe(`/#/accept-invite?token=${token}`)

      const listed = await server.call('GET', '/api/v1/organization/invites', { token: owner.token })
      expect(listed.body.map((i: { id: string }) => i.id)).toEqual([created.body.id])

      const accepted = await accept(server, token, '  Ann Member ')
      expect(accepted.status).toBe(201)
      expect(accepted.body.user).toMatchObject({ email, name: 'Ann Member', role: 'member', email_verified: true })
      expect(accepted.body.organization).toMatchObject({ id: owner.orgId, name: 'Acme', verified: true })
      expect(accepted.body).toMatchObject({ token_type: 'Bearer', expires_in: 900 })
      const cookies = accepted.headers.getSetCookie().map((c) => c.split('=')[0])
      expect(cookies.sort()).toEqual(['dbm_access', 'dbm_refresh', 'dbm_session'])

      const me = await server.call('GET', '/api/v1/auth/me', { token: accepted.body.access_token })
      expect(me.body.user).toMatchObject({ email, role: 'member' })
      expect(me.body.organization.id).toBe(owner.orgId)
      expect((await server.call('GET', '/api/v1/databases', { token: accepted.body.access_token })).status).toBe(200)

      // Single use; the invite is no longer pending.
      expect(await accept(server, token).then((r) => [r.status, r.body])).toEqual([400, { error: INVALID_INVITE }])
      expect((await server.call('GET', '/api/v1/organization/invites', { token: owner.token })).body).toEqual([])
      // Revoking what was accepted says so.
      const revoke = await server.call('DELETE', `/api/v1/organization/invites/${created.body.id}`, {
        token: owner.token,
      })
      expect([revoke.status, revoke.body]).toEqual([
        409,
        { error: 'the invite was already accepted: remove the member instead' },
      ])

      const members = await server.call('GET', '/api/v1/organization/members', { token: accepted.body.access_token })
      expect(members.status).toBe(200)
      expect(members.body.map((m: { email: string; role: string }) => [m.email, m.role])).toEqual([
        [owner.email, 'owner'],
        [email, 'member'],
      ])
      const login = await server.call('POST', '/api/v1/auth/login', {
        ip: uniqueIp(),
        body: { email, password: PASSWORD },
      })
      expect(login.status).toBe(200)
    })

    test('a link expires after 7 days; a revoked or replaced link stops working', async () => {
      const owner = await newOrganization()
      const late = await invite(server, owner, newAddress())
      const revoked = await invite(server, owner, newAddress())
      const address = newAddress()
      const replaced = await invite(server, owner, address)
      const replacement = await invite(server, owner, address, 'owner')
      expect(replacement.token).not.toBe(replaced.token)

      const pending = await server.call('GET', '/api/v1/organization/invites', { token: owner.token })
      expect(pending.body.map((i: { id: string }) => i.id).sort()).toEqual([late.id, revoked.id, replacement.id].sort())

      expect(
        (await server.call('DELETE', `/api/v1/organization/invites/${revoked.id}`, { token: owner.token })).status,
      ).toBe(204)
      expect(
        (await server.call('DELETE', `/api/v1/organization/invites/${revoked.id}`, { token: owner.token })).status,
      ).toBe(204)
      expect((await accept(server, revoked.token)).body).toEqual({ error: INVALID_INVITE })
      expect((await accept(server, replaced.token)).body).toEqual({ error: INVALID_INVITE })

      server.advance(WEEK_MS - 60_000)
      try {
        const before = await server.call('GET', '/api/v1/organization/invites', {
          token: (await loginAgain(owner)).token,
        })
        expect(before.body.map((i: { id: string }) => i.id).sort()).toEqual([late.id, replacement.id].sort())
        server.advance(60_000)
        expect(await accept(server, late.token).then((r) => [r.status, r.body])).toEqual([
          400,
          { error: INVALID_INVITE },
        ])
        expect(
          (await server.call('GET', '/api/v1/organization/invites', { token: (await loginAgain(owner)).token })).body,
        ).toEqual([])
      } finally {
        server.advance(-WEEK_MS)
      }
      // The replacement (still within its week) carries its own role.
      const joined = await accept(server, replacement.token)
      expect(joined.status).toBe(201)
      expect(joined.body.user).toMatchObject({ role: 'owner', email_verified: true })
      expect(joined.body.organization).toMatchObject({ id: owner.orgId, verified: true })
    })

    test('an unverified organization cannot invite (403, nothing recorded or mailed); verified, it can', async () => {
      const owner = await newOrganization('Unverified', false)
      const email = newAddress()
      const refused = await server.call('POST', '/api/v1/organization/invites', {
        token: owner.token,
        body: { email, role: 'member' },
      })
      expect([refused.status, refused.body]).toEqual([403, { error: INVITES_LOCKED }])
      await server.deps.mailer.idle()
      expect(server.logs.some((l) => l.includes(`to=${email}`))).toBe(false)
      expect((await server.call('GET', '/api/v1/organization/invites', { token: owner.token })).body).toEqual([])
      await server.store.markEmailVerified(owner.userId, Date.now())
      expect((await invite(server, owner, email)).token).toHaveLength(43)
    })

    test('demoting an owner revokes the invites they sent: their own second address cannot make them owner again', async () => {
      const a = await newOrganization()
      const b = await join(server, a, 'owner')
      const secondAddress = newAddress('b-again')
      const pending = await invite(server, b, secondAddress, 'owner')
      const byA = await invite(server, a, newAddress())
      const demoted = await server.call('PATCH', `/api/v1/organization/members/${b.userId}`, {
        token: a.token,
        body: { role: 'member' },
      })
      expect([demoted.status, demoted.body.role]).toEqual([200, 'member'])
      // B's invite is gone from the pending ones, A's stays.
      expect(
        (await server.call('GET', '/api/v1/organization/invites', { token: a.token })).body.map(
          (i: { id: string }) => i.id,
        ),
      ).toEqual([byA.id])
      expect(await accept(server, pending.token).then((r) => [r.status, r.body])).toEqual([
        400,
        { error: INVALID_INVITE },
      ])
      const owners = (await server.store.members.listMembers(a.orgId))
        .filter((m) => m.role === 'owner')
        .map((m) => m.id)
      expect(owners).toEqual([a.userId])
      expect(await server.store.findUserByEmail(secondAddress)).toBeFalsy()
      // Keeping an owner's role revokes nothing.
      const kept = await invite(server, a, newAddress())
      expect(
        (
          await server.call('PATCH', `/api/v1/organization/members/${a.userId}`, {
            token: a.token,
            body: { role: 'owner' },
          })
        ).status,
      ).toBe(200)
      expect((await accept(server, kept.token)).status).toBe(201)
      expect((await accept(server, byA.token)).status).toBe(201)
    })

    test('an invite whose inviter is not an owner of the organization is refused at acceptance, however it was recorded', async () => {
      const owner = await newOrganization()
      const member = await join(server, owner)
      const elsewhere = await newOrganization('Elsewhere')
      const now = Date.now()
      // Invites the routes never record (a member's, another organization's owner's), as a demotion
      // racing an older server's invite could leave: written to the store directly; then an owner's.
      for (const invitedBy of [member.userId, elsewhere.userId, owner.userId]) {
        const secret = `secret-${Math.random().toString(36).slice(2)}`
        const recorded = await server.store.members.createInvite({
          orgId: owner.orgId,
          email: newAddress(),
          role: 'owner',
          tokenHash: sha256(secret),
          invitedBy,
          now,
          expiresAt: now + WEEK_MS,
        })
        expect(recorded).not.toBe('registered')
        const res = await accept(server, secret)
        if (invitedBy === owner.userId) expect(res.status).toBe(201)
        else expect([res.status, res.body]).toEqual([400, { error: INVALID_INVITE }])
      }
      expect((await server.store.members.listMembers(owner.orgId)).map((m) => m.role).sort()).toEqual([
        'member',
        'owner',
        'owner',
      ])
    })

    /** A new session of the account, at the server's clock as it is now. */
    async function loginAgain(account: Account): Promise<Account> {
      return sessionOf((await server.store.getUser(account.userId))!, account.password)
    }

    test('registered addresses are a 409, when invited and when registered before the link is used', async () => {
      const owner = await newOrganization()
      const other = await newOrganization('Other')
      for (const email of [owner.email, other.email]) {
        const res = await server.call('POST', '/api/v1/organization/invites', {
          token: owner.token,
          body: { email, role: 'member' },
        })
        expect([res.status, res.body]).toEqual([
          409,
          { error: 'that email address already has an account on this server' },
        ])
      }
      // Invited by two organizations: the first accepted wins, the other link is a 409 and stays unused.
      const email = newAddress()
      const first = await invite(server, owner, email)
      const second = await invite(server, other, email)
      expect((await accept(server, second.token)).status).toBe(201)
      const late = await accept(server, first.token)
      expect([late.status, late.body]).toEqual([
        409,
        { error: 'that email address already has an account on this server: sign in with it' },
      ])
      const members = await server.call('GET', '/api/v1/organization/members', { token: owner.token })
      expect(members.body.map((m: { email: string }) => m.email)).toEqual([owner.email])
    })

    test('never the last owner: removing or demoting them is a 409; another owner can', async () => {
      const owner = await newOrganization()
      const self = `/api/v1/organization/members/${owner.userId}`
      expect(await server.call('DELETE', self, { token: owner.token }).then((r) => [r.status, r.body])).toEqual([
        409,
        { error: LAST_OWNER },
      ])
      expect(
        await server
          .call('PATCH', self, { token: owner.token, body: { role: 'member' } })
          .then((r) => [r.status, r.body]),
      ).toEqual([409, { error: LAST_OWNER }])
      // Keeping the role is no demotion.
      expect((await server.call('PATCH', self, { token: owner.token, body: { role: 'owner' } })).status).toBe(200)

      const member = await join(server, owner)
      const promoted = await server.call('PATCH', `/api/v1/organization/members/${member.userId}`, {
        token: owner.token,
        body: { role: 'owner' },
      })
      expect(promoted.status).toBe(200)
      expect(promoted.body).toMatchObject({ id: member.userId, email: member.email, role: 'owner' })
      // Two owners: the first may step down, then the second is the last.
      const demoted = await server.call('PATCH', self, { token: owner.token, body: { role: 'member' } })
      expect([demoted.status, demoted.body.role]).toEqual([200, 'member'])
      const lastSelf = `/api/v1/organization/members/${member.userId}`
      expect((await server.call('DELETE', lastSelf, { token: member.token })).status).toBe(409)
      expect((await server.call('PATCH', lastSelf, { token: member.token, body: { role: 'member' } })).status).toBe(409)
      // The demoted first owner is refused from their next request.
      expect((await server.call('GET', '/api/v1/organization/invites', { token: owner.token })).status).toBe(403)
      const bad = await server.call('PATCH', lastSelf, { token: member.token, body: { role: 'admin' } })
      expect([bad.status, bad.body]).toEqual([400, { error: 'role must be one of: owner, member' }])
    })

    test('two owners removing or demoting each other at once leave one owner', async () => {
      for (const change of ['DELETE', 'PATCH'] as const) {
        const a = await newOrganization()
        const b = await join(server, a, 'owner')
        const answers = await Promise.all(
          [
            [a, b],
            [b, a],
          ].map(([by, target]) =>
            server.call(change, `/api/v1/organization/members/${target!.userId}`, {
              token: by!.token,
              body: change === 'PATCH' ? { role: 'member' } : undefined,
            }),
          ),
        )
        const statuses = answers.map((r) => r.status).sort()
        // One wins. The other finds its target the last owner (409), or finds itself already removed (401)
        // or demoted (403) when its request comes in.
        expect(statuses[0]).toBe(change === 'DELETE' ? 204 : 200)
        expect(change === 'DELETE' ? [401, 409] : [403, 409]).toContain(statuses[1]!)
        const owners = (await server.store.members.listMembers(a.orgId)).filter((m) => m.role === 'owner')
        expect(owners).toHaveLength(1)
      }
    })

    test("a removed member's access and refresh tokens are refused at once; the invites they sent are revoked", async () => {
      const owner = await newOrganization()
      const coOwner = await join(server, owner, 'owner')
      const pendingByCoOwner = await invite(server, coOwner, newAddress())
      const removed = await server.call('DELETE', `/api/v1/organization/members/${coOwner.userId}`, {
        token: owner.token,
      })
      expect(removed.status).toBe(204)
      expect((await server.call('GET', '/api/v1/auth/me', { token: coOwner.token })).status).toBe(401)
      expect((await server.call('GET', '/api/v1/databases', { token: coOwner.token })).status).toBe(401)
      const refresh = await server.call('POST', '/api/v1/auth/refresh', {
        ip: uniqueIp(),
        body: { refresh_token: coOwner.refreshToken },
      })
      expect([refresh.status, refresh.body]).toEqual([401, { error: 'invalid or expired refresh token' }])
      const login = await server.call('POST', '/api/v1/auth/login', {
        ip: uniqueIp(),
        body: { email: coOwner.email, password: coOwner.password },
      })
      expect(login.status).toBe(401)
      expect((await accept(server, pendingByCoOwner.token)).body).toEqual({ error: INVALID_INVITE })
      expect(
        (await server.call('GET', '/api/v1/organization/members', { token: owner.token })).body.map(
          (m: { id: string }) => m.id,
        ),
      ).toEqual([owner.userId])
      expect(
        (await server.call('DELETE', `/api/v1/organization/members/${coOwner.userId}`, { token: owner.token })).status,
      ).toBe(404)
      // The address is free again: it can be invited anew.
      expect(
        (
          await server.call('POST', '/api/v1/organization/invites', {
            token: owner.token,
            body: { email: coOwner.email, role: 'member' },
          })
        ).status,
      ).toBe(201)
    })

    test('members are refused (403) on API keys, the webhook, invites and member changes; they may list the members', async () => {
      const owner = await newOrganization()
      const member = await join(server, owner)
      const key = await createApiKey(server, owner)
      const database = (
        await server.call('POST', '/api/v1/databases', {
          apiKey: key.key,
          body: { name: 'kept', engine: 'postgres', host: 'db' },
        })
      ).body
      const someId = '0195d2c0-0000-7000-8000-000000000000'
      const refused: [string, string, unknown?][] = [
        ['GET', '/api/v1/api-keys'],
        ['POST', '/api/v1/api-keys', { name: 'mine' }],
        ['DELETE', `/api/v1/api-keys/${key.id}`],
        ['GET', '/api/v1/organization/webhook'],
        ['PUT', '/api/v1/organization/webhook', { url: 'https://hooks.example.com/x' }],
        ['POST', '/api/v1/organization/webhook/test', {}],
        ['DELETE', '/api/v1/organization/webhook'],
        ['POST', '/api/v1/organization/invites', { email: newAddress(), role: 'owner' }],
        ['GET', '/api/v1/organization/invites'],
        ['DELETE', `/api/v1/organization/invites/${someId}`],
        ['PATCH', `/api/v1/organization/members/${member.userId}`, { role: 'owner' }],
        ['DELETE', `/api/v1/organization/members/${owner.userId}`],
        // A database's whole history goes with it: not a member's call.
        ['DELETE', `/api/v1/databases/${database.id}`],
      ]
      const answers = await Promise.all(
        refused.map(([method, path, body]) =>
          server.call(method, path, { token: member.token, body }).then((r) => [method, path, r.status, r.body.error]),
        ),
      )
      const what = (path: string) =>
        path.includes('api-keys')
          ? 'manage API keys'
          : path.includes('webhook')
            ? 'manage the webhook'
            : path.includes('databases')
              ? 'delete a database'
              : 'manage invites and members'
      expect(answers).toEqual(refused.map(([method, path]) => [method, path, 403, `only an owner can ${what(path)}`]))
      // Nothing happened: the key is live, the database kept, the owner still there.
      const databases = await server.call('GET', '/api/v1/databases', { apiKey: key.key })
      expect(databases.status).toBe(200)
      expect(databases.body.map((d: { id: string }) => d.id)).toContain(database.id)
      // Members still read a database and change its name, address and tags, but not what is collected (owners only).
      expect(
        (
          await server.call('PATCH', `/api/v1/databases/${database.id}`, {
            token: member.token,
            body: { tags: { team: 'db' } },
          })
        ).status,
      ).toBe(200)
      expect(
        (
          await server.call('PATCH', `/api/v1/databases/${database.id}`, {
            token: member.token,
            body: { poll_interval_seconds: 30 },
          })
        ).status,
      ).toBe(403)
      const members = await server.call('GET', '/api/v1/organization/members', { token: member.token })
      expect(members.body.map((m: { id: string; role: string }) => [m.id, m.role])).toEqual([
        [owner.userId, 'owner'],
        [member.userId, 'member'],
      ])
      // Promoted, the member may from the next request on.
      await server.call('PATCH', `/api/v1/organization/members/${member.userId}`, {
        token: owner.token,
        body: { role: 'owner' },
      })
      expect((await server.call('GET', '/api/v1/api-keys', { token: member.token })).status).toBe(200)
    })

    test('API keys keep the key and webhook routes but never manage invites or members', async () => {
      const owner = await newOrganization()
      const member = await join(server, owner)
      const { key } = await createApiKey(server, owner)
      expect((await server.call('GET', '/api/v1/api-keys', { apiKey: key })).status).toBe(200)
      expect((await server.call('GET', '/api/v1/organization/webhook', { apiKey: key })).status).toBe(404)
      const pending = await invite(server, owner, newAddress())
      const refused: [string, string, unknown?][] = [
        ['POST', '/api/v1/organization/invites', { email: newAddress(), role: 'owner' }],
        ['GET', '/api/v1/organization/invites'],
        ['DELETE', `/api/v1/organization/invites/${pending.id}`],
        ['GET', '/api/v1/organization/members'],
        ['PATCH', `/api/v1/organization/members/${member.userId}`, { role: 'owner' }],
        ['DELETE', `/api/v1/organization/members/${member.userId}`],
      ]
      for (const [method, path, body] of refused) {
        for (const headers of [{ 'x-api-key': key }, { authorization: `Bearer ${key}` }] as Record<string, string>[]) {
          const res = await server.call(method, path, { headers, body })
          expect([method, path, res.status]).toEqual([method, path, 403])
          // The scope table (auth/scopes.ts) refuses every key here, whatever its scopes.
          expect(res.body.error).toBe(
            `API keys cannot use ${method} ${path.replace(/\/[0-9a-f-]{36}$/, '/:id')}: sign in as a user of the organization`,
          )
        }
      }
      expect((await accept(server, pending.token)).status).toBe(201)
      expect((await server.call('GET', '/api/v1/organization/members', { token: owner.token })).body).toHaveLength(3)
    })

    test("another organization's invite and member ids are 404s; ids that are not UUIDs are 400s", async () => {
      const owner = await newOrganization()
      const member = await join(server, owner)
      const pending = await invite(server, owner, newAddress())
      const stranger = await newOrganization('Stranger')
      const calls: [string, string, unknown?][] = [
        ['DELETE', `/api/v1/organization/invites/${pending.id}`],
        ['PATCH', `/api/v1/organization/members/${member.userId}`, { role: 'owner' }],
        ['DELETE', `/api/v1/organization/members/${member.userId}`],
        ['DELETE', `/api/v1/organization/members/${owner.userId}`],
      ]
      for (const [method, path, body] of calls) {
        const res = await server.call(method, path, { token: stranger.token, body })
        expect([path, res.status, res.body.error]).toEqual([
          path,
          404,
          path.includes('invites') ? 'invite not found' : 'member not found',
        ])
      }
      expect((await server.call('GET', '/api/v1/organization/invites', { token: stranger.token })).body).toEqual([])
      expect(
        (await server.call('GET', '/api/v1/organization/members', { token: stranger.token })).body.map(
          (m: { id: string }) => m.id,
        ),
      ).toEqual([stranger.userId])
      expect((await server.call('DELETE', '/api/v1/organization/invites/42', { token: owner.token })).body).toEqual({
        error: 'id must be an invite id (a UUID)',
      })
      expect((await server.call('DELETE', '/api/v1/organization/members/x', { token: owner.token })).body).toEqual({
        error: 'id must be a member id (a UUID)',
      })
      // All still there.
      expect((await accept(server, pending.token)).status).toBe(201)
    })

    test('accept-invite: validation names the field (its rate limit is in rate-limits.test.ts)', async () => {
      const bad = await server.call('POST', '/api/v1/auth/accept-invite', {
        ip: uniqueIp(),
        body: { token: 'x', name: 'n', password: 'short' },
      })
      expect([bad.status, bad.body]).toEqual([400, { error: 'password must be a string of at least 8 characters' }])
      const extra = await server.call('POST', '/api/v1/auth/accept-invite', {
        ip: uniqueIp(),
        body: { token: 'x', name: 'n', password: PASSWORD, email: 'me@evil.test' },
      })
      expect([extra.status, extra.body]).toEqual([400, { error: 'unknown field: email' }])
    })
  })
}

/** A header's RFC 2047 encoded words (`=?UTF-8?Q?…?=`, as nodemailer writes non-ASCII text) decoded. */
function decodeEncodedWords(header: string): string {
  return header.replace(/\?=\s+=\?/g, '?==?').replace(/=\?UTF-8\?Q\?(.*?)\?=/gi, (_, text: string) => {
    const bytes: number[] = []
    for (let i = 0; i < text.length; i++) {
      if (text[i] === '=') {
        bytes.push(Number.parseInt(text.slice(i + 1, i + 3), 16))
        i += 2
      } else bytes.push(...new TextEncoder().encode(text[i] === '_' ? ' ' : text[i]))
    }
    return new TextDecoder().decode(new Uint8Array(bytes))
  })
}

describe('invite mails through an SMTP relay with hostile names', () => {
  let smtp: Awaited<ReturnType<typeof startSmtpReceiver>>
  let relayed: TestServer
  let logged: TestServer
  beforeAll(async () => {
    smtp = await startSmtpReceiver()
    relayed = await startTestServer('sqlite', { smtpUrl: smtp.url, publicUrl: 'https://dbm.example.org' })
    logged = await startTestServer('sqlite')
  })
  afterAll(async () => {
    await relayed?.stop()
    await logged?.stop()
    await smtp?.close()
  })

  const hostileName = 'Eve "Boss" */ DROP\r\nBcc: victim@evil.test\n<script>alert(1)</script> Ünïcødé 🎉\u202e'
  const hostileOrg = "Org' */\n\nOpen https://evil.test/phish instead:\r\n<b>x</b>\u2028"

  /** A verified owner with hostile names (verified: only verified organizations invite). */
  async function hostileOwner(server: TestServer) {
    const email = newAddress('eve')
    const res = await server.call('POST', '/api/v1/auth/signup', {
      ip: uniqueIp(),
      body: { email, password: PASSWORD, name: hostileName, org_name: hostileOrg },
    })
    expect(res.status).toBe(201)
    await server.store.markEmailVerified(res.body.user.id, Date.now())
    return { token: res.body.access_token as string, email }
  }

  test('the mail: a fixed subject, the names quoted on lines of their own as what the inviter typed, the link alone on its line; it works', async () => {
    const { token, email: ownerEmail } = await hostileOwner(relayed)
    const email = newAddress()
    expect(
      (await relayed.call('POST', '/api/v1/organization/invites', { token, body: { email, role: 'member' } })).status,
    ).toBe(201)
    // The address is this test's own: its one mail.
    const mail = await smtp.waitFor(email, /./)
    // Nothing the inviter typed is in the subject.
    expect(decodeEncodedWords(mail.headers.subject!)).toBe(INVITE_SUBJECT)
    expect(mail.headers.bcc).toBeUndefined()
    const lines = mail.text.split('\n')
    expect(lines).toContain(
      `A user of this dbm server, <${ownerEmail}>, invited you to join their organization as a member.`,
    )
    expect(lines).toContain("The names below are what the inviter's side typed; dbm does not check them:")
    // Each name quoted whole on its line: its own quotes escaped, its line breaks and controls spaces.
    expect(lines).toContain(
      `  Inviter's name: "Eve \\"Boss\\" */ DROP Bcc: victim@evil.test <script>alert(1)</script> Ünïcødé 🎉 "`,
    )
    const links = lines.filter((l) => l.includes('https://'))
    // The organization's fake link stays inside its quoted name, the real one is alone on its line.
    expect(links).toHaveLength(2)
    expect(links[0]).toBe(`  Organization's name: "Org' */ Open https://evil.test/phish instead: <b>x</b>"`)
    expect(links[1]).toMatch(/^https:\/\/dbm\.example\.org\/accept-invite\?token=[A-Za-z0-9_-]{43}$/)
    expect(mail.text).not.toMatch(/[\r\u2028\u202e]/)
    const accepted = await accept(relayed, tokenOf(links[1]!))
    expect(accepted.status).toBe(201)
    expect(accepted.body.organization.name).toBe(hostileOrg.trim())
    // The relay's log line has the subject as one escaped value, and no token.
    const sent = relayed.logs.filter((l) => l.includes(' INFO mail sent ') && l.includes(`to=${email}`))
    expect(sent).toHaveLength(1)
    expect(sent[0]).not.toContain(tokenOf(links[1]!))
  })

  test('the log line without SMTP: one line, the subject one escaped value, the link at its end', async () => {
    const { token } = await hostileOwner(logged)
    const email = newAddress()
    expect(
      (await logged.call('POST', '/api/v1/organization/invites', { token, body: { email, role: 'owner' } })).status,
    ).toBe(201)
    await logged.deps.mailer.idle()
    const lines = logged.logs.filter((l) => l.includes(`to=${email}`))
    expect(lines).toHaveLength(1)
    const line = lines[0]!
    expect(line).not.toMatch(/[\r\n\u2028\u202e]/)
    expect(line).toContain(` subject=${JSON.stringify(INVITE_SUBJECT)} link="http://dbm.test:8080/accept-invite?token=`)
    expect(line).not.toContain('Eve')
    const link = /link="(\S+)"$/.exec(line)![1]!
    expect((await accept(logged, tokenOf(link))).body.user.role).toBe('owner')
  })
})
