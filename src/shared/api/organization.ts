// Responses of /api/v1/organization (members and invites) and of POST /api/v1/auth/accept-invite.
import { t } from 'elysia'
import { Nullable, Timestamp, Uuid } from './common.ts'

export const Role = t.Union([t.Literal('owner'), t.Literal('member')], {
  description:
    'owner: everything, including API keys, the webhook, invites and members; member: reads and database settings',
})

export const Member = t.Object(
  {
    id: Uuid(),
    email: t.String({ description: 'the address as signed up with (lower case)' }),
    name: t.String(),
    role: Role,
    email_verified: t.Boolean(),
    created_at: Timestamp('when the user signed up or accepted their invite'),
  },
  { title: 'Member' },
)

export const Invite = t.Object(
  {
    id: Uuid(),
    email: t.String({ description: 'the address the link was mailed to; only it can join with the link' }),
    role: Role,
    invited_by: Nullable(
      t.Object(
        { id: Uuid(), name: t.String() },
        { description: 'the owner who sent it; null once that user was removed' },
      ),
    ),
    created_at: Timestamp(),
    expires_at: Timestamp('the link stops working then (7 days after it was sent)'),
  },
  { title: 'Invite' },
)

/** POST /auth/accept-invite: the new user, their organization and a session, as signup answers. */
export const AcceptedInvite = t.Object(
  {
    user: Member,
    organization: t.Object({
      id: Uuid(),
      name: t.String(),
      slug: t.String(),
      plan: t.String(),
      verified: t.Boolean(),
      created_at: Timestamp(),
    }),
    access_token: t.String({ description: 'a JWT for `Authorization: Bearer`, valid for expires_in seconds' }),
    refresh_token: t.String({
      description: 'exchanged once for new tokens at POST /api/v1/auth/refresh (valid 7 days)',
    }),
    token_type: t.Literal('Bearer'),
    expires_in: t.Integer({ description: "the access token's lifetime in seconds" }),
  },
  { title: 'AcceptedInvite' },
)
