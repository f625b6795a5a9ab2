// Account endpoints under /api/v1/auth: signup, login, refresh (rotating, with reuse detection),
// logout, me, e-mail verification, password reset. Rate limits are applied in app.ts by path.
import { Elysia, t } from 'elysia'
import { burnPasswordCheck, hashPassword, verifyPassword } from '../auth/passwords.ts'
import { REFRESH_COOKIE, authenticate, presentedAccessToken, readCookie } from '../auth/principal.ts'
import { type CookieJar, sessionCookies, startSession as startUserSession } from '../auth/session.ts'
import { randomToken, sha256 } from '../auth/secrets.ts'
import type { Deps } from '../context.ts'
import { badRequest, conflict, forbidden, tooManyRequests, unauthorized } from '../http-error.ts'
import { fieldLimits, mailCooldownMs, passwordLength, tokenLifetimes } from '../limits.ts'
import { EmailTakenError, SignupClosedError } from '../store/accounts/types.ts'
import type { User } from '../store/types.ts'
import { organizationView, userView } from '../views.ts'
import { Me, Message, Session, SignupResult, Verified } from '../../shared/api/auth.ts'
import { NoContent } from '../../shared/api/common.ts'
import { errorAnswers } from '../openapi.ts'
import { body, email, password, query, requiredString, token } from './schema.ts'

export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48)
  return slug || 'org'
}

export const normalizeEmail = (value: string) => value.trim().toLowerCase()

