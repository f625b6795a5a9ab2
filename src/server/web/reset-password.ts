// The link of the password-reset mail, `/reset-password?token=…`: a redirect to the dashboard's reset
// page, `/#/reset?token=…`, which posts the token and the new password to POST /api/v1/auth/reset-password.
// In the fragment the token is never sent to a server again, nor in a Referer.
import { Elysia } from 'elysia'

const headers = {
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
}

export function resetPasswordPage() {
  return new Elysia().get('/reset-password', ({ request, set }) => {
    const token = new URL(request.url).searchParams.get('token') ?? ''
    set.status = 302
    Object.assign(set.headers, headers, { location: token ? `/#/reset?token=${encodeURIComponent(token)}` : '/#/reset' })
  })
}
