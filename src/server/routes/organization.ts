// /api/v1/organization/members and /invites, and POST /api/v1/auth/accept-invite: who belongs to an
// organization and how a second person joins it. An owner invites an address with a role; the link
// (`/accept-invite?token=…`, mailed, or logged without SMTP) is valid 7 days, once, and only while it is
// the address's newest invite and no account has that address. Accepting creates the user (the address
// counts as verified) and signs them in as signup does; it works with DBM_SIGNUP=closed, since the
// owner's invite is the consent. Only owners manage invites and members (403 for members, and for API
// keys, which agents carry in config files: a leaked one must not let anyone in); every user of the
// organization may list its members. Never the last owner is removed or demoted (409). Only a verified
// organization invites (403 otherwise): an invite mails any address from the server's genuine sender, so
// a fresh signup must not be able to; and the mail's subject is fixed text, its body quotes the names
// the inviter's side typed as such. Demoting an owner revokes the invites they sent, and an invite whose
// inviter is no longer an owner is refused at acceptance (accounts/members.ts). Removing or demoting a user
// revokes the API keys they created, in the same transaction (accounts/members.ts); the dashboard lists
// those keys (GET /api-keys, by created_by) before it asks. API keys never reach these routes: the
// scope table (auth/scopes.ts) refuses them first, and the routes refuse them again.
import { Elysia, t } from 'elysia'
import { hashPassword } from '../auth/passwords.ts'
import { type Principal, authenticate, requireOwner } from '../auth/principal.ts'
import { randomToken, sha256 } from '../auth/secrets.ts'
import { type CookieJar, startSession } from '../auth/session.ts'
import type { Deps } from '../context.ts'
import { badRequest, conflict, forbidden, notFound, tooManyRequests } from '../http-error.ts'
import { fieldLimits, inviteLimit, passwordLength, tokenLifetimes } from '../limits.ts'
import { mailLine } from '../mail.ts'
import { MEMBER_ROLES, type Invite as InviteRecord } from '../store/accounts/members.ts'
import { organizationView, rfc3339, userView } from '../views.ts'
import { NoContent } from '../../shared/api/common.ts'
import { AcceptedInvite, Invite, Member } from '../../shared/api/organization.ts'
import { errorAnswers, userSession } from '../openapi.ts'
import { normalizeEmail } from './auth.ts'
import { body, email, oneOf, password, pathId, requiredString, token } from './schema.ts'

const MANAGE = 'manage invites and members'
export const LAST_OWNER = 'the organization must keep at least one owner: make another member an owner first'
export const INVALID_INVITE = 'invalid, used, revoked or expired invite token'
export const INVITES_LOCKED =
  'invitations are available to verified organizations; verify your email address to invite people'
/** The invitation mail's subject: fixed text, nothing a user typed (their names are quoted in the body). */
export const INVITE_SUBJECT = 'You are invited to join an organization on dbm'

function inviteView(i: InviteRecord) {
  return {
    id: i.id,
    email: i.email,
    role: i.role,
    invited_by:
      i.invited_by !== null && i.invited_by_name !== null ? { id: i.invited_by, name: i.invited_by_name } : null,
    created_at: rfc3339(i.created_at),
    expires_at: rfc3339(i.expires_at),
  }
}

/** Members' routes refuse API keys. */
/** What the document says of the routes only an owner, signed in, may use. */
const OWNERS_ONLY = errorAnswers({
  403: 'a member, or an API key: only an owner signed in can manage invites and members',
})

function userOnly(principal: Principal) {
  if (principal.kind !== 'user')
    throw forbidden('API keys cannot read the members: sign in as a user of the organization')
  return principal
}

const memberView = (u: Parameters<typeof userView>[0]) => ({
  ...userView(u),
  role: u.role === 'owner' ? ('owner' as const) : ('member' as const),
})

/** A name someone typed, as one quoted line: its own quotes and backslashes escaped, so the quote cannot end early. */
const quoted = (s: string) => JSON.stringify(mailLine(s))

/**
 * The invitation mail. The subject is fixed text; the inviter's and organization's names, which their
 * users typed, are only in the body, each quoted on its own line and introduced as what the inviter
 * typed, so they read as claims, not as dbm's words.
 */
function inviteMail(to: string, inviter: { name: string; email: string }, orgName: string, role: string, link: string) {
  return {
    to,
    subject: INVITE_SUBJECT,
    link,
    text:
      `Hello,\n\nA user of this dbm server, ${mailLine(`<${inviter.email}>`)}, invited you to join their organization as ${role === 'owner' ? 'an owner' : 'a member'}.\n\n` +
      `The names below are what the inviter's side typed; dbm does not check them:\n` +
      `  Inviter's name: ${quoted(inviter.name)}\n` +
      `  Organization's name: ${quoted(orgName)}\n\n` +
      `Open this link within 7 days to choose your name and password:\n\n${link}\n\n` +
      'The link works once. If you did not expect this mail, ignore it: nothing happens without the link.\n',
  }
}