export function authRoutes(deps: Deps) {
  const { store, tokens, mailer, clock } = deps
  const cookies = sessionCookies(deps)
  const setSessionCookies = cookies.set
  const clearSessionCookies = cookies.clear
  /** A new session (new refresh-token family) for the user. */
  const startSession = (user: User, cookie: CookieJar) => startUserSession(deps, user, cookie)

  const sendVerification = async (user: User) => {
    const token = randomToken()
    const now = clock()
    await store.createEmailToken({
      tokenHash: sha256(token),
      userId: user.id,
      kind: 'verify',
      expiresAt: now + tokenLifetimes.verifyMs,
      now,
    })
    // The dashboard's verify page reads the token from the fragment (never sent to a server or in a
    // Referer), calls GET /auth/verify-email and shows the result.
    const link = `${deps.publicUrl}/#/verify?token=${token}`
    mailer.send({
      to: user.email,
      subject: 'Verify your email address for dbm',
      link,
      text: `Hello ${user.name},\n\nopen this link to verify your email address for dbm:\n\n${link}\n\nThe link is valid for 7 days.\n`,
    })
  }

  /** The user behind a Bearer or cookie access token; API keys are refused here. */
  const requireUser = async (request: Request, _cookie: CookieJar) => {
    const principal = await authenticate(deps, request)
    if (principal.kind !== 'user') throw unauthorized('this endpoint needs a user access token, not an API key')
    const user = await store.getUser(principal.userId)
    if (!user) throw unauthorized('invalid or expired access token')
    return user
  }

  return new Elysia({ prefix: '/api/v1/auth' })
    .post(
      '/signup',
      async ({ body, cookie, set }) => {
        const passwordHash = await hashPassword(body.password)
        let created
        try {
          created = await store.createAccount({
            org: { name: body.org_name.trim(), slug: slugify(body.org_name), plan: 'free' },
            user: { email: normalizeEmail(body.email), name: body.name.trim(), passwordHash, role: 'owner' },
            // DBM_SIGNUP=closed: only the first account, which sets up a fresh server (dbm local's is its own).
            onlyFirst: deps.signup === 'closed' || deps.signup === 'local',
          })
        } catch (e) {
          if (e instanceof SignupClosedError) throw forbidden(e.message)
          if (e instanceof EmailTakenError) throw conflict('email is already registered')
          throw e
        }
        await sendVerification(created.user)
        const session = await startSession(created.user, cookie as CookieJar)
        set.status = 201
        return { user: userView(created.user), organization: organizationView(created.org), ...session }
      },
      {
        body: body(
          {
            email: email(),
            password: password('password', passwordLength.min, passwordLength.max),
            name: requiredString('name', fieldLimits.name),
            org_name: requiredString('org_name', fieldLimits.name),
          },
          {
            examples: [
              {
                email: 'ada@example.com',
                password: 'correct horse battery staple',
                name: 'Ada',
                org_name: 'Analytical Engines',
              },
            ],
          },
        ),
        response: { 201: SignupResult },
        detail: {
          summary: 'Create an account: an organization and its first user (owner); mails a verification link',
          security: [],
          responses: errorAnswers({
            403: 'signup is closed on this server (DBM_SIGNUP=closed)',
            409: 'the email address is registered already',
          }),
        },
      },
    )
    .post(
      '/login',
      async ({ body, cookie }) => {
        const user = await store.findUserByEmail(normalizeEmail(body.email))
        const ok = user
          ? await verifyPassword(body.password, user.password_hash)
          : await burnPasswordCheck(body.password)
        if (!user || !ok) throw unauthorized('invalid email or password')
        return startSession(user, cookie as CookieJar)
      },
      {
        body: body(
          {
            email: token('email', 254),
            password: t.String({ minLength: 1, maxLength: passwordLength.max, error: 'password is required' }),
          },
          { examples: [{ email: 'ada@example.com', password: 'correct horse battery staple' }] },
        ),
        response: { 200: Session },
        detail: {
          summary: 'Sign in with email and password',
          security: [],
          responses: errorAnswers({ 401: 'invalid email or password' }),
        },
      },
    )
    .post(
      '/refresh',
      async ({ body, cookie, request }) => {
        const presented = body?.refresh_token ?? readCookie(request, REFRESH_COOKIE)
        if (!presented) throw badRequest('refresh_token is required')
        const claims = await tokens.verifyRefresh(presented)
        if (!claims) throw unauthorized('invalid or expired refresh token')
        const jti = Bun.randomUUIDv7()
        const next = await tokens.signRefresh(claims.sub, jti)
        const result = await store.rotateRefreshToken(claims.jti, { id: jti, expires_at: next.expiresAt }, clock())
        if (!result.ok) {
          if (result.reason === 'reused') {
            deps.log.warn('refresh token reuse detected; session family revoked', { user: claims.sub })
            throw unauthorized('refresh token was already used; the session has been revoked, sign in again')
          }
          throw unauthorized('invalid or expired refresh token')
        }
        const user = await store.getUser(result.userId)
        if (!user) throw unauthorized('invalid or expired refresh token')
        const access = await tokens.signAccess(user.id, user.org_id, result.sessionId)
        setSessionCookies(cookie as CookieJar, access, next.token)
        return {
          access_token: access,
          refresh_token: next.token,
          token_type: 'Bearer' as const,
          expires_in: tokenLifetimes.accessSeconds,
        }
      },
      {
        body: t.Optional(
          body({
            refresh_token: t.Optional(
              t.String({
                minLength: 1,
                maxLength: 4096,
                error: 'refresh_token must be a non-empty string of at most 4096 characters',
              }),
            ),
          }),
        ),
        response: { 200: Session },
        detail: {
          summary: 'Exchange a refresh token (body or cookie) for new tokens; a reused one revokes its session',
          security: [],
          responses: errorAnswers({ 401: 'invalid, expired or reused refresh token' }),
        },
      },
    )
    .post(
      '/logout',
      async ({ body, cookie, request, set }) => {
        // Ends the session of the refresh token and that of the access token presented (cookies or
        // body and Bearer header): both, with the access tokens issued to them, are refused from now on.
        const presented = body?.refresh_token ?? readCookie(request, REFRESH_COOKIE)
        const claims = presented ? await tokens.verifyRefresh(presented) : undefined
        if (claims) await store.revokeRefreshToken(claims.jti, clock())
        const access = presentedAccessToken(request)
        const accessClaims = access ? await tokens.verifyAccess(access) : undefined
        if (accessClaims) await store.revokeSession(accessClaims.sub, accessClaims.sid, clock())
        clearSessionCookies(cookie as CookieJar)
        set.status = 204
      },
      {
        body: t.Optional(
          body({
            refresh_token: t.Optional(
              t.String({ maxLength: 4096, error: 'refresh_token must be a string of at most 4096 characters' }),
            ),
          }),
        ),
        response: { 204: NoContent },
        detail: {
          summary: 'Sign out: ends the session of the refresh token and of the access token presented',
          security: [],
        },
      },
    )
    .get(
      '/me',
      async ({ request, cookie }) => {
        const principal = await authenticate(deps, request)
        const org = await store.getOrganization(principal.orgId)
        if (!org) throw unauthorized('organization no longer exists')
        if (principal.kind === 'api_key') {
          const key = (await store.listApiKeys(org.id, false)).find((k) => k.id === principal.apiKeyId)
          return {
            organization: organizationView(org),
            api_key: key ? { id: key.id, name: key.name, scopes: key.scopes } : null,
          }
        }
        const user = await store.getUser(principal.userId)
        if (!user) throw unauthorized('invalid or expired access token')
        const webhook = await store.monitor.getWebhook(org.id)
        return {
          user: userView(user),
          organization: organizationView(org),
          notifications: { mail: deps.mailer.transport, webhook: webhook !== undefined },
        }
      },
      {
        response: { 200: Me },
        detail: { summary: 'Who the request is made as: the user, or the API key, and the organization' },
      },
    )
    .get(
      '/verify-email',
      async ({ query }) => {
        const hash = sha256(query.token)
        const userId = await store.consumeEmailToken(hash, 'verify', clock())
        if (!userId) {
          // The link opened a second time (a mail scanner, a double click): no error for a verified user.
          const usedBy = await store.usedEmailTokenUser(hash, 'verify')
          const user = usedBy ? await store.getUser(usedBy) : undefined
          if (user?.email_verified_at != null) return { verified: true, message: 'email already verified' }
          throw badRequest('invalid or expired verification token')
        }
        await store.markEmailVerified(userId, clock())
        return { verified: true, message: 'email address verified' }
      },
      {
        query: query({ token: token('token') }),
        response: { 200: Verified },
        detail: { summary: "Verify the account's email address with the mailed token", security: [] },
      },
    )
    .post(
      '/resend-verification',
      async ({ request, cookie }) => {
        const user = await requireUser(request, cookie as CookieJar)
        if (user.email_verified_at !== null) throw conflict('email address is already verified')
        const cooldown = await store.takeCooldown(`cooldown:resend:${user.id}`, mailCooldownMs, clock())
        if (!cooldown.allowed) throw tooManyRequests(cooldown.retryAfterMs)
        await sendVerification(user)
        return { message: 'verification email sent' }
      },
      {
        response: { 200: Message },
        detail: {
          summary: 'Send the verification mail again (a user access token only; once per cooldown)',
          security: [{ bearer: [] }, { cookie: [] }],
          responses: errorAnswers({
            409: 'the address is verified already',
            429: 'asked again within the cooldown (see Retry-After)',
          }),
        },
      },
    )
    .post(
      '/forgot-password',
      async ({ body }) => {
        const address = normalizeEmail(body.email)
        // Keyed by the address as submitted, existing or not, so the 429 reveals nothing either.
        const cooldown = await store.takeCooldown(`cooldown:forgot:${address}`, mailCooldownMs, clock())
        if (!cooldown.allowed) throw tooManyRequests(cooldown.retryAfterMs)
        const user = await store.findUserByEmail(address)
        if (user) {
          const token = randomToken()
          const now = clock()
          await store.createEmailToken({
            tokenHash: sha256(token),
            userId: user.id,
            kind: 'reset',
            expiresAt: now + tokenLifetimes.resetMs,
            now,
          })
          const link = `${deps.publicUrl}/reset-password?token=${token}`
          mailer.send({
            to: user.email,
            subject: 'Reset your dbm password',
            link,
            text:
              `Hello ${user.name},\n\nsomeone asked to reset the password of your dbm account. Open this link within one hour to choose a new one:\n\n${link}\n\n` +
              `Or call the API:\n\ncurl -X POST ${deps.publicUrl}/api/v1/auth/reset-password -H 'content-type: application/json' -d '{"token":"${token}","password":"<new password>"}'\n\n` +
              'If you did not ask for this, ignore this mail: your password stays as it is.\n',
          })
        }
        return { message: 'if an account exists for that email, a password reset link has been sent' }
      },
      {
        body: body({ email: email() }, { examples: [{ email: 'ada@example.com' }] }),
        response: { 200: Message },
        detail: {
          summary: 'Mail a password reset link, if an account has that address (the answer is the same either way)',
          security: [],
          responses: errorAnswers({ 429: 'asked again for that address within the cooldown (see Retry-After)' }),
        },
      },
    )
    .post(
      '/reset-password',
      async ({ body }) => {
        const userId = await store.consumeEmailToken(sha256(body.token), 'reset', clock())
        if (!userId) throw badRequest('invalid or expired reset token')
        await store.setPassword(userId, await hashPassword(body.password))
        await store.revokeUserSessions(userId, clock())
        return { message: 'password updated; sign in with the new password' }
      },
      {
        body: body({
          token: token('token'),
          password: password('password', passwordLength.min, passwordLength.max),
        }),
        response: { 200: Message },
        detail: {
          summary: 'Set a new password with the mailed reset token; ends every session of the user',
          security: [],
        },
      },
    )
}
