// Responses of /api/v1/auth: the signed-in user, their organization, the tokens of a session, and the
// one-sentence answers of the mail routes.
import { t } from 'elysia'
import { Timestamp, Uuid } from './common.ts'

export const User = t.Object(
  {
    id: Uuid(),
    email: t.String({ description: 'the address as signed up with (lower case)' }),
    name: t.String(),
    role: t.String({ description: 'owner or member' }),
    email_verified: t.Boolean(),
    created_at: Timestamp(),
  },
  { title: 'User' },
)

export const Organization = t.Object(
  {
    id: Uuid(),
    name: t.String(),
    slug: t.String({ description: 'the name in lower case letters, digits and dashes' }),
    plan: t.String(),
    verified: t.Boolean({
      description:
        'an owner verified their email address: no limit of one database or 24 h retention, recommendations shown',
    }),
    created_at: Timestamp(),
  },
  { title: 'Organization' },
)

/** The tokens of a session; the same two tokens are also set as httpOnly cookies. */
const tokenFields = {
  access_token: t.String({ description: 'a JWT for `Authorization: Bearer`, valid for expires_in seconds' }),
  refresh_token: t.String({ description: 'exchanged once for new tokens at POST /api/v1/auth/refresh (valid 7 days)' }),
  token_type: t.Literal('Bearer'),
  expires_in: t.Integer({ description: "the access token's lifetime in seconds" }),
}

export const Session = t.Object(tokenFields, { title: 'Session' })

export const SignupResult = t.Object(
  { user: User, organization: Organization, ...tokenFields },
  { title: 'SignupResult' },
)

/** GET /auth/me with a user's access token (or the dashboard's cookie). */
export const UserPrincipal = t.Object(
  {
    user: User,
    organization: Organization,
    notifications: t.Object(
      {
        mail: t.Union([t.Literal('smtp'), t.Literal('log')], {
          description: "where this server's mails go: an SMTP server, or only its own log (no DBM_SMTP_URL)",
        }),
        webhook: t.Boolean({
          description: 'whether the organization has an alert webhook (GET /organization/webhook shows it)',
        }),
      },
      { description: "how the organization's alerts are delivered" },
    ),
  },
  { title: 'UserPrincipal' },
)

/** GET /auth/me with an API key: the key names itself (null once revoked). */
export const ApiKeyPrincipal = t.Object(
  {
    organization: Organization,
    api_key: t.Union(
      [
        t.Object({
          id: Uuid(),
          name: t.String(),
          scopes: t.Array(t.Union([t.Literal('ingest'), t.Literal('read'), t.Literal('admin')]), {
            description: 'what the key may do',
          }),
        }),
        t.Null(),
      ],
      { description: 'the key the request was made with' },
    ),
  },
  { title: 'ApiKeyPrincipal' },
)

export const Me = t.Union([UserPrincipal, ApiKeyPrincipal], { title: 'Me' })

export const Verified = t.Object({ verified: t.Literal(true), message: t.String() }, { title: 'Verified' })

export const Message = t.Object({ message: t.String() }, { title: 'Message' })