export function organizationRoutes(deps: Deps) {
  const { store, clock } = deps
  const members = store.members

  // Owners only (users; API keys never).
  const manage = new Elysia({ prefix: '/api/v1/organization' })
    .derive(async ({ request }) => ({
      principal: requireOwner(await authenticate(deps, request), MANAGE, { apiKeys: false }),
    }))
    .post(
      '/invites',
      async ({ principal, body, set }) => {
        // Each invite mails any address from the server's sender: verified organizations only.
        const [inviter, org] = await Promise.all([
          store.getUser(principal.userId),
          store.getOrganization(principal.orgId),
        ])
        if (!org?.verified) throw forbidden(INVITES_LOCKED)
        // Each invite mails someone: counted per organization, refused ones too.
        const hit = await store.hitRateLimit(
          `rate:invite:${principal.orgId}`,
          inviteLimit.limit,
          inviteLimit.windowMs,
          clock(),
        )
        if (!hit.allowed) throw tooManyRequests(hit.retryAfterMs)
        const secret = randomToken()
        const now = clock()
        const address = normalizeEmail(body.email)
        const invite = await members.createInvite({
          orgId: principal.orgId,
          email: address,
          role: body.role,
          tokenHash: sha256(secret),
          invitedBy: principal.userId,
          now,
          expiresAt: now + tokenLifetimes.inviteMs,
        })
        if (invite === 'registered') throw conflict('that email address already has an account on this server')
        deps.mailer.send(
          inviteMail(
            address,
            { name: inviter?.name ?? '', email: inviter?.email ?? '' },
            org.name,
            body.role,
            `${deps.publicUrl}/accept-invite?token=${secret}`,
          ),
        )
        set.status = 201
        return inviteView(invite)
      },
      {
        body: body({ email: email(), role: oneOf('role', MEMBER_ROLES) }),
        response: { 201: Invite },
        detail: {
          summary:
            'Invite an address to the organization (owners): the link is mailed, valid 7 days; a pending invite of that address is replaced',
          security: userSession,
          responses: errorAnswers({
            403: 'a member, or an API key (only an owner signed in can manage invites and members); or the organization is not verified (only verified organizations invite)',
            409: 'the address has an account on this server already',
            429: 'over the invites an organization may send in an hour (see Retry-After)',
          }),
        },
      },
    )
    .get('/invites', async ({ principal }) => (await members.listInvites(principal.orgId, clock())).map(inviteView), {
      response: { 200: t.Array(Invite) },
      detail: {
        summary: "The organization's pending invites, newest first (owners)",
        security: userSession,
        responses: OWNERS_ONLY,
      },
    })
    .delete(
      '/invites/:id',
      async ({ principal, params, set }) => {
        const outcome = await members.revokeInvite(principal.orgId, pathId(params.id, 'invite'), clock())
        if (outcome === 'not_found') throw notFound('invite')
        if (outcome === 'accepted') throw conflict('the invite was already accepted: remove the member instead')
        set.status = 204
      },
      {
        response: { 204: NoContent },
        detail: {
          summary: 'Revoke an invite (owners): its link stops working',
          security: userSession,
          responses: { ...OWNERS_ONLY, ...errorAnswers({ 409: 'the invite was accepted: remove the member instead' }) },
        },
      },
    )
    .patch(
      '/members/:id',
      async ({ principal, params, body }) => {
        const outcome = await members.setMemberRole(principal.orgId, pathId(params.id, 'member'), body.role, clock())
        if (outcome === 'not_found') throw notFound('member')
        if (outcome === 'last_owner') throw conflict(LAST_OWNER)
        return memberView(outcome)
      },
      {
        body: body({ role: oneOf('role', MEMBER_ROLES) }),
        response: { 200: Member },
        detail: {
          summary:
            "Change a member's role (owners); never the last owner's. Demoting an owner revokes the invites they sent and the API keys they created",
          security: userSession,
          responses: { ...OWNERS_ONLY, ...errorAnswers({ 409: 'the organization would have no owner left' }) },
        },
      },
    )
    .delete(
      '/members/:id',
      async ({ principal, params, set }) => {
        const outcome = await members.removeMember(principal.orgId, pathId(params.id, 'member'), clock())
        if (outcome === 'not_found') throw notFound('member')
        if (outcome === 'last_owner') throw conflict(LAST_OWNER)
        set.status = 204
      },
      {
        response: { 204: NoContent },
        detail: {
          summary:
            'Remove a member (owners): their sessions end and the API keys they created are revoked at once; never the last owner',
          security: userSession,
          responses: { ...OWNERS_ONLY, ...errorAnswers({ 409: 'the organization would have no owner left' }) },
        },
      },
    )

  // Every user of the organization (API keys never: an agent has no use for people's addresses).
  const read = new Elysia({ prefix: '/api/v1/organization' })
    .derive(async ({ request }) => ({ principal: userOnly(await authenticate(deps, request)) }))
    .get('/members', async ({ principal }) => (await members.listMembers(principal.orgId)).map(memberView), {
      response: { 200: t.Array(Member) },
      detail: {
        summary: "The organization's users and their roles, oldest first",
        security: userSession,
        responses: errorAnswers({ 403: 'an API key: only users see the members' }),
      },
    })

  // The invite link's page posts here: no session, rate-limited per client address (app.ts).
  const accept = new Elysia().post(
    '/api/v1/auth/accept-invite',
    async ({ body, cookie, set }) => {
      const passwordHash = await hashPassword(body.password)
      const outcome = await members.acceptInvite({
        tokenHash: sha256(body.token),
        name: body.name.trim(),
        passwordHash,
        now: clock(),
      })
      if (outcome === 'invalid') throw badRequest(INVALID_INVITE)
      if (outcome === 'registered')
        throw conflict('that email address already has an account on this server: sign in with it')
      const session = await startSession(deps, outcome.user, cookie as CookieJar)
      set.status = 201
      return { user: memberView(outcome.user), organization: organizationView(outcome.org), ...session }
    },
    {
      body: body({
        token: token('token'),
        name: requiredString('name', fieldLimits.name),
        password: password('password', passwordLength.min, passwordLength.max),
      }),
      response: { 201: AcceptedInvite },
      detail: {
        summary: "Accept an invite: creates the invited address's user (verified) and signs them in, as signup does",
        security: [],
        responses: errorAnswers({ 409: 'the address got an account meanwhile: sign in with it' }),
      },
    },
  )

  return new Elysia().use(manage).use(read).use(accept)
}
