// The links of mails that carry a token: `/reset-password?token=…` (password reset) and
// `/accept-invite?token=…` (an invitation to an organization), each a redirect to its dashboard page,
// `/#/reset?token=…` and `/#/accept-invite?token=…`, which posts the token (with the new password, or the
// new member's name and password) to the API. In the fragment the token is never sent to a server again,
// nor in a Referer (the security headers, no-referrer among them, are on this answer as on every other).
import { Elysia } from 'elysia'
import { withSecurityHeaders } from './security-headers.ts'

function tokenLinkPage(path: string, route: string) {
  return new Elysia().get(
    path,
    ({ request, set }) => {
      const token = new URL(request.url).searchParams.get('token') ?? ''
      set.status = 302
      withSecurityHeaders(set.headers)
      Object.assign(set.headers, {
        'cache-control': 'no-store',
        location: token ? `/#${route}?token=${encodeURIComponent(token)}` : `/#${route}`,
      })
    },
    { detail: { hide: true } },
  )
}

export const resetPasswordPage = () => tokenLinkPage('/reset-password', '/reset')

export const acceptInvitePage = () => tokenLinkPage('/accept-invite', '/accept-invite')
