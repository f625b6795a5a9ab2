// The link of the password-reset mail, `/reset-password?token=…`: a redirect to the dashboard's reset
// page, `/#/reset?token=…`, which posts the token and the new password to POST /api/v1/auth/reset-password.
// In the fragment the token is never sent to a server again, nor in a Referer (the security headers,
// no-referrer among them, are on this answer as on every other).
import { Elysia } from 'elysia'
import { withSecurityHeaders } from './security-headers.ts'

export function resetPasswordPage() {
  return new Elysia().get('/reset-password', ({ request, set }) => {
    const token = new URL(request.url).searchParams.get('token') ?? ''
    set.status = 302
    withSecurityHeaders(set.headers)
    Object.assign(set.headers, { 'cache-control': 'no-store', location: token ? `/#/reset?token=${encodeURIComponent(token)}` : '/#/reset' })
  }, { detail: { hide: true } })
}
